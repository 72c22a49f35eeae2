"""`encode --engine ray`: the inputs' units encoded by a pool of Ray actors (the tokenizer
loaded once per actor), each unit written by its actor as `part-<unit>.parquet` into the output
directory: in name order, the files hold the rows `encode_files` writes."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pyarrow as pa

from ..corpus.units import UNIT_BYTES, Unit
from ..tokenizer import Tokenizer
from .encode_units import encode_files_with, encode_unit
from .ray import WORKER_ENV, cluster_cpus, import_ray, ray_session, share, shared


class _EncodeUnits:
    """Ray actor: the tokenizer unpickled once; each call encodes units (`encode_unit`)."""

    def __init__(self, tokenizer: list[Any], units: list[Any], out: str, column: str,
                 keep_newlines: bool) -> None:
        self.tok = pickle.loads(shared(tokenizer))
        self.units: list[Unit] = shared(units)
        self.out, self.column, self.keep_newlines = out, column, keep_newlines

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = [encode_unit(self.tok, self.units[i], self.out, self.column, self.keep_newlines)
                for i in batch.column("unit").to_pylist()]
        return pa.table({"unit": batch.column("unit"), "rows": pa.array(rows, pa.uint64())})


def encode_files_ray(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                     fmt: str | None = None, column: str = "text", keep_newlines: bool = False,
                     force: bool = False, progress: bool | None = None,
                     unit_bytes: int = UNIT_BYTES) -> int:
    """`encode_files` on Ray (`encode_files_with`): `out` is a directory of part files."""
    import_ray()  # before any work: a missing Ray is the first thing to say

    def run(tok: Tokenizer, units: list[Unit], tmp: str, column: str,
            keep_newlines: bool) -> int:
        with ray_session(progress=progress) as ray:
            ds = ray.data.from_items([{"unit": u.index} for u in units],
                                     override_num_blocks=len(units))
            # at most one actor per CPU, at least one: a pool holding every CPU from the start
            # can leave none for the tasks feeding it, and the job hangs
            pool = ray.data.ActorPoolStrategy(min_size=1, max_size=cluster_cpus(ray))
            done = ds.map_batches(
                _EncodeUnits, batch_size=1, batch_format="pyarrow", compute=pool,
                fn_constructor_kwargs={"tokenizer": share(ray, pickle.dumps(tok)),
                                       "units": share(ray, units), "out": tmp,
                                       "column": column, "keep_newlines": keep_newlines},
                runtime_env={"env_vars": WORKER_ENV})
            return sum(int(t.column("rows").to_numpy().sum())
                       for t in ray.get(done.to_arrow_refs()))

    return encode_files_with(run, "ray", tokenizer, inputs, out, fmt, column, keep_newlines,
                             force, unit_bytes)
