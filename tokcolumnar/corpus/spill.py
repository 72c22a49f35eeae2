"""Counting in bounded memory, resumable: the corpus is counted in the ordered units of
`corpus.units` (64 MiB byte ranges of text / JSONL, groups of Parquet row groups, other
inputs whole), one after the other in this process. Each unit's partial table (word, count,
key = unit << 40 | local first position) is folded into a running table — the same sum / min
as every other count — while the running table stays under its budget; when it does not, or
every `checkpoint_every` seconds, the running table is *spilled*: written as one run of
`RUN_PARTITIONS` Parquet files partitioned by a hash of the word, and the manifest
(`count.json`: units done, each unit's number of pre-tokens, the runs) rewritten atomically.

The words table is then each partition's runs summed (one partition in memory at a time), and
`finish_count`'s first_seen from the units' offsets: identical to the in-memory count,
first_seen included (sum and min are associative; a word's runs all land in one partition).

A killed run resumes (`--resume`) from the manifest: units after the last spill are counted
again, runs not in the manifest (a spill cut short) are deleted."""

from __future__ import annotations

import itertools
import json
import shutil
import time
from pathlib import Path

import polars as pl

from ..config import TrainConfig
from ..memory import keep_most_frequent
from ..outputs import writing
from ..progress import READING, Progress, StageTimer
from ..workdir import WorkDir, kill_point
from .sources import file_size
from .units import UNIT_BYTES, UNIT_SHIFT, Unit, count_unit, finish_count

#: Files per run: a word's rows of every run are in the same partition, summed together.
RUN_PARTITIONS = 16
#: A fixed seed, so that a resumed run partitions as the killed one did (the Polars version
#: is in the work directory's fingerprint).
HASH_SEED = 0x70C0
MANIFEST = "count.json"
MIN_UNIT_BYTES = 16 << 10


def _fold(running: pl.DataFrame | None, words: pl.DataFrame) -> pl.DataFrame:
    """A unit's words folded into the running table: count summed, key min (`sum_partials`
    without sentinels, which are kept apart in the manifest)."""
    if running is None:
        return words
    return pl.concat([running, words]).group_by("word").agg(pl.col("count").sum(),
                                                             pl.col("key").min())


def _spill(work: WorkDir, running: pl.DataFrame, run: int) -> tuple[str, int]:
    """Write the running table as run number `run`; its directory name and bytes on disk."""
    name = f"runs/r{run:06d}"
    directory = work.file(name)
    directory.mkdir(parents=True, exist_ok=True)
    # the partition of each word: a seeded hash, the same in every run
    parts = running.with_columns(
        (pl.col("word").hash(HASH_SEED) % RUN_PARTITIONS).alias("part")
    ).partition_by("part", as_dict=True, include_key=False)
    size = 0
    try:
        for p in range(RUN_PARTITIONS):
            df = parts.get((p,), running.clear())
            path = directory / f"p{p:03d}.parquet"
            with writing(path):  # a full disk: one error naming the file
                df.write_parquet(path, compression="lz4")
            size += path.stat().st_size
    except BaseException:
        # not in the manifest yet: a run cut short is of no use to --resume
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return name, size


def unit_sizes(units: list[Unit]) -> list[int]:
    """Each unit's share of the input bytes, for progress: the sum over its sources of a byte
    range's length; for Parquet row groups, the file's size split by the number of row groups
    (the units of a file cover all of them); a whole file's size; 0 for a pipe or standard
    input (no total then)."""
    groups: dict[str, int] = {}
    for src in (src for unit in units for src in unit.sources):
        if src.row_groups is not None:
            groups[src.label] = groups.get(src.label, 0) + len(src.row_groups)
    sizes = []
    for unit in units:
        total = 0
        for src in unit.sources:
            try:
                size = file_size(src) if src.kind == "file" else 0
            except OSError:
                size = 0
            if src.byte_range is not None:
                size = src.byte_range[1] - src.byte_range[0]
            elif src.row_groups is not None:
                size = size * len(src.row_groups) // max(groups[src.label], 1)
            total += size
        sizes.append(total)
    return sizes


