#!/usr/bin/env python3
"""Benchmark: train the same vocabulary with tokcolumnar and with HF `tokenizers` on the same
file, alternating, several rounds; report wall time, peak RSS and the ratios (ours / HF).

Each run is a fresh process (the CLI for ours, a small script for HF), timed from spawn to exit,
with its own peak RSS from `wait4`. Per-stage times of ours come from its run.json.

    python scripts/bench_train.py ../shared/corpora/medium/en.txt --vocab-size 30000
    python scripts/bench_train.py ../shared/corpora/medium/zh.txt --mode byte-level
    python scripts/bench_train.py ../shared/corpora/medium/en.txt --mode duckdb
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HF_SCRIPT = r"""
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
path, vocab_size, mode, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if mode == "byte-level":
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                             special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
else:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
tok.train([path], tr)
tok.save(out)
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--mode", choices=["whitespace", "byte-level", "duckdb"], default="whitespace")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tokcolumnar-bench-"))
    ours_cmd = [sys.executable, "-m", "tokcolumnar", "train", args.file, "--out",
                str(tmp / "ours"), "--vocab-size", str(args.vocab_size), "--quiet"]
    if args.mode == "byte-level":
        ours_cmd += ["--preset", "gpt2"]
    else:
        ours_cmd += ["--pre-tokenizer", "whitespace"]
    if args.mode == "duckdb":
        ours_cmd += ["--engine", "duckdb"]
    hf_mode = "byte-level" if args.mode == "byte-level" else "whitespace"
    hf_cmd = [sys.executable, "-c", HF_SCRIPT, args.file, str(args.vocab_size), hf_mode,
              str(tmp / "hf.json")]

    results: dict[str, list[tuple[float, float]]] = {"ours": [], "hf": []}
    stages: list[dict[str, float]] = []
    for r in range(args.rounds):
        for name, cmd in (("ours", ours_cmd), ("hf", hf_cmd)) if r % 2 == 0 else (
                ("hf", hf_cmd), ("ours", ours_cmd)):
            wall, rss = run(cmd)
            results[name].append((wall, rss))
            if name == "ours":
                stages.append(json.loads((tmp / "ours" / "run.json").read_text())["timings_s"])
            print(f"round {r + 1} {name:4s}: {wall:6.2f} s  {rss:7.1f} MiB", flush=True)

    def med(name: str, i: int) -> float:
        return statistics.median(x[i] for x in results[name])

    ow, hw, orss, hrss = med("ours", 0), med("hf", 0), med("ours", 1), med("hf", 1)
    same = None
    hf_merges = json.loads((tmp / "hf.json").read_text())["model"]["merges"]
    our_merges = json.loads((tmp / "ours" / "tokenizer.json").read_text())["model"]["merges"]
    same = hf_merges == our_merges
    print()
    print(f"file: {args.file}  mode: {args.mode}  vocab: {args.vocab_size}  rounds: {args.rounds}")
    print(f"ours: {ow:.2f} s  peak {orss:.0f} MiB   (median)")
    print(f"hf:   {hw:.2f} s  peak {hrss:.0f} MiB   (median)")
    print(f"ratio ours/hf: wall {ow / hw:.2f}x  peak RSS {orss / hrss:.2f}x")
    keys = sorted({k for s in stages for k in s})
    print("ours per stage (median s): " + ", ".join(
        f"{k} {statistics.median(s.get(k, 0.0) for s in stages):.2f}" for k in keys))
    print(f"merges identical to HF: {same}")


if __name__ == "__main__":
    main()
