"""The command line as the tests run it: `python -m tokcolumnar` in a subprocess (this checkout's
package first on PYTHONPATH), the one-line error it must give for bad input (`tokcolumnar:
error: ...`, exit code 2, no traceback, no usage), and snapshots of output directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support import markers

ROOT = Path(__file__).resolve().parents[2]
DUCKDB_COMMANDS = ("sql", "crosscheck")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI run: ours, with this checkout first on PYTHONPATH, and
    Python's fault handler on: a run that crashes (a segmentation fault in native code) then
    prints every thread's stack on stderr, which the failing assertion shows (nothing is
    printed otherwise)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": path, **(extra or {})}


def _check_marked(args: tuple[str, ...]) -> None:
    engine = [b for a, b in zip(args, args[1:]) if a == "--engine"]
    if (args and args[0] in DUCKDB_COMMANDS) or "duckdb" in engine:
        markers.require("duckdb", f"runs `tokcolumnar {' '.join(args[:1])}` with DuckDB")


def command(*args: str) -> list[str]:
    """The argv of `python -m tokcolumnar ARGS`."""
    _check_marked(args)
    return [sys.executable, "-m", "tokcolumnar", *args]


def run_cli(*args: str, cwd: Path | None = None, umask: int | None = None,
            user: str | None = None, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 300
            ) -> subprocess.CompletedProcess:
    """Run `python -m tokcolumnar ARGS` (text output captured). `user` runs it as another user
    (root ignores permission bits), `umask` with that umask, `env` adds variables."""
    cmd = command(*args)
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          preexec_fn=pre, env=cli_env(env), input=input)


def error_line(stderr: str) -> str:
    """The single `tokcolumnar: error: ...` line of a failed run's stderr (asserted to be the
    only line, with no traceback and no usage text)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tokcolumnar: error: "), stderr
    assert "Traceback" not in stderr and "usage:" not in stderr, stderr
    return lines[0]


def assert_clean_error(proc: subprocess.CompletedProcess, needle: str = "") -> str:
    """A clean refusal: exit code 2 and one error line containing `needle`; the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    line = error_line(proc.stderr)
    assert needle in line, line
    return line


#: Runs the command in a forked child and writes its peak RSS (KiB) to the file named first.
#: A child's peak starts from its parent's at fork (Linux carries the high-water mark across
#: exec), so the command is forked from this small process, never from the test process.
_MEASURE = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_measured(args: list[str], stdin_data: bytes | None = None, stdin_file: str | None = None,
                 timeout: float = 120) -> tuple[int, str, float, float]:
    """Run `python -m tokcolumnar ARGS`: (exit code, stderr, peak RSS in MiB of this child
    alone, seconds)."""
    cmd = command(*args)
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as peak:
        stdin = open(stdin_file, "rb") if stdin_file else (  # noqa: SIM115
            subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL)
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _MEASURE, peak.name, *cmd], stdin=stdin,
                                stdout=subprocess.DEVNULL, stderr=err, env=cli_env(),
                                start_new_session=True)
        if stdin_data is not None:
            def feed() -> None:
                try:
                    proc.stdin.write(stdin_data)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            threading.Thread(target=feed, daemon=True).start()
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        proc.wait()
        timer.cancel()
        seconds = time.perf_counter() - t0
        if stdin_file:
            stdin.close()
        err.seek(0)
        kib = int(peak.read() or 0)
        return proc.returncode, err.read().decode(), kib / 1024, seconds


def snapshot(d: Path) -> dict[str, bytes]:
    """The files directly in `d` with their bytes."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def tree(d: Path) -> dict[str, bytes | None]:
    """Every path under `d` with its bytes (None for directories)."""
    return {str(p.relative_to(d)): (None if p.is_dir() else p.read_bytes())
            for p in sorted(d.rglob("*"))}


def no_temporaries(d: Path) -> bool:
    """No temporary output (`.NAME.tc-PID-XXXXXXXX.tmp|old`) is left under `d`."""
    return not [p for p in d.rglob(".*") if ".tc-" in p.name]


def run_outputs(d: Path) -> dict[str, object]:
    """A training run's output files, run.json parsed and without what differs between any two
    runs of one command (its creation time, timings and memory, --quiet, the bytes spilled: a
    killed run's spills and checkpoints add to them)."""
    files: dict[str, object] = dict(snapshot(d))
    run = json.loads(files.pop("run.json"))
    for key in ("created", "timings_s", "memory"):
        run.pop(key, None)
    run["settings"].pop("show_progress")  # --quiet or not
    run["stats"].pop("spilled_bytes")
    files["run.json"] = run
    return files
