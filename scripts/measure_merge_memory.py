"""Measure the merge loop's memory per distinct word and per symbol (`memory.py`'s
MERGE_BYTES_PER_WORD / MERGE_BYTES_PER_SYMBOL): for a words table (a words.parquet; `--head N`
keeps its N first words), the peak RSS of initial symbols + BPE merge loop + result tables
minus the RSS with the words table loaded, printed as JSON with the numbers of words and
symbols. Run it on tables with different characters-per-word mixes (English words, Chinese
clauses) and fit peak = a * words + b * symbols.

    python scripts/measure_merge_memory.py OUT/words.parquet --vocab-size 30000 [--head N]"""

from __future__ import annotations

import argparse
import gc
import json
import resource

import polars as pl

from tokcolumnar.config import TrainConfig
from tokcolumnar.progress import StageTimer
from tokcolumnar.training.polars_engine import PolarsEngine


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("words")
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument("--head", type=int, default=None)
    args = p.parse_args()
    words = pl.read_parquet(args.words, columns=["word", "count", "first_seen"])
    if args.head is not None:
        words = words.head(args.head)
    gc.collect()
    before = rss_bytes()
    cfg = TrainConfig(vocab_size=args.vocab_size, show_progress=False)
    PolarsEngine().train(words, cfg, StageTimer())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"words": words.height,
                      "symbols": int(words["word"].str.len_chars().sum()),
                      "before": before, "peak": peak, "merge_bytes": peak - before}))


if __name__ == "__main__":
    main()
