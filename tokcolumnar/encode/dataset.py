"""Dataset encoding: inputs -> a Parquet file with the text and its token ids, streamed batch by
batch into a temporary file that replaces the output at the end (see `outputs`). The next batch
is encoded while the previous one is written (Arrow's writer releases the GIL), so at most two
batches are held at once whatever the input size."""

from __future__ import annotations

import copy
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

from ..corpus.readers import BYTES_PER_CHAR, iter_sequences
from ..errors import TokcolumnarError
from ..outputs import PARQUET_MARKER, PARTS_MARKER, output_dir, output_file
from ..progress import READING, Progress, StageTimer
from ..text.pretokenizers import WholeSequence
from ..tokenizer import Tokenizer, offsets_column
from . import DEFAULT_COLUMNS, MAX_LINE_BYTES, OUTPUT_COLUMNS, OVERFLOW_COLUMN
from .offsets import check_supported as check_offsets_supported
from .truncation import Truncation

BATCH_BYTES = 1 << 20  # text per encoded batch (the reader's pieces are regrouped up to this)
WORKERS = max(1, min(4, os.cpu_count() or 1))  # batches encoded at once


class RowLines(WholeSequence):
    """What the reader needs for encoding: whole lines (never cut), each at most the bound
    set by --max-line-bytes."""

    line_limit_option = "--max-line-bytes"


def check_columns(columns: list[str], text_column: str, keep_text: bool) -> None:
    """The output columns must be known, given once, and not named like the text column they
    would be written beside (never overwrite an input column silently)."""
    for name in columns:
        if name not in OUTPUT_COLUMNS:
            raise TokcolumnarError(f"unknown output column {name!r} (choose from "
                                   f"{', '.join(OUTPUT_COLUMNS)})")
    if len(set(columns)) != len(columns) or not columns:
        raise TokcolumnarError(f"--columns: give each column once, at least one "
                               f"(got {','.join(columns)!r})")
    if "ids" not in columns:
        raise TokcolumnarError("--columns must include ids")
    if keep_text and text_column in (*columns, OVERFLOW_COLUMN):
        raise TokcolumnarError(f"the input column {text_column!r} has the name of an output "
                               f"column: it would be overwritten (use --drop-text, or rename it)")


def batched(series: Iterator[pl.Series], batch_bytes: int, max_line_bytes: int
            ) -> Iterator[pl.Series]:
    """Regroup the reader's pieces into batches of about `batch_bytes` of text (in order);
    a sequence over `max_line_bytes` is refused with one error."""
    pending: list[pl.Series] = []
    size = 0
    for s in series:
        lengths = s.str.len_bytes()
        longest = int(lengths.max() or 0)  # type: ignore[arg-type]
        if longest > max_line_bytes:
            raise TokcolumnarError(f"a sequence of {longest:,} bytes is longer than the "
                                   f"limit of {max_line_bytes:,} bytes (--max-line-bytes)")
        pending.append(s)
        size += int(lengths.sum() or 0)
        if size >= batch_bytes:
            yield pl.concat(pending)
            pending, size = [], 0
    if pending:
        yield pl.concat(pending)


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


