"""Word counting: sequences -> the `words` table (word, count[, first_seen]).

Each chunk is normalised, pre-tokenized, exploded and grouped in one Polars plan; partial
counts are folded per unit of `FOLD` batches into a running table (`CountFolder`), so the
running table of all distinct words is re-grouped once per ~64 MiB of text. Memory holds one
batch plus the running table and one unit's partial tables."""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import polars as pl

from .. import malloc
from ..errors import TokcolumnarError, word_too_long
from ..malloc import counting_heap
from ..progress import READING, Progress, StageTimer
from ..text.normalizers import Normalizer
from ..text.pretokenizers import PreTokenizer
from ..text.segmenters import Segmenter
from .sources import stop_reads_on

T = TypeVar("T")
R = TypeVar("R")


def count_chunk(texts: pl.Series, normalizer: Normalizer | None, pretokenizer: PreTokenizer,
                first_seen_offset: int | None = None) -> tuple[pl.DataFrame, int]:
    """Count the words of one chunk. Returns the partial table and the number of words."""
    col = pl.col("text")
    if normalizer is not None:
        col = normalizer.expr(col)
    chunks = pretokenizer.chunk_expr(col)
    if chunks is not None:
        return _count_by_chunks(texts, chunks, pretokenizer, first_seen_offset)
    # split only; the per-word mapping (e.g. byte-level's byte table) runs on distinct words
    lf = texts.to_frame("text").lazy().select(pretokenizer.split_expr(col).alias("word")
                                              ).explode("word").drop_nulls()
    if first_seen_offset is not None:
        lf = lf.with_row_index("pos", offset=first_seen_offset).group_by("word").agg(
            pl.len().cast(pl.UInt64).alias("count"),
            pl.col("pos").min().cast(pl.UInt64).alias("first_seen"))
    else:
        lf = lf.group_by("word").agg(pl.len().cast(pl.UInt64).alias("count"))
    part = lf.collect()
    n = int(part.get_column("count").sum() or 0)
    return part, n


def _count_by_chunks(texts: pl.Series, chunks: pl.Expr, pretokenizer: PreTokenizer,
                     first_seen_offset: int | None) -> tuple[pl.DataFrame, int]:
    """`count_chunk` through the pre-tokenizer's chunks (`PreTokenizer.chunk_expr`): the
    chunks are cut by a literal split and numbered (a Categorical of its own, one hash per
    chunk), the regex runs on the distinct chunks only, and each chunk's pieces take its
    count. A piece's first position is the smallest, over the chunks holding it, of the
    position of the chunk's first occurrence (the running sum of the occurrences' numbers of
    pieces before it) plus the piece's index in the chunk."""
    lists = texts.to_frame("text").select(chunks.alias("chunk")).to_series()
    occurrences = lists.explode()
    # a fresh category mapping: codes 0..D-1 in order of first appearance, freed with it
    codes_series = occurrences.cast(pl.Categorical(pl.Categories.random())).to_physical()
    if codes_series.null_count():  # null texts: their chunks have no pieces
        codes_series = codes_series.fill_null(codes_series.max() + 1
                                              if codes_series.max() is not None else 0)
    codes = codes_series.to_numpy()
    prefix = pretokenizer.chunk_prefix()
    prefixed = None
    if prefix:
        # every chunk but a row's first stands for prefix + chunk: the two are numbered apart
        per_row = np.maximum(lists.list.len().fill_null(0).to_numpy(), 1)  # explode's rows
        after_first = np.ones(len(codes), dtype=np.uint32)
        after_first[np.cumsum(per_row) - per_row] = 0
        codes = codes * np.uint32(2)
        codes += after_first  # in place: one temporary of 4 bytes per occurrence, not two
        codes, first_at = distinct_codes(codes)
        prefixed = pl.Series(after_first[first_at].astype(bool))
    else:
        codes, first_at = distinct_codes(codes)
    counts = np.bincount(codes, minlength=len(first_at))
    distinct = occurrences.gather(first_at)
    # the occurrences' string views (16 bytes each, ~12 MiB per 4 MiB batch of English) are
    # not needed past this point: freed before the pieces and the partial table are built,
    # where the batch's peak is
    del lists, occurrences, codes_series
    if prefixed is not None:
        distinct = pl.select(pl.when(prefixed).then(pl.lit(prefix) + distinct)
                             .otherwise(distinct)).to_series()
    # the regex on the distinct chunks only (a null chunk has no pieces)
    pieces = distinct.to_frame("chunk").select(pretokenizer.split_expr(pl.col("chunk"))
                                               .fill_null([]).alias("word")).to_series()
    n_pieces = pieces.list.len().to_numpy().astype(np.uint64)
    n = int(np.dot(n_pieces, counts.astype(np.uint64)))
    table = pl.DataFrame({"word": pieces, "count": pl.Series(counts, dtype=pl.UInt64)})
    if first_seen_offset is None:
        part = table.lazy().explode("word").drop_nulls("word").group_by("word").agg(
            pl.col("count").sum()).collect()
        return part, n
    # each chunk's first position: the pieces of the occurrences before its first one (a
    # running sum over the occurrences, in text order; u32 / one u64 array: few page faults)
    per_occurrence = n_pieces.astype(np.uint32)[codes]
    ends = np.cumsum(per_occurrence, dtype=np.uint64)
    starts = ends[first_at] - per_occurrence[first_at]
    table = table.with_columns(
        pl.Series("start", starts + np.uint64(first_seen_offset)),
        pl.int_ranges(0, pl.col("word").list.len(), dtype=pl.UInt64).alias("index"))
    part = table.lazy().explode("word", "index").drop_nulls("word").group_by("word").agg(
        pl.col("count").sum(), (pl.col("start") + pl.col("index")).min().alias("first_seen")
    ).collect()
    return part, n


