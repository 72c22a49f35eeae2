"""Corpus reading: inputs -> a stream of Polars string Series (one value per sequence, or per
chunk of lines when the pre-tokenizer does not care about line boundaries).

Text files are read in binary chunks cut at line ends, so memory stays near one chunk whatever
the corpus size. Each line keeps its line ending, as HF `Tokenizer.train(files)` does. A line
longer than a chunk is cut where the pre-tokenizer says a cut cannot change its words
(`PreTokenizer.line_cut`, whose rules are in `line_cuts`); a stretch of more than
4 x --max-word-chars bytes without such a place is refused, so memory stays bounded whatever
the line length.

Inputs are resolved by `sources.expand_inputs`; Parquet, JSONL and CSV inputs come as Arrow
batches of their text column."""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

import polars as pl

from ..errors import TokcolumnarError, word_too_long
from ..progress import READING
from ..text.pretokenizers import PreTokenizer, WholeSequence
from .line_cuts import LineCut, line_cut
from .sources import ReadStopped, Source, expand_inputs, open_binary, parquet_file

CHUNK_BYTES = 1 << 20
PIECE_CHARS = 64 << 10
#: A chunk shorter than this (a small file's text) is cut into lines in Python: a Polars
#: split and explode cost ~0.15 ms whatever the size, Python ~8 us for 3 KB, as much at ~256 KB.
SPLIT_IN_PYTHON_CHARS = 64 << 10
# A character is at most 4 UTF-8 bytes: more than 4 x N bytes hold more than N characters.
BYTES_PER_CHAR = 4
# A cut rule (`LineCut`) looks at no more than this many bytes on each side of a cut.
CUT_REACH = 4
# Arrow's JSONL / CSV block size (the longest row it can read) when no --max-word-chars is set.
UNBOUNDED_ROW_BYTES = 64 << 20
def _decode(data: bytes | bytearray, src: Source, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise TokcolumnarError(
            f"{src.label}: invalid UTF-8 at byte {offset + e.start} (line {line} of the chunk "
            f"starting at byte {offset})") from None


@cache
def _cut_finders(cut: LineCut) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """Regexes finding the first and the last cut point of a buffer (match end = cut). The
    last one is a greedy `.*` before the rule: the regex engine backtracks from the end, so it
    finds the last cut point in C without scanning the buffer from the front in Python."""
    return re.compile(cut.pattern), re.compile(b"(?s:.*)(?:" + cut.pattern + b")")


def line_bound(max_word_chars: int | None, chunk_bytes: int) -> int | None:
    """The most bytes a line may run without a cut point: 4 x --max-word-chars (never below a
    chunk); None without --max-word-chars."""
    if not max_word_chars:
        return None
    return max(BYTES_PER_CHAR * max_word_chars, chunk_bytes)


def _no_cut_error(src: Source, offset: int, bound: int, max_word_chars: int,
                  pretokenizer: PreTokenizer | None) -> TokcolumnarError:
    where = f"{src.label}, byte {offset:,}"
    option = getattr(pretokenizer, "line_limit_option", None)
    if option:  # lines are rows (encode): a line over the bound is refused as such
        return TokcolumnarError(f"{where}: a line of more than {bound:,} bytes (the limit set "
                                f"by {option}; raise it to encode longer lines)")
    if isinstance(pretokenizer, WholeSequence):  # the line is one pre-token
        return TokcolumnarError(f"{where}: a line of more than {bound:,} bytes: "
                                + word_too_long(f"more than {max_word_chars:,}", max_word_chars))
    cut = line_cut(pretokenizer)
    rule = f"it cuts {cut.rule}" if cut else "it cuts only at line ends"
    return TokcolumnarError(
        f"{where}: a line runs more than {bound:,} bytes without a place where the "
        f"pre-tokenizer can cut it exactly ({rule}); lines are read in pieces of at most "
        "4 x --max-word-chars bytes (at least 1 MiB): split the input, choose another "
        "pre-tokenizer, or raise --max-word-chars")


def iter_text_file(src: Source, pretokenizer: PreTokenizer | None = None,
                   max_word_chars: int | None = None,
                   chunk_bytes: int | None = None) -> Iterator[str]:
    """Yield decoded chunks of whole lines (line endings kept) from a text input. A line
    longer than a chunk is yielded in pieces cut at `line_cut(pretokenizer)` points (which
    give the same words), and refused when it runs more than `line_bound` bytes without one;
    without a pre-tokenizer lines are never cut nor bounded."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    cut = line_cut(pretokenizer)
    first_cut, last_cut = _cut_finders(cut) if cut else (None, None)
    bound = line_bound(max_word_chars, chunk_bytes) if pretokenizer is not None else None
    stream = open_binary(src)
    # A plain file's bytes left: reads no larger than the file (a read allocates its size
    # first: a 1 MiB block per 3 KB file is a mapping made and dropped, ~100 us)
    left = _bytes_left(stream)
    # Bytes after the last cut: no line end in them.
    pending = bytearray()
    offset = src.byte_range[0] if src.byte_range else 0  # input offset of pending[0]
    scanned = 0  # pending[:scanned] was searched for cut points and holds none
    try:
        while True:
            size = chunk_bytes if left is None else min(chunk_bytes, left + 1)
            try:
                block = stream.read(size)
            except ReadStopped:
                raise  # the run is stopping: not the input's fault
            except (OSError, EOFError) as e:
                raise TokcolumnarError(f"cannot read {src.label}: {e}") from None
            except Exception as e:  # noqa: BLE001 - ArrowException from a corrupt stream
                raise TokcolumnarError(f"cannot read {src.label}: {e}") from None
            if not block:
                break
            if left is not None:  # more than was left: the file grew, its size is unknown
                left = None if len(block) > left else left - len(block)
            # Only the new bytes can hold a line end; cut points can also sit just before
            # them (a rule sees up to 4 bytes on each side of a cut) or anywhere in bytes not
            # searched yet (the rest of a line after the previous chunk's last line end).
            start = len(pending)
            pending += block
            look = max(scanned - 2 * CUT_REACH, 0)
            if bound is not None and len(pending) > bound:
                # The stretch up to the first line end or cut point must fit in the bound.
                nl = pending.find(b"\n", start)
                ends = [nl + 1] if nl >= 0 else []
                if first_cut is not None and (m := first_cut.search(pending, look)):
                    ends.append(m.end())
                if not ends or min(ends) > bound:
                    raise _no_cut_error(src, offset, bound, max_word_chars or 0, pretokenizer)
            # Yield up to the last line end of the block; when the block holds none (a long
            # line), up to the last cut point.
            end = pending.rfind(b"\n", start) + 1
            if end:
                scanned = 0  # the rest of the line was not searched for cut points
            else:
                if last_cut is not None and (m := last_cut.match(pending, look)):
                    end = m.end()
                scanned = len(pending) - end
            if end:
                yield _decode(pending[:end], src, offset)
                offset += end
                del pending[:end]
        if pending:
            yield _decode(pending, src, offset)
    finally:
        stream.close()


def _bytes_left(stream: Any) -> int | None:
    """The bytes after the position of a regular file read as stored (a plain Python file);
    None for anything else (decompressed, a byte range, a pipe, an Arrow stream)."""
    if not (isinstance(stream, io.BufferedReader) and isinstance(stream.raw, io.FileIO)):
        return None
    try:
        st = os.fstat(stream.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        return max(st.st_size - stream.tell(), 0)
    except OSError:
        return None


def kept_names(keep: list[str] | str, names: list[str], label: str) -> list[str]:
    """The input columns `keep` names among an input's columns `names` (`"all"`: every one, in
    the input's order); a name the input lacks is refused, naming the columns it has."""
    if keep == "all":
        return list(names)
    missing = [k for k in keep if k not in names]
    if missing:
        raise TokcolumnarError(f"{label}: no column {missing[0]!r} to keep (--keep-columns; "
                               f"columns: {', '.join(names) or 'none'})")
    return list(keep)


def _column_batches(src: Source, column: str, max_row_bytes: int | None = None,
                    keep: list[str] | str | None = None) -> Iterator[Any]:
    """Yield Arrow arrays of the text column from a Parquet, JSONL or CSV input, streamed.
    A JSONL / CSV row may hold at most `max_row_bytes` bytes (Arrow's block size; 1 MiB by
    default). With `keep` (input column names, or "all"), yield instead (text array, Arrow
    table of those columns) pairs, row for row."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    kept: list[str] = []

    def check(names: list[str]) -> None:
        if column not in names:
            raise TokcolumnarError(f"{src.label}: no column {column!r} (columns: "
                                   f"{', '.join(names) or 'none'}); choose one with --column")
        if keep is not None:
            kept[:] = kept_names(keep, names, src.label)

    def out(batch: Any, text: Any) -> Any:
        if keep is None:
            return text
        return text, pa.Table.from_batches([batch]).select(kept)

    if src.fmt == "parquet" and src.kind != "file":
        raise TokcolumnarError(f"{src.label}: Parquet needs a seekable file, not a pipe or "
                               "standard input")
    block = min(max(max_row_bytes or CHUNK_BYTES, CHUNK_BYTES), (1 << 31) - 1)
    stream = None
    try:
        if src.fmt == "parquet":
            stream = open_binary(src, arrow=True) if src.compression else None
            pf = pq.ParquetFile(stream) if stream is not None else parquet_file(src)
            check(pf.schema_arrow.names)
            for batch in pf.iter_batches(columns=list(dict.fromkeys([column, *kept])),
                                         batch_size=65536, row_groups=src.row_groups):
                yield out(batch, _validated(batch.column(column), src))
            pf.close()
        elif src.fmt == "csv":
            parse = pcsv.ParseOptions(delimiter="\t" if ".tsv" in src.path.name else ",",
                                      newlines_in_values=True)
            stream = open_binary(src, arrow=True)
            reader = pcsv.open_csv(stream, read_options=pcsv.ReadOptions(block_size=block),
                                   parse_options=parse,
                                   convert_options=pcsv.ConvertOptions(
                                       column_types={column: pa.large_string()}))
            check(reader.schema.names)
            for batch in reader:
                yield out(batch, batch.column(reader.schema.get_field_index(column)))
        else:
            stream = open_binary(src, arrow=True)
            reader = pjson.open_json(stream, read_options=pjson.ReadOptions(block_size=block))
            check(reader.schema.names)
            for batch in reader:
                yield out(batch, batch.column(reader.schema.get_field_index(column)))
    except (TokcolumnarError, ReadStopped):
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "straddl" in msg:  # Arrow: a row does not fit in one block
            raise TokcolumnarError(
                f"cannot read {src.label} as {src.fmt}: a row of more than {block:,} bytes "
                "(rows are read in blocks of 4 x --max-word-chars bytes: split the input or "
                "raise --max-word-chars)") from None
        raise TokcolumnarError(f"cannot read {src.label} as {src.fmt}: {msg}") from None
    finally:
        if stream is not None:
            stream.close()


def _validated(arr: Any, src: Source) -> Any:
    """A Parquet string column as Arrow gives it, its UTF-8 checked (Parquet readers do not
    check it, and invalid bytes would silently vanish in the regexes)."""
    import pyarrow as pa

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or (
            pa.types.is_string_view(arr.type)):
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as e:
            raise TokcolumnarError(f"{src.label}: invalid UTF-8 in the text column ({e})"
                                   ) from None
    return arr


def check_parquet_column(src: Source, column: str) -> None:
    """Refuse a Parquet file without the text column, or with a column that is not strings,
    with the Polars engine's messages (for readers that do not go through `iter_source`)."""
    import pyarrow as pa

    try:
        pf = parquet_file(src)
        schema = pf.schema_arrow
        pf.close()
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokcolumnarError(f"cannot read {src.label} as parquet: {msg}") from None
    if column not in schema.names:
        raise TokcolumnarError(f"{src.label}: no column {column!r} (columns: "
                               f"{', '.join(schema.names) or 'none'}); choose one with --column")
    field_type = schema.field(column).type
    if pa.types.is_dictionary(field_type):
        field_type = field_type.value_type
    _as_string_series(pa.array([], type=field_type), src.label)


def _as_string_series(arr: Any, where: str) -> pl.Series:
    s = pl.Series("text", arr)
    if s.dtype != pl.String:
        if s.dtype == pl.Null:
            return s.cast(pl.String)
        raise TokcolumnarError(f"{where}: text column has type {s.dtype}, expected strings")
    return s


def cut_long_sequences(texts: pl.Series, cut: LineCut | None, size: int) -> pl.Series:
    """`texts` with every value longer than `size` characters cut at the first cut point of
    `cut` after every `size` bytes (the cut points are exact: the words stay the same); for
    engines whose memory grows with the length of a sequence."""
    if cut is None:
        return texts
    long = texts.str.len_chars() > size
    if not long.any():
        return texts
    pattern, _ = _cut_finders(cut)
    rows = long.arg_true()
    pieces = []
    for text in texts.gather(rows).to_list():  # the long values only (few, usually)
        # The rules work on UTF-8 bytes and always cut between characters.
        data, out, start = text.encode(), [], 0
        while len(data) - start > size and (m := pattern.search(data, start + size)):
            out.append(data[start:m.end()].decode())
            start = m.end()
        out.append(data[start:].decode())
        pieces.append(out)
    cut_values: list[list[str] | None] = [None] * len(texts)
    for row, out in zip(rows.to_list(), pieces):
        cut_values[row] = out
    frame = pl.DataFrame({"text": texts, "cut": pl.Series(cut_values, dtype=pl.List(pl.String))})
    return frame.select(pl.when(pl.col("cut").is_null()).then(pl.concat_list("text"))
                        .otherwise(pl.col("cut")).alias(texts.name)).to_series().explode()


def line_aligned_pieces(text: str, size: int | None = None) -> list[str]:
    """Cut a chunk into pieces of about `size` characters, each ending at a line end, so that
    Polars can spread the regex work over its threads."""
    size = size or PIECE_CHARS
    out, i, n = [], 0, len(text)
    while i < n:
        j = text.find("\n", i + size)
        j = n if j < 0 else j + 1
        out.append(text[i:j])
        i = j
    return out


def lines_of(text: str) -> list[str]:
    """`text` cut after each "\\n" (line endings kept; no empty last line), as Polars'
    `str.split("\\n", inclusive=True)` cuts it."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def iter_source(src: Source, column: str = "text", pretokenizer: PreTokenizer | None = None,
                max_word_chars: int | None = None, split_lines: bool | None = None
                ) -> Iterator[pl.Series]:
    """Stream one input as Polars string Series: text as lines (each a sequence; for a
    pre-tokenizer with `line_sensitive=False`, line-aligned pieces of many lines unless
    `split_lines` is True), long lines cut and bounded as `iter_text_file` says; Parquet /
    JSONL / CSV as batches of the column."""
    if src.fmt == "text":
        if split_lines is None:
            split_lines = pretokenizer is None or pretokenizer.line_sensitive
        for chunk in iter_text_file(src, pretokenizer, max_word_chars):
            if split_lines and len(chunk) < SPLIT_IN_PYTHON_CHARS:
                yield pl.Series("text", lines_of(chunk), dtype=pl.String)
            elif split_lines:
                s = pl.Series("text", [chunk], dtype=pl.String)
                yield s.str.split("\n", inclusive=True).explode()
            else:
                yield pl.Series("text", line_aligned_pieces(chunk), dtype=pl.String)
    else:
        row_bytes = None  # Arrow's default block without a pre-tokenizer (encoding)
        if pretokenizer is not None:
            row_bytes = line_bound(max_word_chars, CHUNK_BYTES) or UNBOUNDED_ROW_BYTES
        for arr in _column_batches(src, column, row_bytes):
            yield _as_string_series(arr, src.label)


def iter_rows(inputs: list[str], fmt: str | None, column: str, keep: list[str] | str,
              pretokenizer: PreTokenizer | None = None, max_word_chars: int | None = None
              ) -> Iterator[tuple[pl.Series, Any]]:
    """`iter_sequences` over input paths with other columns of the rows: (texts, Arrow table of
    the input columns `keep` (names, or "all"), row for row). A text input's only column is
    the text (named `column`: each line one row); a Parquet / JSONL / CSV input without one of
    the `keep` columns is refused, naming the columns it has."""
    import pyarrow as pa

    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if not (isinstance(inputs, (list, tuple))
            and all(isinstance(x, (str, os.PathLike)) for x in inputs)):
        yield from _rows_of_objects(inputs, column, keep)
        return
    sources = expand_inputs(inputs, fmt)
    READING.begin(sources)  # progress: input bytes read of the total
    # the lines of consecutive small text files, joined up to about a chunk (order kept): the
    # steps per piece after the reader (a Polars length check, Arrow tables) cost about what
    # encoding a 2 KB file does
    small: list[pl.Series] = []
    small_bytes = 0

    def joined_small() -> tuple[pl.Series, Any]:
        texts = pl.concat(small, rechunk=True) if len(small) > 1 else small[0]
        small.clear()
        return texts, pa.table({name: texts.to_arrow() for name in names})

    for src in sources:
        READING.start(src)
        if src.fmt == "text":
            names = kept_names(keep, [column], src.label)
            pieces = metered(src, iter_source(src, column, pretokenizer, max_word_chars))
            size = _small_file_size(src)
            if size is not None:
                small.extend(pieces)
                small_bytes += size
                if small_bytes >= CHUNK_BYTES and small:
                    yield joined_small()
                    small_bytes = 0
            else:
                if small:
                    yield joined_small()
                small_bytes = 0
                for texts in pieces:
                    yield texts, pa.table({name: texts.to_arrow() for name in names})
        else:
            if small:
                yield joined_small()
            small_bytes = 0
            row_bytes = None  # Arrow's default block without a pre-tokenizer (encoding)
            if pretokenizer is not None:
                row_bytes = line_bound(max_word_chars, CHUNK_BYTES) or UNBOUNDED_ROW_BYTES
            for arr, kept in _column_batches(src, column, row_bytes, keep):
                texts = _as_string_series(arr, src.label)
                _meter(src, texts)
                yield texts, kept
        READING.finish(src)
    if small:
        yield joined_small()


def _small_file_size(src: Source) -> int | None:
    """The size of a plain local file smaller than a chunk; None for any other input."""
    if src.kind != "file" or src.compression or src.uri is not None or src.byte_range:
        return None
    try:
        size = os.stat(src.path).st_size
    except OSError:
        return None  # read as any file: its reading says why it cannot be
    return size if size < CHUNK_BYTES else None


def _rows_of_objects(inputs: Any, column: str, keep: list[str] | str
                     ) -> Iterator[tuple[pl.Series, Any]]:
    """`iter_rows` for Python objects: a Polars (Lazy)DataFrame or an Arrow table (its
    columns can be kept), or any input `iter_sequences` takes (only the text column)."""
    import pyarrow as pa

    if isinstance(inputs, pl.LazyFrame):
        inputs = inputs.collect()
    if type(inputs).__module__.startswith("pyarrow"):
        inputs = pl.from_arrow(inputs)
    if not isinstance(inputs, pl.DataFrame):
        for texts in iter_sequences(inputs, column=column):
            yield texts, pa.table({name: texts.to_arrow()
                                   for name in kept_names(keep, [column], "input")})
        return
    READING.begin([])
    names = kept_names(keep, inputs.columns, "data frame")
    texts = next(iter_sequences(inputs, column=column))  # the column, checked as strings
    for start in range(0, inputs.height, 65536):
        yield (texts.slice(start, 65536),
               inputs.select(names).slice(start, 65536).to_arrow())


def _meter(src: Source, texts: pl.Series) -> None:
    """Tell `READING` about a chunk of `src` where it cannot follow a file position."""
    if src.fmt == "parquet" and src.kind == "file":  # read by offset: count the rows
        READING.read_rows(len(texts))
    elif src.kind != "file" or src.uri is not None:
        # no file position to follow (a pipe; a URI's file is no descriptor of this
        # process): count the text
        READING.read_text(int(texts.str.len_bytes().sum() or 0))


def metered(src: Source, chunks: Iterable[pl.Series]) -> Iterator[pl.Series]:
    """The chunks of `src`, told to `READING` where it cannot follow a file position."""
    for texts in chunks:
        _meter(src, texts)
        yield texts


def iter_sequences(inputs: Any, fmt: str | None = None, column: str = "text",
                   pretokenizer: PreTokenizer | None = None,
                   max_word_chars: int | None = None) -> Iterator[pl.Series]:
    """Stream the corpus as Polars string Series.

    `inputs` is a path or a list/tuple of paths, globs, directories, URIs, named pipes and
    `-` (standard input); or from Python a Polars (Lazy)DataFrame, an Arrow table, an HF
    `datasets.Dataset` / `IterableDataset` (its `column`, streamed: `dataset_texts`), or any
    other iterable (e.g. a generator) of strings. With a `pretokenizer`, text lines longer than a
    chunk are cut where it says the cut cannot change the words, and a stretch of more than
    4 x `max_word_chars` bytes without such a place is refused (see `iter_text_file`); a
    pre-tokenizer with `line_sensitive=False` gets line-aligned pieces of many lines per value
    (less memory). Without one, every line is one value, however long."""
    READING.begin([])  # progress: no total until the inputs are files
    if isinstance(inputs, pl.LazyFrame):
        names = inputs.collect_schema().names()
        if column not in names:
            raise TokcolumnarError(f"no column {column!r} in the data frame "
                                   f"(columns: {', '.join(names)})")
        inputs = inputs.select(column).collect()
    if type(inputs).__module__.startswith("pyarrow"):
        inputs = pl.from_arrow(inputs)
    if isinstance(inputs, pl.DataFrame):
        if column not in inputs.columns:
            raise TokcolumnarError(f"no column {column!r} in the data frame "
                                   f"(columns: {', '.join(inputs.columns)})")
        yield _as_string_series(inputs.get_column(column).to_arrow(), "data frame")
        return
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, (list, tuple)) and all(isinstance(x, (str, os.PathLike))
                                                 for x in inputs):
        sources = expand_inputs(inputs, fmt)
        READING.begin(sources)  # progress: input bytes read of the total
        for src in sources:
            READING.start(src)
            yield from metered(src, iter_source(src, column, pretokenizer, max_word_chars))
            READING.finish(src)
        return
    if is_dataset(inputs):
        yield from dataset_texts(inputs, column)
        return
    if not isinstance(inputs, Iterable):
        raise TokcolumnarError(f"unsupported input {type(inputs).__name__} (give paths, a data "
                               "frame, an Arrow table, a datasets.Dataset or an iterable of "
                               "strings)")
    batch: list[str] = []
    for x in inputs:
        if not isinstance(x, str):
            raise TokcolumnarError(f"expected strings in the iterator, got {type(x).__name__}")
        batch.append(x)
        if len(batch) >= 65536:
            texts = pl.Series("text", batch, dtype=pl.String)
            READING.read_text(int(texts.str.len_bytes().sum() or 0))
            yield texts
            batch = []
    if batch:
        texts = pl.Series("text", batch, dtype=pl.String)
        READING.read_text(int(texts.str.len_bytes().sum() or 0))
        yield texts


#: Rows per batch read from a Python iterable or a dataset.
ITER_BATCH_ROWS = 65536


def is_dataset(obj: Any) -> bool:
    """An HF `datasets.Dataset` or `IterableDataset`, known by its shape (iterable, with
    `column_names` and `features`) so that `datasets` need not be imported (nor installed)."""
    return (hasattr(obj, "column_names") and hasattr(obj, "features")
            and isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, dict, list)))


def dataset_texts(ds: Any, column: str) -> Iterator[pl.Series]:
    """The `column` of a `datasets.Dataset` / `IterableDataset`, streamed in batches of
    `ITER_BATCH_ROWS` rows (a dataset on disk or on the Hub is never held whole): through its
    `iter(batch_size)` in Arrow format where it has one (no Python string per row), else
    row by row (each row a dict)."""
    names = ds.column_names  # None for an IterableDataset whose features are not known
    if names is not None and column not in names:
        raise TokcolumnarError(f"no column {column!r} in the dataset (columns: "
                               f"{', '.join(names) or 'none'}); choose one with column=")
    if names is not None and hasattr(ds, "select_columns"):
        ds = ds.select_columns([column])  # (lazy: the other columns are not read)
    if hasattr(ds, "with_format"):
        ds = ds.with_format("arrow")  # batches are Arrow tables
    batches = (ds.iter(batch_size=ITER_BATCH_ROWS) if hasattr(ds, "iter")
               else _row_batches(ds, column))
    for batch in batches:
        try:
            values = batch[column]  # an Arrow table's column, or a dict's list
        except KeyError:
            raise TokcolumnarError(f"no column {column!r} in the dataset's rows; choose one "
                                   "with column=") from None
        texts = _as_string_series(values, "dataset")
        READING.read_text(int(texts.str.len_bytes().sum() or 0))
        yield texts


def _row_batches(rows: Iterable[Any], column: str) -> Iterator[dict[str, list[Any]]]:
    """Rows (dicts) as batches {column: values} of `ITER_BATCH_ROWS` rows."""
    batch: list[Any] = []
    for row in rows:
        try:
            batch.append(row[column])
        except (KeyError, TypeError):
            raise TokcolumnarError(f"no column {column!r} in the dataset's rows; choose one "
                                   "with column=") from None
        if len(batch) >= ITER_BATCH_ROWS:
            yield {column: batch}
            batch = []
    if batch:
        yield {column: batch}
