"""Differential fuzzer (issue 17): random small corpora x random option combinations, through
train, --from-counts, both engines, HF and (for a share of the cases) the command line.

Each case asserts:
- the run trains, or is refused with one `TokcolumnarError` line (on the command line: exit 0,
  or exit 2 with exactly one `tokcolumnar: error: ...` line and no traceback);
- the DuckDB engine gives the same words, merges and vocab (crosscheck's comparison);
- training again `--from-counts` the run's words.parquet gives the same merges and vocab;
- every written tokenizer.json loads in HF and encodes as ours (ids and decode), every written
  vocab.json+merges.txt / vocab.txt loads in HF (tests/support/hf_outputs.py);
- each engine's run takes under --time-limit CPU seconds (user + sys of every thread of the
  process: the bound of the issue is for an idle machine, and CPU time is what a shared,
  loaded machine does not inflate; on an idle machine a busy run's CPU time is about its wall
  time or more, as its threads add up, so the check is no weaker).

    python scripts/fuzz.py --seeds 0:200            # cases 0..199, a summary line at the end
    python scripts/fuzz.py --seeds 5000:5010 -v     # print every case

A finding prints the seed, the options and the message; `--keep DIR` keeps the case
directories. tests/test_fuzz.py runs fixed-seed slices (a quick one in the fast tier)."""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402

from tests.support.hf_outputs import check_outputs_in_hf  # noqa: E402
from tokcolumnar.duckdb.crosscheck import compare_results  # noqa: E402
from tokcolumnar.errors import TokcolumnarError  # noqa: E402
from tokcolumnar.training.pipeline import train  # noqa: E402

# the kinds of text a corpus line is drawn from
SCRIPTS = {
    "ascii": "abcdeghilnorst",
    "ascii_punct": "ab.,!?-_'#0123456789",
    "cjk": "的一是不了人我在有他这中大来上国个到说们",
    "combining": "ae\u0301\u0300o\u0308n\u0303",
    "emoji": "\U0001f600\U0001f389\u2764\ufe0f\U0001f44d\U0001f3fd\u200d",
    "rtl": "\u0627\u0644\u0633\u0644\u0627\u0645\u05e9\u05dc\u05d5\u05dd",
    "control": "ab\t\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u00a0\u3000\r",
}
FORMATS = ("txt", "txt", "txt", "gz", "zst", "bz2", "parquet", "jsonl", "csv")
PRETOKENIZERS = ("whitespace", "whitespace-split", "bert", "byte-level", "metaspace", "digits",
                 "none", "subword-nmt")
NORMALIZERS = ("none", "nfc", "nfkc", "nfd", "nfkd", "bert")
AFFIXES = ("##", "</w>", "_", "@@", " ", "w", "\u2581")


def corpus(rng: random.Random) -> list[str]:
    """A few lines mixing one to three scripts, sometimes with a very long word."""
    kinds = rng.sample(sorted(SCRIPTS), rng.randint(1, 3))
    lines = []
    for _ in range(rng.randint(1, 12)):
        words = []
        for _ in range(rng.randint(0, 8)):
            chars = SCRIPTS[rng.choice(kinds)]
            words.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 7))))
        if rng.random() < 0.05:
            words.append(rng.choice("abc") * rng.randint(50, 400))
        lines.append(rng.choice([" ", "  ", " ", "\t"]).join(words))
    # repeat some lines so that pairs have counts above 1
    return lines + rng.sample(lines, rng.randint(0, len(lines)))


