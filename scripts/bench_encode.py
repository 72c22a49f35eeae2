#!/usr/bin/env python3
"""Benchmark: `tokcolumnar encode` against the HF code a user would write (`Tokenizer.from_file
(...).encode_batch` over batches of lines, ids written to Parquet with pyarrow), on the same
input, alternating runs; medians of wall time, CPU time (user + sys) and peak RSS.

Each run is a fresh process timed from spawn to exit (`wait4`). With `--tiktoken` the same
vocabulary is also run through tiktoken (a benchmark reference only, not a dependency:
`pip install tiktoken`; built offline from our tokenizer.json: mergeable ranks from the byte
values of the tokens, the pattern run.json records, GPT-2's if none), `encode_ordinary_batch`
over batches of 10,000 lines with 2 threads and with 1, in this interpreter or the one given
(`--tiktoken PYTHON`), after checking that it gives HF's ids; MB/s per core-second is reported
for all, and for tiktoken also its encoding alone (without start-up, reading and building the
ranks).

    python scripts/bench_encode.py ../shared/corpora/medium/en.txt --tokenizer DIR --rounds 3
    python scripts/bench_encode.py FILE --tokenizer DIR --tiktoken
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import run  # wall, CPU and peak RSS of one child process

HF_SCRIPT = r"""
import sys
import pyarrow as pa, pyarrow.parquet as pq
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
writer = None
def flush(lines):
    global writer
    ids = [e.ids for e in tok.encode_batch(lines)]
    table = pa.table({"text": lines, "ids": pa.array(ids, type=pa.list_(pa.uint32()))})
    if writer is None:
        writer = pq.ParquetWriter(sys.argv[3], table.schema, compression="zstd")
    writer.write_table(table)
with open(sys.argv[2], encoding="utf-8") as f:
    batch = []
    for line in f:
        batch.append(line.rstrip("\r\n"))
        if len(batch) == 10000:
            flush(batch)
            batch = []
    if batch:
        flush(batch)
