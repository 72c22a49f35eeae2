"""A hostile user's pass over every command and engine (issue "hardening"): each command x
engine is run under each hostile condition and judged by the safety rules.

Conditions:
- full-disk: the output on a 96 KiB tmpfs (32 KiB for `count`'s one table);
- read-only: the output in a read-only mount;
- fifo / idle-stdin: the input a named pipe nobody opens, or standard input a pipe held open
  with nothing written, SIGTERM after 1.5 s;
- sigint@F / sigterm@F: the signal at fraction F of a normal run's wall time, over a previous
  complete output;
- concurrent: two identical runs into one output, started together;
- oversized: one 40 MB line without a space (a single word), with --memory-limit 1GB where the
  command takes it.

Rules (a cell passes when all that apply hold):
- exit 0, 2 (with exactly one `tokcolumnar: error:` line and no traceback), 130 (SIGINT) or
  143 (SIGTERM); never 1, never a traceback, never "internal error";
- after a signal or an error, the previous output is byte-identical and no `*.tmp` file is
  left in the output's folder (a kept work directory must be named in the error line);
- a signal is obeyed within 2 s;
- two concurrent runs: one succeeds, the other is refused in one line (or both succeed one
  after the other), and the output is one run's whole output;
- oversized with a memory limit: peak RSS within the limit, or refused.

Needs root (tmpfs mounts). Run from a checkout:

    python scripts/hostile_pass.py --out hostile.md       # ~10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))
SMALL = CORPORA / "small" / "en_shakespeare_500k.txt"


@dataclass
class Result:
    command: str
    condition: str
    code: int | None
    seconds: float
    line: str
    leftovers: list[str]
    verdict: str
    peak_mib: float = 0.0


def env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONFAULTHANDLER": "1"}


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tokcolumnar", *args], cwd=cwd, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


def finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int | None, str, float]:
    """Wait for the process; its exit code, stderr and peak RSS (MiB)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by subprocess already (its returncode is set)
            err = proc.stderr.read() if proc.stderr else ""
            return proc.returncode, err, 0.0
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            err = proc.stderr.read() if proc.stderr else ""
            return proc.returncode, err, usage.ru_maxrss / 1024
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    return None, (proc.stderr.read() if proc.stderr else ""), 0.0


def digest(path: Path) -> str:
    """A digest of a file or a folder's files (names and bytes)."""
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode())
                h.update(p.read_bytes())
    else:
        return "absent"
    return h.hexdigest()[:12]


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    """Files in `folder` (recursively) that look temporary, or are not in `keep`."""
    found = []
    for p in folder.rglob("*"):
        rel = str(p.relative_to(folder))
        if p.is_file() and (".tmp" in p.name or rel.split("/")[0] not in keep):
            found.append(rel)
    return sorted(found)[:5]


def judge_exit(code: int | None, err: str, allowed: tuple[int, ...]) -> str:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    if code is None:
        return "HANG"
    if "Traceback" in err or "internal error" in err:
        return "TRACEBACK"
    if code not in allowed:
        return f"EXIT {code}"
    if code == 2:
        errors = [x for x in lines if x.startswith("tokcolumnar: error:")]
        if len(errors) != 1:
            return "NOT ONE ERROR LINE"
    return "ok"


def last_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    return (lines[-1] if lines else "")[:150]


class Mount:
    """A tmpfs of `size` at a fresh folder (read-only when `ro`)."""

    def __init__(self, base: Path, size: str, ro: bool = False) -> None:
        self.path = Path(tempfile.mkdtemp(dir=base))
        opts = f"size={size}" + (",ro" if ro else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(self.path)], check=True)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)
        shutil.rmtree(self.path, ignore_errors=True)


def commands(tok: Path) -> dict[str, dict]:
    """Each command: argv given (input, output), the name of its output inside a folder, and
    whether it takes an input file and a memory limit."""
    return {
        "train/polars": dict(argv=lambda i, o: ["train", i, "--out", o, "--vocab-size", "4000"],
                             out="model", takes_input=True, limit=True),
        "train/duckdb": dict(argv=lambda i, o: ["train", i, "--out", o, "--vocab-size", "2000",
                                                "--engine", "duckdb"],
                             out="model", takes_input=True, limit=True),
        "train/unigram": dict(argv=lambda i, o: ["train", i, "--out", o, "--vocab-size", "4000",
                                                 "--preset", "sentencepiece"],
                              out="model", takes_input=True, limit=True),
        "train/llama2": dict(argv=lambda i, o: ["train", i, "--out", o, "--vocab-size", "4000",
                                                "--preset", "llama2"],
                             out="model", takes_input=True, limit=True),
        "count/polars": dict(argv=lambda i, o: ["count", i, "--out", o],
                             out="words.parquet", takes_input=True, limit=True, disk="32k"),
        "count/duckdb": dict(argv=lambda i, o: ["count", i, "--out", o, "--engine", "duckdb"],
                             out="words.parquet", takes_input=True, limit=True, disk="32k"),
        "encode/polars": dict(argv=lambda i, o: ["encode", "--tokenizer", str(tok), i,
                                                 "--out", o],
                              out="ids.parquet", takes_input=True, limit=False),
        "sql/duckdb": dict(argv=lambda i, o: ["sql", str(tok), "SELECT r.range AS n, v.* FROM "
                                              "range(3000) r, vocab v", "--output", o,
                                              "--format", "csv"],
                           out="q.csv", takes_input=False, limit=False),
        "crosscheck/both": dict(argv=lambda i, o: ["crosscheck", i, "--vocab-size", "1500"],
                                out=None, takes_input=True, limit=False),
    }


