"""Counting in ordered units, for engines that count on many workers (Ray, Spark) — with the
same words table as the single-machine count, `first_seen` included. No distributed engine is
imported here: the functions run in-process as well (tests, `count_units`).

A *unit* is a part of the corpus in reading order: the inputs as `expand_inputs` orders them,
each uncompressed text or JSONL file cut into byte ranges of about `unit_bytes` at line starts,
each Parquet file into groups of row groups, and every other input (compressed files, CSV, whose
quoted values may hold newlines; pipes and standard input) whole. Files that make one part
(smaller than a unit) are packed, consecutive ones together, into units of up to `unit_bytes`
(stored bytes; a Parquet file's uncompressed row groups): a folder of 10,000 small files is a
few units, not 10,000 units each paying a unit's fixed costs. A worker reads its unit's sources
one after the other with the single-machine reader (`unit_chunks`, `iter_source`), so the
sequences — and the pre-tokens — of the corpus are the units' in unit order, and a unit's
local positions run on across its files.

`first_seen` (the position of a word's first pre-token in the corpus) is exact in one pass:
`count_unit` returns the unit's words with the key `unit << 40 | local first position` and one
sentinel row (word null) holding the unit's number of pre-tokens. Summing partial tables takes
the count's sum and the key's min per word (`sum_partials`, in any grouping and order): as
positions in a later unit are all larger, the smallest key is the word's first occurrence. At
the end (`finish_count`) the prefix sums of the sentinels give each unit's offset, and
`first_seen = offset[unit] + local`. Limits: 2**24 units, 2**40 pre-tokens per unit."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from ..config import TrainConfig
from ..errors import TokcolumnarError
from ..progress import READING, Progress, StageTimer
from ..text.pretokenizers import PreTokenizer
from .counting import check_words, fold_chunks, map_words, prefetched, sort_words
from .readers import CHUNK_BYTES, iter_source, line_aligned_pieces, lines_of, metered
from .sources import (
    Source,
    digests_recorder,
    expand_inputs,
    file_size,
    open_seekable,
    parquet_metadata,
)

#: The target size of a unit of text / JSONL / Parquet.
UNIT_BYTES = 64 << 20
#: Bits of the packed key holding the position inside a unit; the unit number is above them.
UNIT_SHIFT = 40
MAX_UNITS = 1 << (64 - UNIT_SHIFT)
#: A partial table: per word of a unit (count, key), plus the sentinel (null word).
PARTIAL_SCHEMA = {"word": pl.String, "count": pl.UInt64, "key": pl.UInt64}


@dataclass(frozen=True)
class Unit:
    """One unit: its number in reading order and what it reads, in order: one part of an
    input (a byte range, row groups, a whole file, a pipe), or several whole files."""

    index: int
    sources: tuple[Source, ...]


def plan_units(inputs: Iterable[str | os.PathLike], fmt: str | None = None,
               unit_bytes: int = UNIT_BYTES) -> list[Unit]:
    """The corpus cut into ordered units (see the module docstring)."""
    packs: list[list[Source]] = []
    packed = 0  # bytes of the last pack, when it is open to more whole files
    for src in expand_inputs(inputs, fmt):
        if src.kind != "file":  # a pipe or standard input: alone (read front to back once)
            packs.append([src])
            packed = unit_bytes
            continue
        parts = _file_parts(src, unit_bytes)
        if len(parts) > 1:  # a large file: its parts are units of their own
            packs.extend([part] for part, _ in parts)
            packed = unit_bytes
            continue
        # a file of one part: into the last pack while that stays within a unit's bytes
        part, size = parts[0]
        if packs and packed < unit_bytes and packed + size <= unit_bytes:
            packs[-1].append(part)
            packed += size
        else:
            packs.append([part])
            packed = size
    if len(packs) > MAX_UNITS:
        raise TokcolumnarError(f"the corpus makes {len(packs):,} units, more than "
                               f"{MAX_UNITS:,}: use larger units")
    # a unit of one source reads it as planned; of several, each is a whole file (its only
    # part: a small text file is planned whole, a Parquet file's row groups are all of its
    # row groups), read whole: progress follows each file's position
    return [Unit(i, tuple(pack) if len(pack) == 1 else tuple(
        part if part.row_groups is None else dataclasses.replace(part, row_groups=None)
        for part in pack)) for i, pack in enumerate(packs)]


def _file_parts(src: Source, unit_bytes: int) -> list[tuple[Source, int]]:
    """A regular file's parts (see the module docstring) with their sizes for packing: a
    byte range's length, row groups' uncompressed bytes, else the file's stored size."""
    if src.compression or src.fmt == "csv":
        try:
            return [(src, file_size(src))]
        except OSError as e:
            raise TokcolumnarError(f"cannot read {src.label}: {e.strerror or e}") from None
    if src.fmt == "parquet":
        return _row_group_parts(src, unit_bytes)
    return _byte_range_parts(src, unit_bytes)