class ParquetSink:
    """Writes tables, in order, into one Parquet file (`rows_per_file` None) or into the parts
    `part-00000.parquet`, ... of a directory, each of at most `rows_per_file` rows; every file
    is marked as ours."""

    def __init__(self, target: Path, rows_per_file: int | None):
        self.target = target
        self.rows_per_file = rows_per_file
        self.writer: pq.ParquetWriter | None = None
        self.parts = 0
        self.in_part = 0

    def _open(self, schema: pa.Schema) -> pq.ParquetWriter:
        self.close()
        path = (self.target if self.rows_per_file is None
                else self.target / f"part-{self.parts:05d}.parquet")
        schema = schema.with_metadata({PARQUET_MARKER: json.dumps({"kind": "encoded"})})
        self.writer = pq.ParquetWriter(str(path), schema, compression="zstd")
        self.parts += 1
        self.in_part = 0
        return self.writer

    def write(self, table: pa.Table) -> None:
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

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def encode_files(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                 fmt: str | None = None, column: str = "text", keep_newlines: bool = False,
                 force: bool = False, progress: bool | None = None,
                 columns: list[str] | None = None, keep_text: bool = True,
                 add_special_tokens: bool = True, max_line_bytes: int = MAX_LINE_BYTES,
                 rows_per_file: int | None = None, timer: StageTimer | None = None,
                 max_length: int | None = None, truncation: str = "right",
                 stride: int | None = None) -> int:
    """Encode every sequence of `inputs` into the Parquet file `out`; returns the number of
    rows written. `tokenizer` is a Tokenizer or the path of a training directory or
    tokenizer.json (loaded after the output is checked). `columns`: the output columns
    (`OUTPUT_COLUMNS`; default ids, n_tokens), written after the text column unless
    `keep_text` is False. `add_special_tokens=False` skips the post-processor (HF's
    `add_special_tokens=False`). `timer` gets the wall time of each stage: read, normalize,
    pre-tokenize, dedupe, model, gather, post-process, write (write overlaps the next
    batch's encoding). `rows_per_file`: `out` is a directory of Parquet parts of at most that
    many rows (row order kept), with the marker `_SUCCESS` written last. `max_length`:
    truncate each encoding to that many tokens, special tokens included, from the `truncation`
    side (right or left) as HF's `enable_truncation`; with a `stride` every window is a row
    (consecutive windows sharing `stride` tokens), with `overflow_to_sample_mapping` the index
    of its input row. The number of rows written is returned."""
    if rows_per_file is not None and rows_per_file < 1:
        raise TokcolumnarError(f"--rows-per-file must be at least 1, got {rows_per_file}")
    if max_length is None and stride is not None:
        raise TokcolumnarError("--stride needs --max-length")
    truncate = (None if max_length is None
                else Truncation(max_length, stride or 0, truncation))
    columns = list(columns or DEFAULT_COLUMNS)
    check_columns(columns, column, keep_text)
    timer = timer or StageTimer()
    guarded: list[Any] = list(inputs)
    if not isinstance(tokenizer, Tokenizer):
        guarded.append(tokenizer)
    bar = Progress("encoding", unit="bytes", enabled=progress, meter=READING)
    rows = 0
    target = (output_file(out, inputs=guarded, force=force) if rows_per_file is None
              else output_dir(out, inputs=guarded, force=force))
    with target as tmp, \
            ThreadPoolExecutor(max_workers=WORKERS + 1) as pool:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(Path(tokenizer))
        if truncate is not None:
            # checked as HF checks it, with the special tokens added or not
            truncate.room(tok.num_special_tokens_to_add() if add_special_tokens else 0)
            tok = copy.copy(tok)  # the caller's tokenizer keeps its settings (a copy has
            tok.truncation_params = truncate  # caches of its own)
        tok.word_cache()  # made once, before the workers share it
        if "offsets" in columns:
            check_offsets_supported(tok.normalizer, tok.pre_tokenizer)
        overflow = truncate is not None and stride is not None
        first_row = 0  # the input row of each batch's first text
        encoding: deque[Future[pa.Table]] = deque()  # batches being encoded, in input order
        written: Future[None] | None = None
        sink = ParquetSink(tmp, rows_per_file)
        try:
            # lines are rows (never cut); the reader refuses one longer than the bound
            # before holding more of it
            sequences = iter_sequences(inputs, fmt=fmt, column=column,
                                       pretokenizer=RowLines(),
                                       max_word_chars=max(max_line_bytes // BYTES_PER_CHAR, 1))
            batches = batched(sequences, BATCH_BYTES, max_line_bytes)
            while True:
                with timer.stage("read"):
                    texts = next(batches, None)
                if texts is not None:
                    if not keep_newlines:
                        texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
                    # batches are encoded in parallel (Polars and NumPy release the GIL)
                    encoding.append(pool.submit(encoded_table, tok, texts.fill_null(""),
                                                column, columns, keep_text,
                                                add_special_tokens, timer, first_row,
                                                overflow))
                    first_row += len(texts)
                if not encoding or (texts is not None and len(encoding) < WORKERS):
                    if texts is None:
                        break
                    continue
                table = encoding.popleft().result()
                with timer.stage("write"):
                    if written is not None:
                        written.result()  # one batch being written: memory stays bounded
                    written = pool.submit(sink.write, table)
                rows += table.num_rows
                bar.update(rows=rows)
            if not rows:
                raise TokcolumnarError("the input contains no rows to encode")
            with timer.stage("write"):
                if written is not None:
                    written.result()
                sink.close()
                if rows_per_file is not None:  # the marker last: the parts are complete
                    (tmp / PARTS_MARKER).write_text(json.dumps(
                        {"tool": "tokcolumnar", "kind": "encoded", "parts": sink.parts,
                         "rows": rows}) + "\n", encoding="utf-8")
        finally:
            for job in [*encoding, written]:
                if job is not None:
                    job.cancel()
                    job.exception()  # wait for the workers before closing the writer
            sink.close()
    bar.rows = rows
    bar.close()
    return rows


def encode_table(tok: Tokenizer, texts: pl.Series, column: str = "text",
                 keep_newlines: bool = False) -> pa.Table:
    """One chunk of sequences encoded as `encode_files` writes it with the default columns
    (the distributed engines' unit of work); a line's ending is stripped unless
    `keep_newlines`, a null text is ""."""
    if not keep_newlines:
        texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
    return encoded_table(tok, texts.fill_null(""), column, list(DEFAULT_COLUMNS), True, True,
                         StageTimer())