def distinct_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`codes` renumbered 0..D-1 (D: the number of distinct codes) and the index of each new
    code's first occurrence. Codes already numbered in order of appearance (what a fresh
    Categorical gives) are checked as such and kept, their first occurrences read off the
    running maximum in one pass; other codes take `np.minimum.at` over 0..max."""
    if not len(codes):
        return codes, np.zeros(0, dtype=np.int64)
    running_max = np.maximum.accumulate(codes)
    rises = np.empty(len(codes), dtype=bool)
    rises[0] = True
    np.not_equal(running_max[1:], running_max[:-1], out=rises[1:])
    first = np.flatnonzero(rises)
    top = int(running_max[-1])
    # each new code is the previous maximum plus one: as many rises as codes, from code 0
    if int(codes[0]) == 0 and len(first) == top + 1:
        return codes, first
    del running_max, rises  # freed before the arrays below (a batch's peak is about here)
    # indexes in u32 where they fit (4 bytes per occurrence, not 8); both operands of
    # `minimum.at` of one dtype: a mixed pair takes NumPy's slow casting path (~40x)
    index = np.uint32 if len(codes) < 1 << 32 else np.int64
    first = np.full(top + 1, len(codes), dtype=index)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=index))
    present = first < len(codes)
    dense = (np.cumsum(present, dtype=np.int64) - 1).astype(codes.dtype)
    return dense[codes], first[present].astype(np.int64)


def map_words(words: pl.DataFrame, pretokenizer: PreTokenizer,
              timer: StageTimer | None = None) -> pl.DataFrame:
    """Apply the pre-tokenizer's per-word mapping to the distinct pieces, folding any pieces
    that map to the same word. A segmenter's pieces are chunks: each distinct chunk of the
    table is segmented once, and its words take its count; the segmenter's time goes to
    `timer`'s stage `count_segmenter` (a part of `count`)."""
    if isinstance(pretokenizer, Segmenter):
        with timer.stage("count_segmenter") if timer is not None else contextlib.nullcontext():
            return pretokenizer.segment_table(words)
    mapped = words.with_columns(pretokenizer.word_expr(pl.col("word")).alias("word"))
    if mapped.get_column("word").n_unique() == mapped.height:
        return mapped
    aggs = [pl.col("count").sum()]
    if "first_seen" in mapped.columns:
        aggs.append(pl.col("first_seen").min())
    return mapped.group_by("word").agg(aggs)


