"""Corpus reading: inputs -> a stream of Polars string Series (one value per sequence, or per
chunk of lines when the pre-tokenizer does not care about line boundaries).

Text files are read in binary chunks cut at line ends, so memory stays near one chunk whatever
the corpus size. Each line keeps its line ending, as HF `Tokenizer.train(files)` does."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from .errors import TokcolumnarError

CHUNK_BYTES = 1 << 20
PIECE_CHARS = 64 << 10
FORMATS = ("text", "parquet", "jsonl", "csv")
_COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2"}
_EXT_FORMAT = {".txt": "text", ".text": "text", ".parquet": "parquet", ".pq": "parquet",
               ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
               ".tsv": "csv"}


@dataclass(frozen=True)
class Source:
    """One input file with its detected format and compression."""

    path: Path
    fmt: str
    compression: str | None


def expand_inputs(inputs: Iterable[str | os.PathLike], fmt: str | None = None) -> list[Source]:
    """Resolve files, directories (recursively) and globs into an ordered list of sources."""
    files: list[Path] = []
    for item in inputs:
        s = str(item)
        p = Path(s)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
            if not found:
                raise TokcolumnarError(f"directory {s} contains no files")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        elif any(ch in s for ch in "*?["):
            found = sorted(Path(x) for x in glob.glob(s, recursive=True) if Path(x).is_file())
            if not found:
                raise TokcolumnarError(f"no files match {s}")
            files.extend(found)
        else:
            raise TokcolumnarError(f"input not found: {s}")
    if not files:
        raise TokcolumnarError("no input files given")
    return [_detect(f, fmt) for f in files]


def _detect(path: Path, fmt: str | None) -> Source:
    suffixes = [s.lower() for s in path.suffixes]
    compression = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    if fmt is None:
        fmt = _EXT_FORMAT.get(suffixes[-1], "text") if suffixes else "text"
    if fmt not in FORMATS:
        raise TokcolumnarError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    return Source(path, fmt, compression)


def _open_binary(src: Source, arrow: bool = False) -> Any:
    """A binary stream of the decompressed file (plain Python files for text and gzip, so the
    text path never imports pyarrow; Arrow streams for zstd/bz2 and Arrow readers)."""
    try:
        if not arrow and src.compression in (None, "gzip"):
            if src.compression == "gzip":
                import gzip

                return gzip.open(src.path, "rb")
            return open(src.path, "rb")
        import pyarrow as pa

        if src.compression:
            return pa.CompressedInputStream(pa.OSFile(str(src.path)), src.compression)
        return pa.OSFile(str(src.path))
    except Exception as e:  # noqa: BLE001 - OSError or ArrowException
        raise TokcolumnarError(f"cannot open {src.path}: {e}") from None


def _decode(data: bytes, src: Source, offset: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise TokcolumnarError(
            f"{src.path}: invalid UTF-8 at byte {offset + e.start} (line {line} of the chunk "
            f"starting at byte {offset})") from None


def iter_text_file(src: Source, chunk_bytes: int | None = None) -> Iterator[str]:
    """Yield decoded chunks of whole lines (line endings kept) from a text file."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    stream = _open_binary(src)
    pending = b""
    offset = 0
    try:
        while True:
            try:
                block = stream.read(chunk_bytes)
            except (OSError, EOFError) as e:
                raise TokcolumnarError(f"cannot read {src.path}: {e}") from None
            except Exception as e:  # noqa: BLE001 - ArrowException from a corrupt stream
                raise TokcolumnarError(f"cannot read {src.path}: {e}") from None
            if not block:
                break
            data = pending + block
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                pending = data
                continue
            yield _decode(data[:cut], src, offset)
            offset += cut
            pending = data[cut:]
        if pending:
            yield _decode(pending, src, offset)
    finally:
        stream.close()


def _column_batches(src: Source, column: str) -> Iterator[Any]:
    """Yield Arrow arrays of the text column from a Parquet, JSONL or CSV file, streamed."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    def check(names: list[str]) -> None:
        if column not in names:
            raise TokcolumnarError(f"{src.path}: no column {column!r} (columns: "
                                   f"{', '.join(names) or 'none'}); choose one with --column")

    try:
        if src.fmt == "parquet":
            source = _open_binary(src, arrow=True) if src.compression else str(src.path)
            pf = pq.ParquetFile(source)
            check(pf.schema_arrow.names)
            for batch in pf.iter_batches(columns=[column], batch_size=65536):
                yield batch.column(0)
        elif src.fmt == "csv":
            parse = pcsv.ParseOptions(delimiter="\t" if ".tsv" in src.path.name else ",",
                                      newlines_in_values=True)
            reader = pcsv.open_csv(_open_binary(src, arrow=True), parse_options=parse,
                                   convert_options=pcsv.ConvertOptions(
                                       column_types={column: pa.large_string()}))
            check(reader.schema.names)
            for batch in reader:
                yield batch.column(reader.schema.get_field_index(column))
        else:
            reader = pjson.open_json(_open_binary(src, arrow=True))
            check(reader.schema.names)
            for batch in reader:
                yield batch.column(reader.schema.get_field_index(column))
    except TokcolumnarError:
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokcolumnarError(f"cannot read {src.path} as {src.fmt}: {msg}") from None


def _as_string_series(arr: Any, where: str) -> pl.Series:
    s = pl.Series("text", arr)
    if s.dtype != pl.String:
        if s.dtype == pl.Null:
            return s.cast(pl.String)
        raise TokcolumnarError(f"{where}: text column has type {s.dtype}, expected strings")
    return s


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


def iter_sequences(inputs: Any, fmt: str | None = None, column: str = "text",
                   split_lines: bool = True) -> Iterator[pl.Series]:
    """Stream the corpus as Polars string Series.

    `inputs` is a path or a list/tuple of paths, globs and directories; or from Python a Polars
    (Lazy)DataFrame, an Arrow table, or any other iterable (e.g. a generator) of strings.
    With `split_lines=False` text files come as line-aligned pieces of many lines per value
    (less memory, for pre-tokenizers that drop whitespace, where lines cannot change the
    words)."""
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
        for src in expand_inputs(inputs, fmt):
            if src.fmt == "text":
                for chunk in iter_text_file(src):
                    if split_lines:
                        s = pl.Series("text", [chunk], dtype=pl.String)
                        yield s.str.split("\n", inclusive=True).explode()
                    else:
                        yield pl.Series("text", line_aligned_pieces(chunk), dtype=pl.String)
            else:
                for arr in _column_batches(src, column):
                    yield _as_string_series(arr, str(src.path))
        return
    if not isinstance(inputs, Iterable):
        raise TokcolumnarError(f"unsupported input {type(inputs).__name__} (give paths, a data "
                               "frame, an Arrow table or an iterable of strings)")
    batch: list[str] = []
    for x in inputs:
        if not isinstance(x, str):
            raise TokcolumnarError(f"expected strings in the iterator, got {type(x).__name__}")
        batch.append(x)
        if len(batch) >= 65536:
            yield pl.Series("text", batch, dtype=pl.String)
            batch = []
    if batch:
        yield pl.Series("text", batch, dtype=pl.String)
