"""Measure the merge loop's memory by structure: for a words table (a words.parquet; `--head N`
keeps its N first words), the peak RSS of initial symbols + BPE merge loop + result tables minus the
RSS with the words table loaded (held through the loop, where a run that counted drops it), printed
as JSON with the numbers of words and symbols. (`memory.py`'s constants are fitted on whole runs
instead: `scripts/check_memory_estimate.py`.) `--breakdown` also samples, before every pass, the RSS
and the sizes of the loop's structures (layout, queue entries' positions, pair counts, cold store)
and prints them as they were at the largest RSS seen, and, from an RSS sampled every 2 ms on a
thread, the largest RSS of each stage (initial symbols, initial pairs, the loop and its steps, the
result tables) above the RSS with the words table loaded. glibc's mmap threshold is fixed as the
command line fixes it (`tokcolumnar.malloc`).

    python scripts/measure_merge_memory.py OUT/words.parquet --vocab-size 30000 [--head N]
        [--breakdown]"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from rss_sampler import StageSampler, rss_bytes

from tokcolumnar.config import TrainConfig
from tokcolumnar.malloc import fix_mmap_threshold
from tokcolumnar.progress import StageTimer
from tokcolumnar.training import bpe, passes, polars_engine
from tokcolumnar.training.polars_engine import PolarsEngine
from tokcolumnar.workdir import WorkDir


class StagePeaks(StageSampler):
    """The largest RSS of each stage (`rss_sampler`), above `before` (the RSS with the words
    table loaded); `staged` wraps a stage's function to name the stage while it runs."""

    def __init__(self, before: int) -> None:
        self.before = before
        super().__init__()

    def staged(self, name: str, fn):  # noqa: ANN001, ANN201 - any callable
        def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            outer, self.stage = self.stage, name
            try:
                return fn(*args, **kwargs)
            finally:
                self.stage = outer
        return run

    def report(self) -> dict[str, float]:
        self.stop()
        return {f"{k}_mb": round((v - self.before) / 1e6, 1) for k, v in self.peaks.items()}


class Breakdown:
    """Stands in for the loop's checkpoint (`training.checkpoint.MergeCheckpoint`): called
    before each pass with the trainer, it records the structures' sizes at the largest RSS."""

    def __init__(self, before: int) -> None:
        self.before, self.passes, self.largest = before, 0, 0
        self.sizes: dict[str, float] = {}
        self.layout_bytes = 0
        # the work directory a command-line run's result tables may write the words table to
        self.work = WorkDir(Path(tempfile.mkdtemp(prefix="measure-merge-")), resumed=False)

    def restore(self) -> None:
        return None

    def watch(self, initial) -> None:  # noqa: ANN001 - training.symbols.Initial
        lay = initial.layout
        self.layout_bytes = sum(a.nbytes for a in vars(lay).values()
                                if isinstance(a, np.ndarray))

    def __call__(self, trainer) -> None:  # noqa: ANN001 - training.bpe.BpeTrainer
        self.passes += 1
        grown = rss_bytes() - self.before
        if grown <= self.largest:
            return
        entries = trainer.entries
        self.largest = grown
        self.sizes = {
            "pass": self.passes, "merges": len(trainer.merges.left), "rss_grown_mb": grown / 1e6,
            "layout_mb": self.layout_bytes / 1e6,
            "entry_positions_mb": entries.nbytes / 1e6,
            "pair_counts": len(trainer.pair_counts),
            "pair_table_mb": trainer.pair_counts.nbytes / 1e6,
            "cold_mb": sum(a.nbytes for part in trainer.cold for a in part
                           if hasattr(a, "nbytes")) / 1e6,
            "queue": len(trainer.heap), "entries_of_pair": len(trainer.entries_of_pair),
            "bases": len(entries.keys)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("words")
    p.add_argument("--vocab-size", type=int, default=30000)
    p.add_argument("--head", type=int, default=None)
    p.add_argument("--breakdown", action="store_true")
    args = p.parse_args()
    fix_mmap_threshold()
    words = pl.read_parquet(args.words, columns=["word", "count", "first_seen"])
    if args.head is not None:
        words = words.head(args.head)
    gc.collect()
    before = rss_bytes()
    cfg = TrainConfig(vocab_size=args.vocab_size, show_progress=False)
    probe = Breakdown(before) if args.breakdown else None
    stages = StagePeaks(before) if args.breakdown else None
    if stages is not None:  # the stages' functions, wrapped to name the stage while they run
        polars_engine.initial_symbols = stages.staged("initial", polars_engine.initial_symbols)
        trainer = bpe.BpeTrainer
        trainer.count_initial_pairs = stages.staged("pairs", trainer.count_initial_pairs)
        trainer.train = stages.staged("loop", trainer.train)
        # the loop's steps, each its own stage (where a pass's transients peak)
        # (the passes' kernels are looked up in `passes` when a pass runs)
        for name in ("merge_pass", "sum_by_key_arrays", "sort_new_pairs", "join_new_pairs"):
            setattr(passes, name, stages.staged(f"loop.{name}", getattr(passes, name)))
        for cls, name in ((trainer, "_gather"), (trainer, "_bounds"), (trainer, "_revive"),
                          (trainer, "_sweep"),
                          (trainer, "_queue_new_pairs"), (bpe.QueueEntries, "compact"),
                          (passes.KeySums, "_fold"),
                          (bpe.PairCounts, "_rebuild"), (bpe.PairCounts, "add")):
            setattr(cls, name, stages.staged(f"loop.{name}", getattr(cls, name)))
        polars_engine.result_tables = stages.staged("tables", polars_engine.result_tables)
    cpu = time.process_time()
    PolarsEngine().train(words, cfg, StageTimer(), checkpoint=probe)  # type: ignore[arg-type]
    cpu = time.process_time() - cpu
    if probe is not None:
        shutil.rmtree(probe.work.path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"words": words.height,
                      "symbols": int(words["word"].str.len_chars().sum()),
                      "before": before, "peak": peak, "merge_bytes": peak - before,
                      "cpu_s": round(cpu, 1),
                      **({"at_largest_rss": probe.sizes} if probe else {}),
                      **({"stage_peaks": stages.report()} if stages else {})}))


if __name__ == "__main__":
    main()
