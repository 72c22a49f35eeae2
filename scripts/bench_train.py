#!/usr/bin/env python3
"""Benchmark: train the same vocabulary with tokcolumnar and with HF `tokenizers` on the same
file, alternating, several rounds; report wall time, peak RSS and the ratios (ours / HF).

Each run is a fresh process (the CLI for ours, a small script for HF), timed from spawn to exit,
with its own peak RSS from `wait4`. Per-stage times of ours come from its run.json.

    python scripts/bench_train.py ../shared/corpora/medium/en.txt --vocab-size 30000
    python scripts/bench_train.py ../shared/corpora/medium/zh.txt --mode byte-level
    python scripts/bench_train.py ../shared/corpora/medium/en.txt --engines polars,duckdb
    python scripts/bench_train.py ../shared/corpora/medium/en.txt --mode cl100k --rustbpe
    python scripts/bench_train.py zh100.txt --mode byte-level --rustbpe --rounds 2 --hf-rounds 1

`--mode cl100k|o200k|qwen2` trains with `--pattern NAME` and the 256 bytes as initial alphabet
(HF: `Split(Regex(p), "isolated")` + `ByteLevel(use_regex=False)`); `--rustbpe` adds rustbpe
(`train_from_iterator` with the same pattern and vocabulary size) as a peer, in the same
alternating rounds (it has no special token: the pattern modes have none either).

With several engines, the last lines compare each one with the Polars engine (wall time ratio;
DuckDB also reports its merge passes and the time per pass).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from hf_reference import (  # HF's reference of each mode, and rustbpe's
    PATTERN_MODES,
    hf_train_command,
    merges_of,
    rustbpe_train_command,
)
from measure import run  # wall, CPU and peak RSS of one child process

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tokcolumnar
from tokcolumnar.text.bytelevel import BYTE_ALPHABET, token_bytes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--mode", choices=["whitespace", "byte-level", *PATTERN_MODES],
                    default="whitespace")
    ap.add_argument("--rustbpe", action="store_true",
                    help="time rustbpe too (byte-level and pattern modes)")
    ap.add_argument("--engines", default="polars",
                    help="our engines to time beside HF, comma-separated (polars,duckdb)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hf-rounds", type=int, default=None,
                    help="run HF in the first N rounds only (its merges are the reference "
                         "every round is checked against; default: every round)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tokcolumnar-bench-"))
    cmds: dict[str, list[str]] = {}
    for engine in args.engines.split(","):
        cmd = [sys.executable, "-m", "tokcolumnar", "train", args.file, "--out",
               str(tmp / engine), "--vocab-size", str(args.vocab_size), "--quiet",
               "--engine", engine]
        if args.mode == "byte-level":
            cmd += ["--preset", "gpt2"]
        elif args.mode in PATTERN_MODES:
            cmd += ["--pattern", args.mode, "--initial-alphabet", "".join(BYTE_ALPHABET)]
        else:
            cmd += ["--pre-tokenizer", "whitespace"]
        cmds[engine] = cmd
    hf_mode = {"byte-level": "gpt2"}.get(args.mode, args.mode)
    cmds["hf"] = hf_train_command([args.file], args.vocab_size, hf_mode, tmp / "hf.json")
    if args.rustbpe:
        # rustbpe's vocabulary: the 256 bytes and its merges; ours and HF's add the special
        # token of --preset gpt2 (byte-level mode) on top
        size = args.vocab_size - (1 if args.mode == "byte-level" else 0)
        cmds["rustbpe"] = rustbpe_train_command(args.file, size, hf_mode,
                                                tmp / "rustbpe.json")

    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    stages: dict[str, list[dict[str, float]]] = {name: [] for name in cmds}
    names = list(cmds)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:  # alternate the order
            if name == "hf" and args.hf_rounds is not None and r >= args.hf_rounds:
                continue
            m = run(cmds[name])
            wall, rss = m.wall, m.rss_mib
            results[name].append((wall, rss))
            if name not in ("hf", "rustbpe"):
                stages[name].append(
                    json.loads((tmp / name / "run.json").read_text())["timings_s"])
            print(f"round {r + 1} {name:7s}: {wall:6.2f} s  {rss:7.1f} MiB", flush=True)

    def med(name: str, i: int) -> float:
        return statistics.median(x[i] for x in results[name])

    hw, hrss = med("hf", 0), med("hf", 1)
    hf_list = merges_of(tmp / "hf.json")
    print()
    print(f"file: {args.file}  mode: {args.mode}  vocab: {args.vocab_size}  rounds: {args.rounds}")
    print(f"hf:      {hw:6.2f} s  peak {hrss:6.0f} MiB   (median)")
    if "rustbpe" in results:
        rw, rrss = med("rustbpe", 0), med("rustbpe", 1)
        ranks = json.loads((tmp / "rustbpe.json").read_text())
        hf_tokens = {token_bytes(t) for t in json.loads((tmp / "hf.json").read_text())[
            "model"]["vocab"]}
        same = {t.encode("latin-1") for t, _ in ranks} == hf_tokens
        print(f"rustbpe: {rw:6.2f} s  peak {rrss:6.0f} MiB   ratio to hf: wall {rw / hw:.2f}x; "
              f"same token set as hf: {same}")
    for name in names:
        if name in ("hf", "rustbpe"):
            continue
        w, rss = med(name, 0), med(name, 1)
        if "rustbpe" in results:
            print(f"{name} / rustbpe: wall {w / rw:.2f}x, peak RSS {rss / rrss:.2f}x")
        ours = merges_of(tmp / name / "tokenizer.json")  # (the last round's)
        keys = sorted({k for st in stages[name] for k in st})
        per_stage = ", ".join(
            f"{k} {statistics.median(st.get(k, 0.0) for st in stages[name]):.2f}" for k in keys)
        print(f"{name + ':':8s} {w:6.2f} s  peak {rss:6.0f} MiB   ratio to hf: wall "
              f"{w / hw:.2f}x, peak RSS {rss / hrss:.2f}x; merges identical: {ours == hf_list}")
        print(f"         stages (median s): {per_stage}")
        passes = statistics.median(st.get("passes", 0.0) for st in stages[name])
        if passes:
            merge = statistics.median(st.get("merge", 0.0) for st in stages[name])
            print(f"         merge loop: {passes:.0f} passes, "
                  f"{merge / passes * 1000:.0f} ms per pass")
    if "polars" in results:
        pw = med("polars", 0)
        for name in names:
            if name not in ("hf", "polars", "rustbpe"):
                w = med(name, 0)
                print(f"{name} / polars: {w:.2f} s / {pw:.2f} s = {w / pw:.1f}x")


if __name__ == "__main__":
    main()