writer.close()
"""

TIKTOKEN_SCRIPT = r"""
import json, os, sys
import tiktoken
model = json.load(open(sys.argv[1], encoding="utf-8"))["model"]
# GPT-2's byte -> character table
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
    + list(range(ord("\xae"), ord("\xff") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
char_to_byte = {chr(c): b for b, c in zip(bs, cs)}
ranks = {bytes(char_to_byte[ch] for ch in tok): i for tok, i in model["vocab"].items()
         if all(ch in char_to_byte for ch in tok)}
pat = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
try:  # the pattern the run recorded for tiktoken users (`--pattern`): GPT-2's if none
    with open(os.path.join(os.path.dirname(sys.argv[1]), "run.json"), encoding="utf-8") as f:
        pat = json.load(f).get("tiktoken", {}).get("pat_str", pat)
except FileNotFoundError:
    pass
enc = tiktoken.Encoding("ours", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
with open(sys.argv[2], encoding="utf-8") as f:
    lines = [line.rstrip("\r\n") for line in f]
mode, value = sys.argv[3].split("=")
if mode == "check":  # the ids of the first lines (all if negative) as JSON lines, not timed
    for line in lines[:int(value)] if int(value) >= 0 else lines:
        print(json.dumps(enc.encode_ordinary(line)))
    sys.exit(0)
import time
start, n = time.perf_counter(), 0
cpu = time.process_time()
for k in range(0, len(lines), 10000):
    n += sum(map(len, enc.encode_ordinary_batch(lines[k:k + 10000], num_threads=int(value))))
with open(sys.argv[4], "w") as out:  # the timing, for the report (stdout is not read)
    print(n, time.perf_counter() - start, time.process_time() - cpu, file=out)
"""


def check_tiktoken(python: str, script: Path, tok_json: str, text: str, n_lines: int) -> None:
    """Refuse to time tiktoken unless the Encoding built from our vocabulary gives HF's ids on
    the first `n_lines` lines of the input (all of them if negative)."""
    from tokenizers import Tokenizer  # the reference, needed only for this check

    out = subprocess.run([python, str(script), tok_json, text, f"check={n_lines}"],
                         check=True, capture_output=True, text=True).stdout
    theirs = [json.loads(line) for line in out.splitlines()]
    with open(text, encoding="utf-8") as f:
        lines = [line.rstrip("\r\n") for line in f]
    lines = lines[:n_lines] if n_lines >= 0 else lines
    hf = [e.ids for e in Tokenizer.from_file(tok_json).encode_batch(lines)]
    bad = sum(a != b for a, b in zip(hf, theirs))
    if bad or len(theirs) != len(hf):
        sys.exit(f"tiktoken's ids differ from HF's on {bad} of the first {len(hf)} lines: not "
                 "the same tokenizer, not timed")
    print(f"tiktoken check: the first {len(hf):,} lines give HF's ids", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("--tokenizer", required=True, help="a training directory of ours")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one-core", action="store_true",
                    help="pin every run to one core (taskset -c 0, POLARS_MAX_THREADS=1, "
                         "RAYON_NUM_THREADS=1)")
    ap.add_argument("--tiktoken", nargs="?", const=sys.executable, default=None,
                    metavar="PYTHON", help="also run tiktoken (2 threads and 1), in this "
                    "interpreter or in PYTHON (one where tiktoken is installed)")
    ap.add_argument("--tiktoken-check-lines", type=int, default=2000, metavar="N",
                    help="before timing tiktoken, check its ids equal HF's on the first N "
                         "lines (default 2000; 0: no check; -1: every line)")
    args = ap.parse_args()
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(repo))
    pin: list[str] = []
    if args.one_core:
        env.update(POLARS_MAX_THREADS="1", RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        pin = ["taskset", "-c", "0"]
    tok_json = str(Path(args.tokenizer) / "tokenizer.json")
    size_mb = Path(args.input).stat().st_size / 1e6
    if args.tiktoken and subprocess.run([args.tiktoken, "-c", "import tiktoken"],
                                        capture_output=True).returncode:
        sys.exit(f"bench_encode: tiktoken is not installed for {args.tiktoken} (pip install "
                 "tiktoken, or give --tiktoken PYTHON)")
    tt_threads = (2, 1) if args.tiktoken else ()
    results: dict[str, list[tuple[float, float, float]]] = {
        "ours": [], "hf": [], **{f"tiktoken-{t}t": [] for t in tt_threads}}
    tt_inside: dict[str, list[tuple[float, float]]] = {f"tiktoken-{t}t": [] for t in tt_threads}
    with tempfile.TemporaryDirectory() as tmp:
        hf_script = Path(tmp) / "hf_encode.py"
        hf_script.write_text(HF_SCRIPT)
        tt_script = Path(tmp) / "tt_encode.py"
        tt_script.write_text(TIKTOKEN_SCRIPT)
        if args.tiktoken and args.tiktoken_check_lines > 0:
            check_tiktoken(args.tiktoken, tt_script, tok_json, args.input,
                           args.tiktoken_check_lines)
        for _ in range(args.rounds):
            results["ours"].append(run(pin + [
                sys.executable, "-m", "tokcolumnar", "encode", args.input, "--tokenizer",
                args.tokenizer, "--out", f"{tmp}/ours.parquet", "--force", "--quiet"], env))
            results["hf"].append(run(pin + [sys.executable, str(hf_script), tok_json,
                                            args.input, f"{tmp}/hf.parquet"], env))
            for t in tt_threads:
                # the script writes its token count and its encoding's wall and CPU seconds
                out = f"{tmp}/tt.out"
                results[f"tiktoken-{t}t"].append(run(pin + [
                    args.tiktoken, str(tt_script), tok_json, args.input, f"threads={t}", out],
                    env))
                _, wall, cpu = Path(out).read_text().split()
                tt_inside[f"tiktoken-{t}t"].append((float(wall), float(cpu)))
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3))
           for k, v in results.items() if v}
    print(f"{Path(args.input).name} ({size_mb:.1f} MB), {Path(args.tokenizer).name}, "
          f"{args.rounds} rounds{' (one core)' if args.one_core else ''}")
    for name, (wall, cpu, rss) in med.items():
        print(f"  {name:11s} wall {wall:7.2f}s  cpu {cpu:7.2f}s  peak {rss:7.0f} MiB  "
              f"{size_mb / cpu:6.2f} MB/s per core-second")
    for name, inside in tt_inside.items():
        wall, cpu = (statistics.median(r[i] for r in inside) for i in range(2))
        print(f"  {name:11s} encoding alone: wall {wall:6.2f}s  cpu {cpu:6.2f}s  "
              f"{size_mb / cpu:6.2f} MB/s per core-second")
    print(f"  ratio ours/hf wall {med['ours'][0] / med['hf'][0]:.2f}x  "
          f"cpu {med['ours'][1] / med['hf'][1]:.2f}x")


if __name__ == "__main__":
    main()
