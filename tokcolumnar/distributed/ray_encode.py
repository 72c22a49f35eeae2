"""`encode --engine ray`: the inputs' units encoded by a pool of Ray actors (the tokenizer
loaded once per actor), each unit written by its actor as `part-<unit>.parquet` into the output
directory: in name order, the files hold the rows `encode_files` writes."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..corpus.readers import iter_source
from ..encode.dataset import encode_table
from ..errors import TokcolumnarError
from ..outputs import PARQUET_MARKER, output_dir
from ..tokenizer import Tokenizer
from .ray import WORKER_ENV, cluster_cpus, import_ray, ray_session, share, shared
from .units import UNIT_BYTES, Unit, worker_units


class _EncodeUnits:
    """Ray actor: the tokenizer unpickled once; each call encodes units into
    `part-<unit>.parquet` files of the output directory, as `encode_files` encodes."""

    def __init__(self, tokenizer: list[Any], units: list[Any], out: str, column: str,
                 keep_newlines: bool) -> None:
        self.tok = pickle.loads(shared(tokenizer))
        self.units: list[Unit] = shared(units)
        self.out, self.column, self.keep_newlines = out, column, keep_newlines

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = []
        for i in batch.column("unit").to_pylist():
            rows.append(self._encode(self.units[i]))
        return pa.table({"unit": batch.column("unit"), "rows": pa.array(rows, pa.uint64())})

    def _encode(self, unit: Unit) -> int:
        writer, rows = None, 0
        path = Path(self.out) / f"part-{unit.index:06d}.parquet"
        try:
            for texts in iter_source(unit.source, self.column):
                table = encode_table(self.tok, texts, self.column, self.keep_newlines)
                if writer is None:
                    schema = table.schema.with_metadata(
                        {PARQUET_MARKER: '{"kind": "encoded"}'})
                    writer = pq.ParquetWriter(str(path), schema, compression="zstd")
                writer.write_table(table)
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
        return rows


def encode_files_ray(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                     fmt: str | None = None, column: str = "text", keep_newlines: bool = False,
                     force: bool = False, progress: bool | None = None,
                     unit_bytes: int = UNIT_BYTES) -> int:
    """`encode_files` on Ray: the output `out` is a directory of `part-NNNNNN.parquet` files,
    one per unit with rows, which in name order hold `encode_files`' rows; returns the number of
    rows. Workers write into the output directory, so on a cluster it must be on storage they
    all see."""
    import_ray()  # before any work: a missing Ray is the first thing to say
    guarded: list[Any] = list(inputs)
    if not isinstance(tokenizer, Tokenizer):
        guarded.append(tokenizer)
    with output_dir(out, inputs=guarded, force=force) as tmp:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.load(Path(tokenizer))
        units = worker_units(inputs, fmt, unit_bytes, "ray")
        with ray_session(progress=progress) as ray:
            ds = ray.data.from_items([{"unit": u.index} for u in units],
                                     override_num_blocks=len(units))
            # at most one actor per CPU, at least one: a pool holding every CPU from the start
            # can leave none for the tasks feeding it, and the job hangs
            pool = ray.data.ActorPoolStrategy(min_size=1, max_size=cluster_cpus(ray))
            done = ds.map_batches(
                _EncodeUnits, batch_size=1, batch_format="pyarrow", compute=pool,
                fn_constructor_kwargs={"tokenizer": share(ray, pickle.dumps(tok)),
                                       "units": share(ray, units),
                                       "out": str(tmp), "column": column,
                                       "keep_newlines": keep_newlines},
                runtime_env={"env_vars": WORKER_ENV})
            rows = sum(int(t.column("rows").to_numpy().sum())
                       for t in ray.get(done.to_arrow_refs()))
        if rows == 0:
            raise TokcolumnarError("the input contains no rows to encode")
    return rows
