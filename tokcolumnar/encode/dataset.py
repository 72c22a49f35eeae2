"""Dataset encoding: inputs -> a Parquet file with the text and its token ids, streamed batch by
batch into a temporary file that replaces the output at the end (see `outputs`). The next batch
is encoded while the previous one is written (Arrow's writer releases the GIL), so at most
WORKERS + QUEUED batches being encoded and one being written are held at once whatever the input
size."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ..corpus.readers import BYTES_PER_CHAR, iter_rows
from ..errors import TokcolumnarError
from ..outputs import (
    PARQUET_MARKER,
    PARTS_LAYOUT,
    PARTS_MARKER,
    output_dir,
    output_file,
    write_parquet,
)
from ..progress import READING, Progress, StageTimer
from ..text.pretokenizers import WholeSequence
from ..tokenizer import Tokenizer, offsets_column
from . import DEFAULT_COLUMNS, MAX_LINE_BYTES, OVERFLOW_COLUMN
from .config import EncodeConfig, check_columns
from .offsets import check_supported as check_offsets_supported
from .pack import Packer, configured_eos, pack_separator
from .stats import BatchStats, EncodeStats, batch_stats

BATCH_BYTES = 1 << 20  # text per encoded batch (the reader's pieces are regrouped up to this)
WORKERS = max(1, min(4, os.cpu_count() or 1))  # batches encoded at once
# batches handed to the encoding threads at most, beyond WORKERS queued: a thread that
# finishes its batch before the oldest one (the first batches, with cold caches, are the
# slowest) starts the next at once instead of waiting for the oldest to be written
QUEUED = 1
# encode_files' keyword options are EncodeConfig's fields, with the same defaults
KEYWORD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EncodeConfig) if f.init}


class RowLines(WholeSequence):
    """What the reader needs for encoding: whole lines (never cut), each at most the bound
    set by --max-line-bytes."""

    line_limit_option = "--max-line-bytes"


def batched(rows: Iterator[tuple[pl.Series, pa.Table]], batch_bytes: int,
            max_line_bytes: int) -> Iterator[tuple[pl.Series, pa.Table]]:
    """Regroup the reader's pieces (texts, kept input columns) into batches of about
    `batch_bytes` of text (in order); a sequence over `max_line_bytes` is refused with one
    error. The last full batch is held back until the input ends: it and the rest are then
    given as two halves, which the encoding threads take on together (a last batch alone
    kept one core busy while the others idled)."""
    pending: list[tuple[pl.Series, pa.Table]] = []
    held: tuple[pl.Series, pa.Table] | None = None
    size = 0
    for s, kept in rows:
        lengths = s.str.len_bytes()
        longest = int(lengths.max() or 0)  # type: ignore[arg-type]
        if longest > max_line_bytes:
            raise TokcolumnarError(f"a sequence of {longest:,} bytes is longer than the "
                                   f"limit of {max_line_bytes:,} bytes (--max-line-bytes)")
        pending.append((s, kept))
        size += int(lengths.sum() or 0)
        if size >= batch_bytes:
            if held is not None:
                yield held
            held = _joined(pending)
            pending, size = [], 0
    if held is not None:
        yield from _halves(_joined([held, *pending]))
    elif pending:
        yield _joined(pending)


def _halves(batch: tuple[pl.Series, pa.Table]) -> Iterator[tuple[pl.Series, pa.Table]]:
    """A batch as two batches of about half its text each (rows in order)."""
    texts, kept = batch
    if len(texts) < 2:
        yield batch
        return
    ends = texts.str.len_bytes().cum_sum().to_numpy()
    cut = min(max(int(ends.searchsorted(ends[-1] / 2)) + 1, 1), len(texts) - 1)
    yield texts.slice(0, cut), kept.slice(0, cut)
    yield texts.slice(cut), kept.slice(cut)


def _joined(pending: list[tuple[pl.Series, pa.Table]]) -> tuple[pl.Series, pa.Table]:
    kept = [t for _, t in pending]
    try:
        table = pa.concat_tables(kept, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TokcolumnarError(f"the kept columns (--keep-columns) differ between inputs: "
                               f"{str(e).splitlines()[0]}") from None
    return pl.concat([s for s, _ in pending]), table


def encoded_table(tok: Tokenizer, texts: pl.Series, column: str, columns: list[str],
                  keep_text: bool, add_special_tokens: bool, timer: StageTimer,
                  first_row: int = 0, overflow: bool = False) -> pa.Table:
    """One batch: the requested columns (with the text column first when kept) as Arrow.
    With `overflow` (truncation with a stride), one row per window, the text repeated, and
    the input row it comes from (`first_row` + its index in the batch) in `OVERFLOW_COLUMN`."""
    enc = tok.encode_frame(texts, add_special_tokens, offsets="offsets" in columns,
                           overflowing=overflow, timer=timer)
    with timer.stage("post-process"):
        ids = enc.get_column("ids")
        rows = enc.get_column(OVERFLOW_COLUMN)
        out: dict[str, pl.Series] = {}
        if keep_text:
            out[column] = texts.gather(rows) if overflow else texts
        if overflow:
            out[OVERFLOW_COLUMN] = (rows.cast(pl.UInt64) + first_row).rename(OVERFLOW_COLUMN)
        for name in columns:
            if name == "ids":
                out[name] = ids
            elif name == "n_tokens":
                out[name] = ids.list.len().cast(pl.UInt32)
            elif name == "tokens":
                out[name] = tok.tokens_of(ids)
            elif name == "word_ids":
                out[name] = enc.get_column("word_ids")
            elif name == "type_ids":
                out[name] = enc.get_column("type_ids")
            elif name == "attention_mask":  # 1 per token (no padding is written)
                out[name] = ids.list.eval(pl.element() * 0 + 1).cast(pl.List(pl.UInt8))
            elif name == "offsets":  # list<struct<start: u32, end: u32>>, HF's offsets
                out[name] = offsets_column(enc)
        return pl.DataFrame(out).to_arrow()


def encoded_batch(tok: Tokenizer, texts: pl.Series, kept: pa.Table, column: str,
                  columns: list[str], keep_text: bool, add_special_tokens: bool,
                  stats: EncodeStats | None, timer: StageTimer, first_row: int = 0,
                  overflow: bool = False) -> tuple[pa.Table, BatchStats | None]:
    """One batch as written: the text column (when kept), the other kept input columns (as
    they were read, Arrow types unchanged) and the output columns; with its statistics. With
    `overflow`, a row per window (`encoded_table`): the texts and kept columns follow the
    windows' input rows."""
    table = encoded_table(tok, texts, column, columns, keep_text, add_special_tokens, timer,
                          first_row, overflow)
    if overflow:  # each window's row of this batch
        local = pl.Series(table.column(OVERFLOW_COLUMN)).cast(pl.Int64) - first_row
        texts = texts.gather(local)
        kept = kept.take(local.to_arrow())
    counted = None
    if stats is not None:
        with timer.stage("stats"):
            counted = batch_stats(texts, pl.Series(table.column("ids")), stats.unk)
    if kept.num_columns:
        at = 1 if keep_text else 0
        for name in kept.column_names:
            table = table.add_column(at, kept.schema.field(name), kept.column(name))
            at += 1
    return table, counted