def write_input(rng: random.Random, lines: list[str], d: Path) -> tuple[Path, dict[str, Any]]:
    """The corpus as a file of a random format; the options reading it needs."""
    fmt = rng.choice(FORMATS)
    ending = rng.choice(["\n", "\n", "\r\n"])
    text = "".join(line + ending for line in lines).encode()
    if fmt in ("txt", "gz", "zst", "bz2"):
        path = d / ("c.txt" + ("" if fmt == "txt" else f".{fmt}"))
        if fmt == "gz":
            text = gzip.compress(text)
        elif fmt == "bz2":
            text = bz2.compress(text)
        elif fmt == "zst":
            sink = pa.BufferOutputStream()
            with pa.CompressedOutputStream(sink, "zstd") as f:
                f.write(text)
            text = sink.getvalue().to_pybytes()
        path.write_bytes(text)
        return path, {}
    values = [line for line in lines]
    if fmt == "parquet":
        path = d / "c.parquet"
        pl.DataFrame({"text": values}).write_parquet(path)
    elif fmt == "jsonl":
        path = d / "c.jsonl"
        path.write_text("".join(json.dumps({"text": v}) + "\n" for v in values), "utf-8")
    else:
        path = d / "c.csv"
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text"])
            w.writerows([v] for v in values)
    return path, {}


def options(rng: random.Random) -> dict[str, Any]:
    """Random training options (some combinations are refused: that is part of the test)."""
    o: dict[str, Any] = {"vocab_size": rng.choice([1, 40, 80, 150, 300, 300, 1000])}
    if rng.random() < 0.15:
        o["preset"] = rng.choice(["gpt2", "bert", "subword-nmt"])
        if o["preset"] == "subword-nmt":
            o["vocab_size"] = rng.choice([5, 20, 60])
        return o
    o["model"] = rng.choice(["bpe", "bpe", "wordpiece"])
    o["pre_tokenizer"] = rng.choice(PRETOKENIZERS)
    if rng.random() < 0.3:
        o["normalizer"] = rng.choice(NORMALIZERS)
    if rng.random() < 0.2:
        o["lowercase"] = True
    if rng.random() < 0.3:
        o["min_frequency"] = rng.randint(0, 3)
    if rng.random() < 0.3:
        o["special_tokens"] = rng.choice([["<s>"], ["[UNK]"], ["[UNK]", "a"], ["<pad>", "ab"]])
    if rng.random() < 0.2:
        o["unk_token"] = "[UNK]"
        o.setdefault("special_tokens", ["[UNK]"])
    if rng.random() < 0.2:
        o["limit_alphabet"] = rng.randint(1, 12)
    if rng.random() < 0.1:
        o["initial_alphabet"] = rng.choice(["z", "aq", "的"])
    if rng.random() < 0.2:
        o["max_token_length"] = rng.randint(1, 5)
    if rng.random() < 0.35:
        o["continuing_subword_prefix"] = rng.choice(AFFIXES)
    if o["model"] == "bpe":
        if rng.random() < 0.5:
            o["tie_break"] = rng.choice(["id", "lexical-max", "first-seen"])
        r = rng.random()
        if r < 0.2:
            o["end_of_word_suffix"] = rng.choice(AFFIXES)
        elif r < 0.35:
            o["end_of_word_token"] = rng.choice(AFFIXES)
    else:
        if rng.random() < 0.3:
            o["wordpiece_scoring"] = rng.choice(["likelihood", "frequency"])
        if rng.random() < 0.2:
            o["max_merges"] = rng.randint(0, 20)
    return o


def probe_texts(rng: random.Random, lines: list[str]) -> list[str]:
    """Texts to encode: corpus lines, pieces of them glued together, unseen characters."""
    texts = rng.sample(lines, min(len(lines), 6))
    joined = " ".join(lines)
    for _ in range(4):
        if joined:
            i = rng.randrange(len(joined))
            texts.append(joined[i:i + rng.randint(1, 30)])
    texts += ["", "zzq \u00e9\u0301 \U0001f600 x", "a\nb\rc\x0cd"]
    return texts


def _cli_args(path: Path, out: Path, o: dict[str, Any]) -> list[str]:
    args = ["train", str(path), "--out", str(out), "--quiet"]
    for k, v in o.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif isinstance(v, list):
            args += [flag, ",".join(v)]
        else:
            args += [flag, str(v)]
    return args


