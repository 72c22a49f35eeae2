"""Encoding in ordered units, for engines that encode on many workers (`ray_encode`, `spark`):
each worker encodes its units as `encode_files` encodes, and writes each as
`part-<unit>.parquet` into the output directory, so that the files in name order hold the rows
of the single-machine output (text, ids list<uint32>, n_tokens). No engine is imported here."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..corpus.units import UNIT_BYTES, Unit, unit_chunks, worker_units
from ..encode.dataset import encode_table
from ..errors import TokcolumnarError
from ..outputs import PARQUET_MARKER, PARTS_LAYOUT, output_dir
from ..tokenizer import Tokenizer

#: An engine's run: (tokenizer, units, output directory, column, keep_newlines) -> rows.
EngineRun = Callable[[Tokenizer, list[Unit], str, str, bool], int]


def encode_unit(tok: Tokenizer, unit: Unit, out: str, column: str, keep_newlines: bool) -> int:
    """Encode one unit into `out/part-<unit>.parquet` (no file when it has no rows); returns
    the number of rows."""
    writer, rows = None, 0
    path = Path(out) / f"part-{unit.index:06d}.parquet"
    try:
        for texts in unit_chunks(unit, column):
            table = encode_table(tok, texts, column, keep_newlines)
            if writer is None:
                schema = table.schema.with_metadata({PARQUET_MARKER: '{"kind": "encoded"}'})
                writer = pq.ParquetWriter(str(path), schema, compression="zstd")
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    return rows


def encode_files_with(run: EngineRun, engine: str, tokenizer: Tokenizer | str | os.PathLike,
                      inputs: list[str], out: str, fmt: str | None = None,
                      column: str = "text", keep_newlines: bool = False, force: bool = False,
                      unit_bytes: int = UNIT_BYTES) -> int:
    """`encode_files` on an engine: the output `out` is a directory of `part-NNNNNN.parquet`
    files (checked and replaced atomically as `encode_files` does with its file); returns the
    number of rows. Workers write into the output directory, so on a cluster it must be on
    storage they all see."""
    guarded: list[Any] = list(inputs)
    if not isinstance(tokenizer, Tokenizer):
        guarded.append(tokenizer)
    with output_dir(out, inputs=guarded, force=force, layout=PARTS_LAYOUT) as tmp:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(Path(tokenizer))
        units = worker_units(inputs, fmt, unit_bytes, engine)
        rows = run(tok, units, str(tmp), column, keep_newlines)
        if rows == 0:
            raise TokcolumnarError("the input contains no rows to encode")
    return rows