def run_cell(name: str, spec: dict, condition: str, work: Path, corpus: Path,
             big: Path, fraction: float = 0.0, base_seconds: float = 1.0) -> Result:
    folder = Path(tempfile.mkdtemp(dir=work))
    out_name = spec["out"] or "none"
    keep = {out_name, out_name + ".work"}

    def argv(inp: Path, out: Path) -> list[str]:
        return spec["argv"](str(inp), str(out))

    if condition in ("full-disk", "read-only"):
        if spec["out"] is None:
            return Result(name, condition, None, 0, "no output", [], "n/a")
        with Mount(work, spec.get("disk", "96k"), ro=condition == "read-only") as mnt:
            t = time.monotonic()
            code, err, peak = finish(start(argv(corpus, mnt / spec["out"]), folder))
            secs = time.monotonic() - t
            left = leftovers(mnt, keep) + [p for p in os.listdir(mnt) if p != spec["out"]
                                           and p + "" not in keep]
            verdict = judge_exit(code, err, (2,))
            named = spec["out"] in err or str(mnt) in err
            if verdict == "ok" and not named:
                verdict = "PATH NOT NAMED"
            tmp = [x for x in leftovers(mnt, set()) if ".tmp" in x]
            if verdict == "ok" and tmp:
                verdict = "TEMP LEFT"
            work_left = [p for p in os.listdir(mnt) if p.endswith(".work")]
            if verdict == "ok" and work_left and "--resume" not in err:
                verdict = "WORK DIR LEFT UNNAMED"
            return Result(name, condition, code, secs, last_line(err), sorted(set(left))[:5],
                          verdict, peak)

    out = folder / out_name
    if condition in ("fifo", "idle-stdin"):
        if not spec["takes_input"]:
            return Result(name, condition, None, 0, "takes no input", [], "n/a")
        if condition == "fifo":
            fifo = folder / "in.txt"
            os.mkfifo(fifo)
            proc = start(argv(fifo, out), folder)
        else:  # standard input a pipe held open, nothing written
            reader, writer = os.pipe()
            proc = subprocess.Popen([sys.executable, "-m", "tokcolumnar",
                                     *argv(Path("-"), out)], cwd=folder, env=env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    stdin=reader)
            os.close(reader)
        time.sleep(1.5)
        t = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        code, err, peak = finish(proc, timeout=10)
        secs = time.monotonic() - t
        if condition == "idle-stdin":
            os.close(writer)
        # (exit 2: refused in one line before waiting, as crosscheck refuses a pipe it would
        # read twice)
        verdict = judge_exit(code, err, (143, 2))
        if verdict == "ok" and code == 143 and secs > 2:
            verdict = f"SLOW STOP {secs:.1f}s"
        tmp = [x for x in leftovers(folder, set()) if ".tmp" in x]
        if verdict == "ok" and tmp:
            verdict = "TEMP LEFT"
        return Result(name, condition, code, secs, last_line(err), tmp, verdict, peak)

    if condition.startswith("sig"):
        sig = signal.SIGINT if condition.startswith("sigint") else signal.SIGTERM
        expect = 130 if sig == signal.SIGINT else 143
        if spec["out"] is not None:  # a previous complete output
            code, err, _ = finish(start(argv(corpus, out), folder))
            if code != 0:
                return Result(name, condition, code, 0, last_line(err), [], "SETUP FAILED")
        before = digest(out)
        args = argv(corpus, out) + (["--force"] if spec["out"] is not None else [])
        proc = start(args, folder)
        time.sleep(fraction * base_seconds)
        t = time.monotonic()
        os.kill(proc.pid, sig)
        code, err, peak = finish(proc, timeout=60)
        secs = time.monotonic() - t
        verdict = judge_exit(code, err, (0, expect))
        if verdict == "ok" and code == expect and secs > 2:
            verdict = f"SLOW STOP {secs:.1f}s"
        after = digest(out)
        if verdict == "ok" and code == expect and after != before:
            verdict = "OUTPUT CHANGED"
        tmp = [x for x in leftovers(folder, set()) if ".tmp" in x]
        if verdict == "ok" and tmp:
            verdict = "TEMP LEFT"
        return Result(name, condition, code, secs, last_line(err), tmp, verdict, peak)

    if condition == "concurrent":
        if spec["out"] is None:
            return Result(name, condition, None, 0, "no output", [], "n/a")
        t = time.monotonic()
        # different work directories, so that only the output itself is shared
        extra = (lambda k: ["--work-dir", str(folder / f"w{k}")]) if spec["limit"] else (
            lambda k: [])
        a = start(argv(corpus, out) + extra(1), folder)
        b = start(argv(corpus, out) + extra(2), folder)
        (ca, ea, pa), (cb, eb, pb) = finish(a), finish(b)
        secs = time.monotonic() - t
        codes = sorted([ca, cb])
        va, vb = judge_exit(ca, ea, (0, 2)), judge_exit(cb, eb, (0, 2))
        verdict = va if va != "ok" else vb
        # both 0: the first ended before the second took the output's lock (a fast command),
        # which the rules allow (each output is written whole, atomically)
        if verdict == "ok" and codes not in ([0, 2], [0, 0]):
            verdict = f"EXITS {codes}"
        line = last_line(ea if ca == 2 else eb)
        tmp = [x for x in leftovers(folder, set()) if ".tmp" in x]
        if verdict == "ok" and tmp:
            verdict = "TEMP LEFT"
        return Result(name, condition, ca if ca else cb, secs, line, tmp, verdict, max(pa, pb))

    if condition == "oversized":
        if not spec["takes_input"]:
            return Result(name, condition, None, 0, "takes no input", [], "n/a")
        args = argv(big, out) + (["--memory-limit", "1GB"] if spec["limit"] else [])
        t = time.monotonic()
        code, err, peak = finish(start(args, folder))
        secs = time.monotonic() - t
        verdict = judge_exit(code, err, (0, 2))
        if verdict == "ok" and spec["limit"] and peak > 1000:
            verdict = f"OVER LIMIT {peak:.0f} MiB"
        tmp = [x for x in leftovers(folder, set()) if ".tmp" in x]
        if verdict == "ok" and tmp:
            verdict = "TEMP LEFT"
        return Result(name, condition, code, secs, last_line(err), tmp, verdict, peak)
    raise ValueError(condition)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write the table (markdown) here as well")
    ap.add_argument("--only", default="", help="commands to run, comma-separated (all)")
    ap.add_argument("--conditions", default="", help="conditions to run, comma-separated")
    opts = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        tok_dir = work / "tok"
        subprocess.run([sys.executable, "-m", "tokcolumnar", "train", str(SMALL), "--out",
                        str(tok_dir), "--vocab-size", "2000", "-q"], env=env(), check=True)
        big = work / "big.txt"
        with open(big, "w") as f:
            f.write("a" * 40_000_000 + "\n")
        specs = commands(tok_dir)
        only = [x for x in opts.only.split(",") if x]
        conditions = ["full-disk", "read-only", "fifo", "idle-stdin", "sigint@0.1", "sigint@0.5",
                      "sigterm@0.3", "sigterm@0.8", "concurrent", "oversized"]
        if opts.conditions:
            conditions = opts.conditions.split(",")
        results: list[Result] = []
        for name, spec in specs.items():
            if only and name not in only:
                continue
            # a normal run's wall time, for the signals' timing
            folder = Path(tempfile.mkdtemp(dir=work))
            t = time.monotonic()
            out = folder / (spec["out"] or "none")
            finish(start(spec["argv"](str(SMALL), str(out)), folder))
            base = time.monotonic() - t
            for condition in conditions:
                fraction = float(condition.split("@")[1]) if "@" in condition else 0.0
                r = run_cell(name, spec, condition, work, SMALL, big, fraction, base)
                results.append(r)
                print(f"{r.command:16} {r.condition:12} exit={r.code!s:5} {r.seconds:6.1f}s "
                      f"{r.peak_mib:6.0f}MiB {r.verdict:22} {r.line[:90]}"
                      + (f" left: {r.leftovers}" if r.leftovers else ""), flush=True)
        table = ["| command | condition | exit | s | peak MiB | verdict | last stderr line |",
                 "|---|---|---|---|---|---|---|"]
        for r in results:
            line = r.line.replace("|", "\\|")
            table.append(f"| {r.command} | {r.condition} | {r.code} | {r.seconds:.1f} | "
                         f"{r.peak_mib:.0f} | {r.verdict} | {line} |")
        text = "\n".join(table) + "\n"
        if opts.out:
            opts.out.write_text(text)
        bad = [r for r in results if r.verdict not in ("ok", "n/a")]
        print(f"{len(results)} cells, {len(bad)} bad")
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