def unit_chunks(unit: Unit, column: str = "text", pretokenizer: PreTokenizer | None = None,
                max_word_chars: int | None = None, meter: bool = False
                ) -> Iterator[pl.Series]:
    """The sequences of a unit's sources, one source after the other (`iter_source`). With
    `meter`, `READING` follows them: each chunk (`metered`), and, in a unit of several files,
    each file from its start to its end, so that progress advances file by file. A unit of
    several files is read in a thread (`prefetched`), a chunk ahead of its count: reading
    thousands of small files is Python work, and a count is a Polars plan that leaves the
    interpreter to it."""
    if len(unit.sources) > 1:
        yield from prefetched(_files_chunks(unit.sources, column, pretokenizer,
                                            max_word_chars, meter))
        return
    [src] = unit.sources
    chunks = iter_source(src, column, pretokenizer, max_word_chars)
    yield from metered(src, chunks) if meter else chunks


def _files_chunks(sources: tuple[Source, ...], column: str, pretokenizer: PreTokenizer | None,
                  max_word_chars: int | None, meter: bool) -> Iterator[pl.Series]:
    """`unit_chunks` of several whole files: their sequences in order, the chunks of files
    smaller than a reader's chunk joined up to about one (order and values kept, so the
    sequences are the same): a Polars step per chunk costs about what counting a 2 KB file
    does. A small plain text file (`_small_text_size`) is read whole in one `os.read` and
    cut into sequences in Python (`_small_text`), without a Series of its own; its bytes go
    to the run's digest recorder (`sources.digests_recorder`; `prefetched` draws this in the
    run's context)."""
    record = digests_recorder()
    split_lines = pretokenizer is None or pretokenizer.line_sensitive
    pending: list[pl.Series] = []  # joined chunks, in order, ahead of `values`
    values: list[str] = []  # the sequences of the small text files read since
    pending_bytes = 0

    def joined() -> pl.Series:
        if values:
            pending.append(pl.Series("text", values, dtype=pl.String))
            values.clear()
        out = _joined(pending)
        pending.clear()
        return out

    for src in sources:
        small = _small_text_size(src)
        text = _small_text(src, small, record) if small is not None else None
        if text is not None:
            # each line a sequence, or (a pre-tokenizer blind to line ends) the file in
            # line-aligned pieces: what `iter_source` yields for the file, at no Series
            values.extend(lines_of(text) if split_lines else line_aligned_pieces(text))
            if meter:
                READING.finish(src)  # read whole: counted as read
            pending_bytes += small
            if pending_bytes >= CHUNK_BYTES:
                yield joined()
                pending_bytes = 0
            continue
        if values:  # the small files before this one come first
            pending.append(pl.Series("text", values, dtype=pl.String))
            values.clear()
        if meter:
            READING.start(src)
        chunks = iter_source(src, column, pretokenizer, max_word_chars)
        if meter:
            chunks = metered(src, chunks)
        # stored bytes (compressed ones fewer): a file of a chunk or more streams as read
        size = _stored_size(src)
        if size >= CHUNK_BYTES:
            if pending:
                yield joined()
                pending_bytes = 0
            yield from chunks
        else:
            pending.extend(chunks)
            pending_bytes += size
            if pending_bytes >= CHUNK_BYTES:
                yield joined()
                pending_bytes = 0
        if meter:
            READING.finish(src)
    if pending or values:
        yield joined()


def _small_text_size(src: Source) -> int | None:
    """The listed size of a plain (uncompressed, local, whole) text file smaller than a
    reader's chunk; None for any other input."""
    if (src.fmt != "text" or src.kind != "file" or src.compression or src.uri is not None
            or src.byte_range is not None or src.listed is None):
        return None
    return src.listed[0] if src.listed[0] < CHUNK_BYTES else None


