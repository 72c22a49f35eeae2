"""Dataset encoding: inputs -> a Parquet file with the text and its token ids, streamed chunk by
chunk into a temporary file that replaces the output at the end (see `outputs`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from ..corpus.readers import iter_sequences
from ..errors import TokcolumnarError
from ..outputs import PARQUET_MARKER, output_file
from ..progress import Progress
from ..tokenizer import Tokenizer


def encode_files(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                 fmt: str | None = None, column: str = "text", keep_newlines: bool = False,
                 force: bool = False, progress: bool | None = None,
                 word_ids: bool = False) -> int:
    """Encode every sequence of `inputs` into the Parquet file `out`; returns the number of
    rows written. `tokenizer` is a Tokenizer or the path of a training directory or
    tokenizer.json (loaded after the output is checked). `word_ids` adds the column of each
    token's word index (null for special tokens), e.g. for whole-word masking."""
    guarded: list[Any] = list(inputs)
    if not isinstance(tokenizer, Tokenizer):
        guarded.append(tokenizer)
    bar = Progress("encoding rows", enabled=progress)
    rows = 0
    writer = None
    with output_file(out, inputs=guarded, force=force) as tmp:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(Path(tokenizer))
        try:
            for texts in iter_sequences(inputs, fmt=fmt, column=column):
                table = encode_table(tok, texts, column, keep_newlines, word_ids)
                if writer is None:
                    schema = table.schema.with_metadata(
                        {PARQUET_MARKER: json.dumps({"kind": "encoded"})})
                    writer = pq.ParquetWriter(str(tmp), schema, compression="zstd")
                writer.write_table(table)
                rows += table.num_rows
                bar.update(rows)
            if writer is None:
                raise TokcolumnarError("the input contains no rows to encode")
        finally:
            if writer is not None:
                writer.close()
    bar.close(rows)
    return rows


def encode_table(tok: Tokenizer, texts: pl.Series, column: str = "text",
                 keep_newlines: bool = False, word_ids: bool = False) -> Any:
    """One chunk of sequences encoded: the Arrow table (column, ids[, word_ids], n_tokens) the
    output holds; a text line's ending is stripped unless `keep_newlines`, a null text is ""."""
    if not keep_newlines:
        texts = texts.str.strip_suffix("\n").str.strip_suffix("\r")
    texts = texts.fill_null("")
    enc = tok.encode_ids(texts)
    cols = {column: texts, "ids": enc.get_column("ids")}
    if word_ids:
        cols["word_ids"] = enc.get_column("word_ids")
    return pl.DataFrame(cols).with_columns(
        pl.col("ids").list.len().cast(pl.UInt32).alias("n_tokens")).to_arrow()