def unit_bytes_for(budget: int) -> int:
    """The size of a unit for a running-table budget: a unit's partial table must fit beside
    the running table (64 MiB units, smaller under a small --memory-limit; 16 KiB at least)."""
    return max(MIN_UNIT_BYTES, min(UNIT_BYTES, budget // 2))


def count_bounded(units: list[Unit], cfg: TrainConfig, work: WorkDir, budget: int,
                  checkpoint_every: float, timer: StageTimer | None = None
                  ) -> tuple[pl.DataFrame, int]:
    """The words table of `units` (as `finish_count` makes it; with `cfg.max_words`, only
    the most frequent words, as `keep_most_frequent` keeps them) with the running table kept
    under `budget` bytes; and the bytes spilled. Resumes from `work`'s manifest when the work
    directory was resumed."""
    state = work.read_json(MANIFEST) if work.resumed else None
    # the units as planned (a resumed run with another --memory-limit plans other units)
    plan = [[[s.label, s.byte_range, s.row_groups] for s in u.sources] for u in units]
    if state is None or json.loads(json.dumps(plan)) != state.get("plan"):
        state = {"plan": plan, "done": 0, "unit_tokens": [], "runs": [], "spilled_bytes": 0}
    _drop_unlisted_runs(work, state["runs"])
    running: pl.DataFrame | None = None
    last = time.monotonic()
    sizes = unit_sizes(units)
    read_after = list(itertools.accumulate(sizes, initial=0))  # bytes read after unit i
    # progress by input bytes: the units before plus, within a whole compressed file, its
    # read position (a 1 GB .gz is one unit)
    READING.begin_units(sum(sizes) if all(s.kind == "file" for u in units for s in u.sources)
                        else None)
    bar = Progress("counting", unit="bytes", enabled=cfg.show_progress, meter=READING)
    for unit in units[state["done"]:]:
        # (a unit of several files: `unit_chunks` follows each file)
        READING.start_unit(unit.sources[0], read_after[unit.index], sizes[unit.index])
        part = count_unit(unit, cfg, timer, bar)
        # the sentinel (null word) holds the unit's number of pre-tokens
        state["unit_tokens"].append(int(part.filter(pl.col("word").is_null())["count"][0]))
        # empty words take positions (in the sentinel) but are no words (`finish_count`)
        running = _fold(running, part.filter(pl.col("word").str.len_bytes() > 0))
        done = unit.index + 1
        # spill when over budget, and checkpoint every `checkpoint_every` seconds
        if running.height and (running.estimated_size() > budget
                               or time.monotonic() - last >= checkpoint_every):
            name, size = _spill(work, running, len(state["runs"]))
            state["runs"].append(name)
            state["spilled_bytes"] += size
            running = None
        if running is None:
            state["done"] = done
            work.write_json(MANIFEST, state)
            last = time.monotonic()
        READING.end_unit(read_after[done])
        bar.update()
        kill_point("count", done)
    READING.end_unit(read_after[-1])
    bar.close()
    summed = _sum_runs(work, state["runs"], running, cfg.max_words)
    # the sentinels back, one per unit, for finish_count's offsets
    sentinels = pl.DataFrame({
        "word": pl.Series([None] * len(units), dtype=pl.String),
        "count": pl.Series(state["unit_tokens"], dtype=pl.UInt64),
        "key": pl.Series([u << UNIT_SHIFT for u in range(len(units))], dtype=pl.UInt64)})
    words = finish_count(pl.concat([summed.select(sentinels.columns), sentinels]), len(units),
                         cfg.max_word_chars)
    return words, state["spilled_bytes"]


def _sum_runs(work: WorkDir, runs: list[str], running: pl.DataFrame | None,
              max_words: int | None) -> pl.DataFrame:
    """Every run plus the in-memory rest summed, one partition at a time. With `max_words`,
    the `max_words` most frequent words of the partitions so far are kept after each one
    (`keep_most_frequent`; the key orders as first_seen does): a word's rows are all in one
    partition, so its count is final there and the kept words are the corpus's."""
    empty = pl.DataFrame(schema={"word": pl.String, "count": pl.UInt64, "key": pl.UInt64})
    if not runs:
        summed = running if running is not None else empty
        return keep_most_frequent(summed, max_words, tie="key")
    if running is not None and running.height:
        runs = [*runs, _spill(work, running, len(runs))[0]]
    summed = empty
    for p in range(RUN_PARTITIONS):
        files = [str(work.file(r) / f"p{p:03d}.parquet") for r in runs]
        part = pl.scan_parquet(files).group_by("word").agg(
            pl.col("count").sum(), pl.col("key").min()).collect()
        # with --max-words, memory holds the N kept so far plus one partition
        summed = keep_most_frequent(pl.concat([summed, part]), max_words, tie="key")
    return summed


def _drop_unlisted_runs(work: WorkDir, runs: list[str]) -> None:
    """Runs a killed spill left half-written (not in the manifest) are deleted."""
    directory = work.file("runs")
    if not directory.is_dir():
        return
    keep = {Path(r).name for r in runs}
    for d in directory.iterdir():
        if d.name not in keep:
            for f in d.iterdir():
                f.unlink()
            d.rmdir()