def check_cli(path: Path, out: Path, o: dict[str, Any]) -> None:
    """The command line: exit 0, or exit 2 with one error line (notes allowed on success)."""
    proc = subprocess.run([sys.executable, "-m", "tokcolumnar", *_cli_args(path, out, o)],
                          capture_output=True, text=True, cwd=out.parent,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = proc.stderr.splitlines()
    if proc.returncode == 0:
        assert all(x.startswith("tokcolumnar: note: ") for x in lines), proc.stderr
    else:
        assert proc.returncode == 2, (proc.returncode, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("tokcolumnar: error: "), proc.stderr


def run_case(seed: int, d: Path, time_limit: float, cli: bool) -> tuple[str, dict[str, Any]]:
    """One case in the empty directory `d`: 'trained', 'refused: ...', or an AssertionError."""
    rng = random.Random(seed)
    lines = corpus(rng)
    path, read_opts = write_input(rng, lines, d)
    o = options(rng)
    if cli:
        check_cli(path, d / "cli", o)
    out = d / "o"
    start = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            polars_run = train([str(path)], out_dir=out, **read_opts, **o)
    except TokcolumnarError as e:
        assert "\n" not in str(e), f"multi-line error: {e!r}"
        # the DuckDB engine refuses the same way
        try:
            train([str(path)], **read_opts, **o, engine="duckdb")
        except TokcolumnarError as e2:
            assert str(e2) == str(e), f"engines refuse differently: {e} | {e2}"
            return f"refused: {e}", o
        raise AssertionError(f"polars refused ({e}), duckdb trained") from None
    took_polars = time.process_time() - start
    check_outputs_in_hf(out, probe_texts(rng, lines))
    start = time.process_time()
    duck = train([str(path)], **read_opts, **o, engine="duckdb")
    took_duckdb = time.process_time() - start
    diff = compare_results(polars_run, duck, ("polars", "duckdb"))
    assert not diff, f"engines differ: {diff}"
    again = train(from_counts=str(out / "words.parquet"), **o)
    for name in ("merges", "vocab"):
        a, b = getattr(polars_run, name), getattr(again, name)
        assert a.equals(b), f"--from-counts gives other {name}"
    # last, so that a slow case has had every other check
    slow = {e: t for e, t in (("polars", took_polars), ("duckdb", took_duckdb)) if t > time_limit}
    assert not slow, "too slow: " + ", ".join(f"{e} took {t:.1f} CPU s" for e, t in slow.items())
    return "trained", o


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0:50", help="A:B, the seeds A..B-1")
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--cli-every", type=int, default=10, help="every Nth case also via the CLI")
    p.add_argument("--keep", default=None, help="keep the case directories here")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split(":"))
    findings, slow, counts = [], [], {"trained": 0, "refused": 0}
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tc-fuzz-"))
    for seed in range(a, b):
        d = root / f"case-{seed}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        try:
            outcome, o = run_case(seed, d, args.time_limit, seed % args.cli_every == 0)
            counts[outcome.split(":")[0]] += 1
            if args.verbose:
                print(f"seed {seed}: {outcome} {o}", flush=True)
        except (AssertionError, Exception) as e:  # noqa: BLE001 - every failure is a finding
            o = options(_skip_to_options(seed))
            msg = str(e) if isinstance(e, AssertionError) else traceback.format_exc(limit=-3)
            findings.append(seed)
            if str(e).startswith("too slow: "):
                slow.append(seed)
            print(f"FINDING seed {seed}: {o}\n  {msg}", flush=True)
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{b - a} cases (seeds {a}:{b}): {counts['trained']} trained, {counts['refused']} "
          f"refused with one line, {len(findings)} findings {findings} (of which "
          f"{len(slow)} only over the time limit: {slow})")
    return 1 if findings else 0


def _skip_to_options(seed: int) -> random.Random:
    """The generator of case `seed` at the point where its options are drawn."""
    rng = random.Random(seed)
    lines = corpus(rng)
    with tempfile.TemporaryDirectory() as t:
        write_input(rng, lines, Path(t))
    return rng


if __name__ == "__main__":
    sys.exit(main())
