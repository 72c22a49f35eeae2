"""Dataset encoding: inputs -> a Parquet file with the text and its token ids, streamed chunk by
chunk into a temporary file that is renamed into place at the end."""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow.parquet as pq

from .atomic import atomic_path
from .corpus import iter_sequences
from .progress import Progress


def encode_files(tok: Any, inputs: list[str], out: str, fmt: str | None = None,
                 column: str = "text", keep_newlines: bool = False,
                 progress: bool | None = None) -> int:
    """Encode every sequence of `inputs`; returns the number of rows written."""
    bar = Progress("encoding rows", enabled=progress)
    rows = 0
    writer = None
    with atomic_path(out) as tmp:
        try:
            for texts in iter_sequences(inputs, fmt=fmt, column=column):
                if not keep_newlines:
                    texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
                texts = texts.fill_null("")
                enc = tok.encode_ids(texts)
                table = pl.DataFrame({column: texts, "ids": enc.get_column("ids")}).with_columns(
                    pl.col("ids").list.len().cast(pl.UInt32).alias("n_tokens")).to_arrow()
                if writer is None:
                    writer = pq.ParquetWriter(str(tmp), table.schema, compression="zstd")
                writer.write_table(table)
                rows += table.num_rows
                bar.update(rows)
            if writer is None:
                from .errors import TokcolumnarError

                raise TokcolumnarError("the input contains no rows to encode")
        finally:
            if writer is not None:
                writer.close()
    bar.close(rows)
    return rows