class ParquetSink:
    """Writes tables, in order, into one Parquet file (`rows_per_file` and `max_bytes` None)
    or into the parts `part-00000.parquet`, ... of a directory, each of at most
    `rows_per_file` rows or of about `max_bytes` bytes on disk; every file is marked as
    ours."""

    # the Parquet footer a part ends with, reserved in each part's budget: the schema and our
    # marker (~1 kB) and ~80 bytes per row group and column (measured: 1.3-1.7 kB for 2-3 row
    # groups of 3 columns); bounded above with margin
    FOOTER_BASE_BYTES = 2048
    FOOTER_BYTES_PER_CHUNK = 128

    def __init__(self, target: Path, rows_per_file: int | None, max_bytes: int | None = None):
        self.target = target
        self.rows_per_file = rows_per_file
        self.max_bytes = max_bytes
        self.writer: pq.ParquetWriter | None = None
        self.file: pa.NativeFile | None = None
        self.schema: pa.Schema | None = None
        self.parts = 0
        self.in_part = 0
        self.groups_in_part = 0
        # bytes on disk per byte of Arrow data, as written so far (1 before the first write:
        # Arrow's size bounds zstd Parquet's on these columns)
        self.disk_bytes = 0
        self.arrow_bytes = 0

    def _open(self, schema: pa.Schema) -> pq.ParquetWriter:
        self.close()
        split = self.rows_per_file is not None or self.max_bytes is not None
        path = self.target / f"part-{self.parts:05d}.parquet" if split else self.target
        schema = schema.with_metadata({PARQUET_MARKER: json.dumps({"kind": "encoded"})})
        self.file = pa.OSFile(str(path), "wb")
        self.writer = pq.ParquetWriter(self.file, schema, compression="zstd")
        self.parts += 1
        self.in_part = 0
        self.groups_in_part = 0
        return self.writer

    def _same_schema(self, table: pa.Table) -> pa.Table:
        """Every batch in the first batch's schema (a kept column Arrow read as null in one
        batch and as strings in the next); one error when it cannot be."""
        if self.schema is None:
            self.schema = table.schema
        if table.schema.equals(self.schema):
            return table
        try:
            return table.cast(self.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
            raise TokcolumnarError(
                "the kept columns (--keep-columns) change type between batches or inputs: "
                f"{table.schema.to_string(show_schema_metadata=False)!r} after "
                f"{self.schema.to_string(show_schema_metadata=False)!r}") from None

    def write(self, table: pa.Table) -> None:
        table = self._same_schema(table)
        if self.max_bytes is not None:
            self._write_sized(table)
            return
        if self.rows_per_file is None:
            (self.writer or self._open(table.schema)).write_table(table)
            return
        start = 0
        while start < table.num_rows:
            writer = self.writer
            if writer is None or self.in_part == self.rows_per_file:
                writer = self._open(table.schema)
            take = min(self.rows_per_file - self.in_part, table.num_rows - start)
            writer.write_table(table.slice(start, take))
            self.in_part += take
            start += take

    def _write_sized(self, table: pa.Table) -> None:
        """Parts of about `max_bytes`: each slice of rows is sized by the bytes on disk per
        Arrow byte seen so far, and a part is closed once the next row would not fit."""
        assert self.max_bytes is not None
        start, n = 0, table.num_rows
        while start < n:
            if self.writer is None:
                self._open(table.schema)
            assert self.writer is not None and self.file is not None
            used = self.file.tell()
            ratio = self.disk_bytes / self.arrow_bytes if self.arrow_bytes else 1.0
            # the Arrow bytes that fit, with a 10% margin: the next rows may compress less
            # well than the previous ones
            footer = self.FOOTER_BASE_BYTES + self.FOOTER_BYTES_PER_CHUNK * (
                self.groups_in_part + 1) * table.num_columns
            room = (self.max_bytes - footer - used) / (ratio * 1.1)
            take = _rows_within(table, start, room)
            if take < 1:
                if self.in_part:  # full: the rest goes into the next part
                    self._open(table.schema)
                    continue
                take = 1  # a row larger than the size alone: a part of its own
            piece = table.slice(start, take)
            self.writer.write_table(piece)
            self.groups_in_part += 1  # a write of fewer than 2^20 rows is one row group
            self.disk_bytes += self.file.tell() - used
            self.arrow_bytes += piece.nbytes
            self.in_part += take
            start += take
            if start < n and self.file.tell() > 0.9 * self.max_bytes:
                # nearly full: the next part starts now rather than after ever smaller
                # row groups
                self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.file is not None:
            self.file.close()
            self.file = None


def _rows_within(table: pa.Table, start: int, room: float) -> int:
    """The most rows from `start` whose Arrow size is within `room` bytes (rows differ in
    size: a binary search over the sizes of slices, each computed from the offsets)."""
    low, high = 0, table.num_rows - start
    while low < high:
        mid = (low + high + 1) // 2
        if table.slice(start, mid).nbytes <= room:
            low = mid
        else:
            high = mid - 1
    return low


def stats_path(out: str | os.PathLike) -> str:
    """Where --stats writes its table: beside the output, `OUT.stats.parquet` (for a file
    `o.parquet`: `o.stats.parquet`)."""
    text = os.fspath(out).rstrip("/")
    if text.endswith(".parquet"):
        text = text[: -len(".parquet")]
    return text + ".stats.parquet"


def encode_files(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                 fmt: str | None = None, column: str = "text", keep_newlines: bool = False,
                 force: bool = False, progress: bool | None = None,
                 columns: list[str] | None = None, keep_text: bool = True,
                 add_special_tokens: bool = True, max_line_bytes: int = MAX_LINE_BYTES,
                 rows_per_file: int | None = None, timer: StageTimer | None = None,
                 keep_columns: list[str] | str | None = None, pack: int | None = None,
                 pack_separator_token: str | None = None, pack_drop_last: bool = False,
                 max_file_size: int | str | None = None,
                 stats: bool | EncodeStats = False, max_length: int | None = None,
                 truncation: str | None = None, stride: int | None = None, *,
                 config: EncodeConfig | None = None) -> int:
    """Encode every sequence of `inputs` into the Parquet file `out`; returns the number of
    rows written. `tokenizer` is a Tokenizer or the path of a training directory or
    tokenizer.json (loaded after the output is checked). `columns`: the output columns
    (`OUTPUT_COLUMNS`; default ids, n_tokens), written after the text column unless
    `keep_text` is False. `add_special_tokens=False` skips the post-processor (HF's
    `add_special_tokens=False`). `timer` gets the wall time of each stage: read, normalize,
    pre-tokenize, dedupe, model, gather, post-process, stats, write (write overlaps the next
    batch's encoding). `rows_per_file`: `out` is a directory of Parquet parts of at most that
    many rows (row order kept), with the marker `_SUCCESS` written last; `max_file_size`
    (bytes or a size such as "256MB"): the same, each part cut at about that size on disk.

    `keep_columns`: input columns (names, or "all") written beside the outputs, row for row,
    after the text column. `pack`: the documents' ids, each followed by the separator
    (`pack.pack_separator`; `pack_separator_token` to choose it), cut into rows of exactly
    `pack` ids (the last one shorter, or dropped with `pack_drop_last`); documents are encoded
    without the post-processor's special tokens and only the ids (and n_tokens) are written.
    `stats`: True (or an `EncodeStats` to fill) writes the run's statistics to
    `stats_path(out)` (see `encode.stats`). `max_length`: truncate each encoding to that many
    tokens, special tokens included, from the `truncation` side (right or left) as HF's
    `enable_truncation`; with a `stride` every window is a row (consecutive windows sharing
    `stride` tokens, the kept columns repeated), with `overflow_to_sample_mapping` the index
    of its input row.

    `config`: the options as one `EncodeConfig` (every option checked there), instead of the
    keyword options (which build one); `force`, `progress`, `timer` and an `EncodeStats` to
    fill are given beside it."""
    options = dict(fmt=fmt, column=column, keep_newlines=keep_newlines, columns=columns,
                   keep_text=keep_text, add_special_tokens=add_special_tokens,
                   max_line_bytes=max_line_bytes, rows_per_file=rows_per_file,
                   keep_columns=keep_columns, pack=pack,
                   pack_separator_token=pack_separator_token, pack_drop_last=pack_drop_last,
                   max_file_size=max_file_size, stats=stats is not False,
                   max_length=max_length, truncation=truncation, stride=stride)
    if config is None:
        config = EncodeConfig(**options)
    elif any(value != KEYWORD_DEFAULTS[name] for name, value in options.items()
             if name != "stats"):
        raise TokcolumnarError("give the encode options either as config or as keywords, "
                               "not both")
    if config.engine != "polars":
        raise TokcolumnarError(f"encode_files encodes with Polars: --engine {config.engine} "
                               "is distributed.ray_encode's or distributed.spark's")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    fmt, column, keep_newlines = config.fmt, config.column, config.keep_newlines
    columns, keep_text = config.columns or list(DEFAULT_COLUMNS), config.keep_text
    add_special_tokens, max_line_bytes = config.add_special_tokens, config.max_line_bytes
    rows_per_file, max_bytes, keep = config.rows_per_file, config.max_bytes, config.keep_columns
    pack, pack_separator_token = config.pack, config.pack_separator_token
    pack_drop_last, truncate, stride = config.pack_drop_last, config.truncate, config.stride
    if config.stats and stats is False:
        stats = True
    timer = timer or StageTimer()
    # the input paths an output must not replace (an iterator of texts is not consumed here)
    guarded: list[Any] = list(inputs) if isinstance(inputs, (list, tuple)) else []
    if not isinstance(tokenizer, Tokenizer):
        guarded.append(tokenizer)
    elif tokenizer.source_file is not None:  # loaded by the caller (Tokenizer.from_tiktoken)
        guarded.append(tokenizer.source_file)
    bar = Progress("encoding", unit="bytes", enabled=progress, meter=READING)
    rows = 0
    split = config.split
    target = (output_dir(out, inputs=guarded, force=force, layout=PARTS_LAYOUT) if split
              else output_file(out, inputs=guarded, force=force))
    with contextlib.ExitStack() as outputs:
        # the stats file is checked with the output, before any work, and installed after it
        stats_tmp = (outputs.enter_context(output_file(stats_path(out), inputs=guarded,
                                                       force=force, what="--stats"))
                     if stats is not False else None)
        tmp = outputs.enter_context(target)
        pool = outputs.enter_context(ThreadPoolExecutor(max_workers=WORKERS))
        writer = outputs.enter_context(ThreadPoolExecutor(max_workers=1))
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(Path(tokenizer))
        if truncate is not None:
            # checked as HF checks it, with the special tokens added or not
            truncate.room(tok.num_special_tokens_to_add() if add_special_tokens else 0)
            tok = copy.copy(tok)  # the caller's tokenizer keeps its settings (a copy has
            tok.truncation_params = truncate  # caches of its own)
        tok.word_cache()  # made once, before the workers share it
        tok.model.prepare()  # and so are the model's tables
        if "offsets" in columns:
            check_offsets_supported(tok.normalizer, tok.pre_tokenizer)
        overflow = truncate is not None and stride is not None
        first_row = 0  # the input row of each batch's first text
        counted = None
        if stats is not False:
            counted = stats if isinstance(stats, EncodeStats) else EncodeStats()
            counted.use_tokenizer(tok)
        packer = None
        if pack is not None:
            configured = (None if isinstance(tokenizer, Tokenizer) or pack_separator_token
                          else configured_eos(tokenizer))
            packer = Packer(pack, pack_separator(tok, pack_separator_token, configured),
                            pack_drop_last, columns)
        doc_columns = ["ids"] if packer is not None else columns
        # batches being encoded, in input order
        encoding: deque[Future[tuple[pa.Table, BatchStats | None]]] = deque()
        written: Future[None] | None = None
        sink = ParquetSink(tmp, rows_per_file, max_bytes)
        try:
            # lines are rows (never cut); the reader refuses one longer than the bound
            # before holding more of it
            read = iter_rows(inputs, fmt, column, keep or [], pretokenizer=RowLines(),
                             max_word_chars=max(max_line_bytes // BYTES_PER_CHAR, 1))
            batches = batched(read, BATCH_BYTES, max_line_bytes)
            while True:
                with timer.stage("read"):
                    batch = next(batches, None)
                if batch is not None:
                    texts, kept = batch
                    if kept.num_columns and column in kept.column_names:  # "all"
                        kept = kept.drop_columns([column])
                    # `all` is known once an input is open (and may differ between inputs)
                    check_columns(columns, column, keep_text, kept.column_names)
                    if not keep_newlines:
                        texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
                    # batches are encoded in parallel (Polars and NumPy release the GIL)
                    encoding.append(pool.submit(encoded_batch, tok, texts.fill_null(""), kept,
                                                column, doc_columns, keep_text,
                                                add_special_tokens, counted, timer, first_row,
                                                overflow))
                    first_row += len(texts)
                if not encoding or (batch is not None and len(encoding) < WORKERS + QUEUED):
                    if batch is None:
                        break
                    continue
                table, batch_counts = encoding.popleft().result()
                if counted is not None and batch_counts is not None:
                    counted.add(batch_counts)
                if packer is not None:  # in input order: a document may span two blocks
                    table = packer.add(table.column("ids"))
                written = _handed(table, sink, writer, written, timer)
                rows += table.num_rows
                bar.update(rows=rows)
            if packer is not None:
                table = packer.finish()
                written = _handed(table, sink, writer, written, timer)
                rows += table.num_rows
                if not rows and packer.documents:
                    raise TokcolumnarError(
                        f"the input's {packer.total:,} ids (separators included) fill no "
                        f"block of --pack {pack:,}, and --pack-drop-last drops the last one")
            if not rows:
                raise TokcolumnarError("the input contains no rows to encode")
            with timer.stage("write"):
                if written is not None:
                    written.result()
                sink.close()
                if split:  # the marker last: the parts are complete
                    (tmp / PARTS_MARKER).write_text(json.dumps(
                        {"tool": "tokcolumnar", "kind": "encoded", "parts": sink.parts,
                         "rows": rows}) + "\n", encoding="utf-8")
                if counted is not None and stats_tmp is not None:
                    write_parquet(counted.table(), stats_tmp, "encode-stats")
        finally:
            # no job runs once the writer closes: one not started yet is cancelled, a running
            # one waited for; the executors' own lists, as an interrupt landing inside
            # `submit` loses the job's future but not its run
            writer.shutdown(wait=True, cancel_futures=True)
            pool.shutdown(wait=True, cancel_futures=True)
            sink.close()
    bar.rows = rows
    bar.close()
    return rows


def _handed(table: pa.Table | None, sink: ParquetSink, pool: ThreadPoolExecutor,
            written: Future[None] | None, timer: StageTimer) -> Future[None] | None:
    """Hand `table` to the writer thread once the previous table is written (one batch being
    written: memory stays bounded); the write in progress."""
    if table is None or not table.num_rows:
        return written
    with timer.stage("write"):
        if written is not None:
            written.result()
        return pool.submit(sink.write, table)


def encode_table(tok: Tokenizer, texts: pl.Series, column: str = "text",
                 keep_newlines: bool = False) -> pa.Table:
    """One chunk of sequences encoded as `encode_files` writes it with the default columns
    (the distributed engines' unit of work); a line's ending is stripped unless
    `keep_newlines`, a null text is ""."""
    if not keep_newlines:
        texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
    return encoded_table(tok, texts.fill_null(""), column, list(DEFAULT_COLUMNS), True, True,
                         StageTimer())