def merge_counts(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Fold partial count tables into one."""
    if len(parts) == 1:
        return parts[0]
    df = pl.concat(parts, how="vertical")
    aggs = [pl.col("count").sum()]
    if "first_seen" in df.columns:
        aggs.append(pl.col("first_seen").min())
    return df.group_by("word").agg(aggs)


#: Text counted per Polars plan: readers yield ~1 MiB chunks; counting about 4 MiB at a time
#: pays the plan's fixed cost a quarter as often (13% less CPU on a 200 MB corpus).
COUNT_BYTES = 4 << 20


def batched_chunks(chunks: Iterable[pl.Series], batch_bytes: int | None = None
                   ) -> Iterator[pl.Series]:
    """Consecutive chunks concatenated up to at least `batch_bytes` (default `COUNT_BYTES`)
    of text (order kept, so word positions and first_seen are those of the chunks one by
    one)."""
    batch_bytes = COUNT_BYTES if batch_bytes is None else batch_bytes
    batch: list[pl.Series] = []
    size = 0
    for texts in chunks:
        batch.append(texts)
        size += int(texts.str.len_bytes().sum() or 0)
        if size >= batch_bytes:
            yield pl.concat(batch) if len(batch) > 1 else batch[0]
            batch, size = [], 0
    if batch:
        yield pl.concat(batch) if len(batch) > 1 else batch[0]


#: Partial tables folded into one unit table (16 batches of ~4 MiB: a ~64 MiB unit).
FOLD = 16


class CountFolder:
    """Folds partial count tables in two steps: `FOLD` batch tables make one *unit* table, and
    each unit folds into the running table. Sum and min are associative and commutative, so
    any folding order gives the same table (row order aside, which `sort_words` fixes). The
    running table (all distinct words so far) is re-grouped once per unit instead of once per
    8 chunks, and memory holds the running table plus at most `FOLD` small tables (folding
    level by level held up to 7 near-full-size tables per level)."""

    def __init__(self) -> None:
        self.running: pl.DataFrame | None = None
        self.batch: list[pl.DataFrame] = []

    def add(self, part: pl.DataFrame) -> None:
        self.batch.append(part)
        if len(self.batch) >= FOLD:
            self._fold_unit()

    def _fold_unit(self) -> None:
        # the unit's tables first, then the unit into the running table
        unit = merge_counts(self.batch)
        self.batch = []
        self.running = unit if self.running is None else merge_counts([self.running, unit])

    def result(self) -> pl.DataFrame | None:
        """All tables folded into one; None when none was added."""
        if self.batch:
            self._fold_unit()
        running, self.running = self.running, None
        return running


def fold_chunks(chunks: Iterable[pl.Series], normalizer: Normalizer | None,
                pretokenizer: PreTokenizer, first_seen: bool = False,
                progress: bool | None = None, bar: Progress | None = None
                ) -> tuple[pl.DataFrame | None, int]:
    """The chunks counted and folded into one table (chunk, count[, first_seen]: positions from
    0; chunks not yet mapped to words) and the number of pre-tokens; None when no chunk has
    one. The single-machine count and a distributed unit's partial table both start here.
    Progress goes to `bar` (the caller closes it when the count is done), else to a new one
    (`progress`), left open: a unit's count is a part of a stage."""
    folder = CountFolder()
    total = 0
    bar = bar or Progress("counting", unit="bytes", enabled=progress, meter=READING)
    offset = 0 if first_seen else None

    def count(texts: pl.Series) -> tuple[pl.DataFrame, int]:
        return count_chunk(texts, normalizer, pretokenizer, offset)

    # two batches counted at once (a batch's plan keeps about one core busy) and the next one
    # read in a thread meanwhile: the count's wall time on two cores. Batches of half the
    # size then (two in flight hold about one batch's temporaries: the count is the peak of
    # a medium file's run; medium/en byte-level +50-65 MiB with whole ones, ~+20 with
    # halves), except in a large count (tokcolumnar.malloc.large_count), which also reuses
    # per-batch temporaries from glibc's heap
    large = malloc.large_count
    workers = min(pl.thread_pool_size(), COUNT_BATCHES)
    batches = batched_chunks(chunks, COUNT_BYTES if workers == 1 or large
                             else COUNT_BYTES // workers)
    if workers > 1:
        batches = prefetched(batches)
    with counting_heap() if large else contextlib.nullcontext():
        for part, n in ordered_map(count, batches, workers):
            if first_seen and total and len(part):  # counted from 0: shift by what came before
                part = part.with_columns(pl.col("first_seen") + total)
            total += n
            if len(part):
                folder.add(part)
            bar.update()  # a clock check; the position is read only when a line is due
        return folder.result(), total


#: Batches counted at once, at most Polars' thread count.
COUNT_BATCHES = 2


def ordered_map(work: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """`work` of each item, in the items' order, with up to `workers` items worked on at once
    in threads (the items are drawn in this thread, one ahead of the results yielded); in
    this thread alone for one worker. An error stops the drawing and is raised in order."""
    if workers <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(work, item))
                if len(pending) >= workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # an error or an abandoned generator: drop the rest
                future.cancel()


def prefetched(items: Iterable[T]) -> Iterator[T]:
    """The items, each drawn in a thread while the caller works on the one before: reading
    and decoding the next batch overlap its count (a Polars plan, which releases the GIL).
    One item waits at most (memory: one more batch). An error of the drawing is raised here,
    in order; when the caller stops early, the thread stops after its current item, or
    within a moment when that item waits for a pipe nobody writes to (`sources.stop_reads_on`:
    the caller's cleanup waits for the thread)."""
    box: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def hand(entry: tuple[bool, Any]) -> bool:
        """Put `entry` in the box; False when the caller stopped meanwhile."""
        while not stop.is_set():
            try:
                box.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def draw() -> None:
        stop_reads_on(stop)  # (this thread's context only)
        try:
            for item in items:
                if not hand((True, item)):
                    return
            hand((False, None))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            hand((False, e))

    # the drawing runs in the caller's context: a generator drawn there sees the caller's
    # context variables (a run's scope, `sources.run_scope`), as if drawn in its thread
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(draw,), name="tokcolumnar-reader",
                              daemon=True)
    thread.start()
    try:
        while True:
            more, value = box.get()
            if not more:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            box.get_nowait()  # let a drawing thread blocked on a full box see the stop
        thread.join()


def count_chunks(chunks: Iterable[pl.Series], normalizer: Normalizer | None,
                 pretokenizer: PreTokenizer, first_seen: bool = False,
                 max_word_chars: int | None = None, progress: bool | None = None,
                 timer: StageTimer | None = None) -> pl.DataFrame:
    """Build the `words` table, sorted by first appearance when tracked, else by word (a
    segmenter's time to `timer`, see `map_words`)."""
    # the stage's summary line waits for its checks: a refused count ends with the error alone
    bar = Progress("counting", unit="bytes", enabled=progress, meter=READING)
    merged, _ = fold_chunks(chunks, normalizer, pretokenizer, first_seen, bar=bar)
    if merged is None:
        raise TokcolumnarError(NO_WORDS)
    words = map_words(merged, pretokenizer, timer)
    words = words.filter(pl.col("word").str.len_bytes() > 0)
    check_words(words.height, words.select(pl.col("word").str.len_chars().max()).item(),
                max_word_chars)
    bar.close()
    return sort_words(words)


NO_WORDS = "the input contains no words (empty files or empty column?)"


def check_words(n_words: int, longest: int | None, max_word_chars: int | None) -> None:
    """Refuse a count with no words, or with a word over --max-word-chars (both engines)."""
    if n_words == 0:
        raise TokcolumnarError(NO_WORDS)
    if max_word_chars and longest and longest > max_word_chars:
        raise TokcolumnarError(word_too_long(f"{longest:,}", max_word_chars))


def sort_words(words: pl.DataFrame) -> pl.DataFrame:
    """Deterministic row order: first appearance when known, else by word."""
    if "first_seen" in words.columns:
        return words.sort("first_seen").select("word", "count", "first_seen")
    return words.sort("word").select("word", "count")