def _small_text(src: Source, size: int,
                record: Callable[[Source, bytes], None] | None = None) -> str | None:
    """The text of a small plain text file of `size` bytes (as listed), read in one
    `os.read` (its bytes given to `record`: the run's fingerprints need not read it again);
    None when it is not that simple (it cannot be opened, it grew past its size, its bytes
    are not UTF-8): `iter_source` then reads it, and says what is wrong. A file under a
    chunk has no line over `readers.line_bound`, so nothing is refused here that the reader
    would refuse."""
    try:
        fd = os.open(src.path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, size + 1)  # a regular file reads short only at its end
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > size:
        return None
    if record is not None:
        record(src, data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _joined(pieces: list[pl.Series]) -> pl.Series:
    """Consecutive pieces as one Series in one memory chunk (a Series of thousands of chunks,
    one per small file, counts ~40% slower)."""
    return pl.concat(pieces, rechunk=True) if len(pieces) > 1 else pieces[0]


def _stored_size(src: Source) -> int:
    """A file's size as stored (0 when it cannot be read: its reading says why)."""
    try:
        return file_size(src)
    except OSError:
        return 0


def worker_units(inputs: Any, fmt: str | None, unit_bytes: int, engine: str) -> list[Unit]:
    """The units of file inputs for `--engine ENGINE`'s workers, which read the files
    themselves: data frames, iterators, pipes and standard input are refused."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)) or not all(
            isinstance(x, (str, os.PathLike)) for x in inputs):
        own = {"ray": "a Ray Dataset", "spark": "a Spark DataFrame"}.get(engine, "its own data")
        raise TokcolumnarError(f"--engine {engine} reads files (paths, directories, globs, "
                               f"URIs) or {own}, not {type(inputs).__name__}")
    units = plan_units(inputs, fmt, unit_bytes)
    for src in (src for unit in units for src in unit.sources):
        if src.kind != "file":
            what = "a named pipe" if src.kind == "pipe" else "a stream"
            raise TokcolumnarError(f"--engine {engine} reads files: {src.label} is "
                                   f"{what} its workers cannot read")
    return units


def _byte_range_parts(src: Source, unit_bytes: int) -> list[tuple[Source, int]]:
    """Line-aligned byte ranges of about `unit_bytes` of a text / JSONL file, with their
    lengths: each cut moves forward to the next line start (one seek and a short read per
    cut). A file of at most `unit_bytes` is read whole (found without opening it)."""
    try:
        size = file_size(src)
    except OSError as e:
        raise TokcolumnarError(f"cannot read {src.label}: {e.strerror or e}") from None
    if size <= unit_bytes:
        return [(src, size)]  # read whole
    cuts = [0]
    with open_seekable(src) as f:
        target = unit_bytes
        while target < size:
            cut = _next_line_start(f, target, size)
            if cut >= size:
                break
            cuts.append(cut)
            target = cut + unit_bytes
    cuts.append(size)
    return [(dataclasses.replace(src, byte_range=(a, b)), b - a) for a, b in zip(cuts, cuts[1:])]


def _next_line_start(f: Any, pos: int, size: int) -> int:
    """The first line start at or after `pos` (a line starts after each b"\\n")."""
    f.seek(pos - 1)
    at = pos - 1
    while at < size:
        block = f.read(64 << 10)
        if not block:
            break
        nl = block.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(block)
    return size


def _row_group_parts(src: Source, unit_bytes: int) -> list[tuple[Source, int]]:
    """Consecutive row groups of a Parquet file, about `unit_bytes` (uncompressed) each, with
    their uncompressed bytes."""
    import pyarrow as pa  # deferred: Parquet input only (a text corpus is read without it)

    try:
        meta = parquet_metadata(src)
    except TokcolumnarError:
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokcolumnarError(f"cannot read {src.label} as parquet: {msg}") from None
    if meta.num_row_groups == 0:
        return [(src, 0)]
    parts, group, size = [], [], 0
    for g in range(meta.num_row_groups):
        group.append(g)
        size += meta.row_group(g).total_byte_size
        if size >= unit_bytes:
            parts.append((dataclasses.replace(src, row_groups=tuple(group)), size))
            group, size = [], 0
    if group:
        parts.append((dataclasses.replace(src, row_groups=tuple(group)), size))
    return parts


def count_unit(unit: Unit, cfg: TrainConfig, timer: StageTimer | None = None,
               bar: Progress | None = None) -> pl.DataFrame:
    """The unit's partial table (`partial_table`), read as the single-machine count reads
    (progress to `bar`, if any, after each chunk)."""
    _, pretokenizer = cfg.text_components()
    chunks = unit_chunks(unit, cfg.column, pretokenizer, cfg.max_word_chars,
                         meter=bar is not None)
    return partial_table(chunks, cfg, unit.index, timer, bar)


def partial_table(chunks: Iterable[pl.Series], cfg: TrainConfig, unit: int,
                  timer: StageTimer | None = None, bar: Progress | None = None
                  ) -> pl.DataFrame:
    """The partial table of the sequences of unit number `unit`: (word, count, key = unit << 40
    | local first position) per word, and the sentinel (null, number of pre-tokens,
    unit << 40). The chunks are counted and folded as the single-machine count does
    (`corpus.counting`), positions from 0."""
    normalizer, pretokenizer = cfg.text_components()
    # local positions: first_seen counts from the unit's first pre-token
    merged, total = fold_chunks(chunks, normalizer, pretokenizer, first_seen=True,
                                progress=False, bar=bar)
    base = unit << UNIT_SHIFT
    sentinel = pl.DataFrame({"word": [None], "count": [total], "key": [base]},
                            schema=PARTIAL_SCHEMA)
    if merged is None:
        return sentinel
    words = map_words(merged, pretokenizer, timer).select(
        "word", "count", (pl.col("first_seen") + base).cast(pl.UInt64).alias("key"))
    return pl.concat([words, sentinel])


def sum_partials(partials: pl.DataFrame) -> pl.DataFrame:
    """Partial tables summed: per word the count's sum and the key's min; sentinels kept."""
    words = partials.filter(pl.col("word").is_not_null()).group_by("word").agg(
        pl.col("count").sum(), pl.col("key").min())
    return pl.concat([words, partials.filter(pl.col("word").is_null())])


def finish_count(summed: pl.DataFrame, n_units: int, max_word_chars: int | None = None
                 ) -> pl.DataFrame:
    """The words table (word, count, first_seen) from the summed partial tables of all
    `n_units` units: first_seen from the units' offsets (prefix sums of their sentinels),
    then the single-machine count's last steps (empty words dropped, checks, order)."""
    sentinels = summed.filter(pl.col("word").is_null()).select(
        (pl.col("key") // (1 << UNIT_SHIFT)).alias("unit"), pl.col("count").alias("n")
    ).sort("unit")
    if not sentinels.get_column("unit").equals(pl.Series("unit", range(n_units),
                                                         dtype=pl.UInt64)):
        raise RuntimeError(f"the partial tables hold {sentinels.height} unit sentinels for "
                           f"{n_units} units: a unit was lost or counted twice")
    offsets = sentinels.select("unit", (pl.col("n").cum_sum() - pl.col("n")).alias("offset"))
    words = summed.filter(pl.col("word").is_not_null() & (pl.col("word").str.len_bytes() > 0))
    words = words.with_columns((pl.col("key") // (1 << UNIT_SHIFT)).alias("unit")).join(
        offsets, on="unit", how="left").select(
        "word", "count",
        (pl.col("offset") + pl.col("key") % (1 << UNIT_SHIFT)).cast(pl.UInt64).alias(
            "first_seen"))
    check_words(words.height, words.select(pl.col("word").str.len_chars().max()).item(),
                max_word_chars)
    return sort_words(words)


def count_units(units: list[Unit], cfg: TrainConfig) -> pl.DataFrame:
    """The words table of the units, counted one after the other in this process (what a
    distributed engine does on its workers, in one place)."""
    partials: list[pl.DataFrame] = []
    for unit in units:
        partials.append(count_unit(unit, cfg))
        # fold every 8 units: memory holds a few units' tables plus the words so far
        if len(partials) >= 8:
            partials = [sum_partials(pl.concat(partials))]
    return finish_count(sum_partials(pl.concat(partials)), len(units), cfg.max_word_chars)
