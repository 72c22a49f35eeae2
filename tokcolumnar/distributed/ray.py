"""Counting and encoding on Ray Data (`--engine ray`, extra `tokcolumnar[ray]`); the only
module that imports Ray, when a run uses it (`ray_encode` encodes files with it).

Files: the driver cuts the inputs into ordered units (`units.plan_units`); each Ray task reads
its unit with tokcolumnar's own reader (Ray's readers cut and decode text differently: they drop
line endings and split at Unicode line breaks) and counts it (`units.count_unit`); the partial
tables are summed in Ray, hash-partitioned by word (sentinels in a partition of their own); the
driver computes `first_seen` (`units.finish_count`). The words table is the single-machine one,
`first_seen` included. The merge loop then runs on the driver (`PolarsEngine.train`).

A `ray.data.Dataset`: every batch is counted with a random id; the partial tables are
materialised once, the batches' sentinels read back in the dataset's order give each batch its
rank, which becomes the unit number of its keys. `first_seen` is then the position in the
dataset's order (`preserve_order`).

Ray workers run one task per CPU; Polars in each is limited to one thread
(`POLARS_MAX_THREADS=1`) so that the two do not fight over the cores."""

from __future__ import annotations

import os
import pickle
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl
import pyarrow as pa

from ..config import TrainConfig
from ..corpus.readers import iter_sequences
from ..corpus.units import (
    UNIT_BYTES,
    UNIT_SHIFT,
    Unit,
    count_unit,
    finish_count,
    partial_table,
    sum_partials,
    worker_units,
)
from ..errors import TokcolumnarError
from ..progress import StageTimer
from ..training.polars_engine import PolarsEngine

RAY_MISSING = "needs Ray: pip install 'tokcolumnar[ray]'"
#: Ray's settings for a quiet, offline local run (a user's own values win): no usage report,
#: Ray Data's notices off (the errors reach us as exceptions).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DATA_LOG_LEVEL": "ERROR"}
#: Each worker's environment: one Polars thread per Ray task (a task per CPU).
WORKER_ENV = {"POLARS_MAX_THREADS": "1"}
#: Rows of a user's dataset counted or encoded at once.
BATCH_ROWS = 65536


def import_ray(what: str = "--engine ray") -> Any:
    """The `ray` module (with `ray.data`), or the one-line error saying how to install it."""
    for name, value in RAY_ENV.items():
        os.environ.setdefault(name, value)
    try:
        import ray
        import ray.data  # noqa: F401 - the Dataset API, imported with ray
    except ImportError:
        raise TokcolumnarError(f"{what} {RAY_MISSING}") from None
    return ray


def is_ray_dataset(x: Any) -> bool:
    """A `ray.data.Dataset` (checked without importing Ray)."""
    return type(x).__module__.startswith("ray.data")


@contextmanager
def ray_session(address: str | None = None, progress: bool | None = None) -> Iterator[Any]:
    """Ray, ready: the session already started in this process (a Python user's `ray.init`,
    left running), else one started here and shut down at the end — connected to `address`
    (or `$RAY_ADDRESS`), or a new local Ray on this machine's CPUs (never another user's local
    cluster). Ray Data's own progress bars show unless `progress` is False; outputs keep the
    inputs' order."""
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or "local"
        local = {"include_dashboard": False} if address == "local" else {}
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", **local)
        except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError...
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise TokcolumnarError(f"cannot start Ray at {address}: {msg}") from None
        started = True
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.enable_progress_bars, ctx.print_on_execution_start,
             ctx.execution_options.preserve_order, ctx.raise_original_map_exception)
    ctx.enable_progress_bars = progress is not False
    ctx.print_on_execution_start = False
    ctx.execution_options.preserve_order = True
    # a worker's TokcolumnarError reaches the driver as itself (with Ray's wrapper around it),
    # not as Ray Data's UserCodeException, which keeps only the traceback's text
    ctx.raise_original_map_exception = True
    try:
        yield ray
    except Exception as e:
        # a worker's TokcolumnarError (bad input) arrives wrapped in Ray's task errors
        cause = _tokcolumnar_cause(e)
        if cause is None:
            raise
        # Ray Data appends its retry notes to the message: keep our one line
        raise type(cause)(str(cause).split("\n", 1)[0]) from None
    finally:
        (ctx.enable_progress_bars, ctx.print_on_execution_start,
         ctx.execution_options.preserve_order, ctx.raise_original_map_exception) = saved
        if started:
            ray.shutdown()


def _tokcolumnar_cause(e: BaseException) -> TokcolumnarError | None:
    """The TokcolumnarError a worker raised, from the chain of Ray's errors wrapping it."""
    seen: set[int] = set()
    stack: list[Any] = [e]
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, TokcolumnarError) and not type(x).__module__.startswith("ray"):
            return x  # the worker's own error, not Ray's wrapper class deriving from it
        stack.extend([getattr(x, "cause", None), x.__cause__, x.__context__])
    return None


def share(ray: Any, value: Any) -> list[Any]:
    """`value` in Ray's object store, as the argument of an actor's constructor (`shared`):
    a reference in a list, so that the actor's arguments stay small (Ray warns when an
    actor that may restart has large ones) and the actor fetches the value once."""
    return [ray.put(value)]


def shared(ref: list[Any]) -> Any:
    """The value `share` stored (inside a Ray actor)."""
    return import_ray().get(ref[0])


def cluster_cpus(ray: Any) -> int:
    """The CPUs of the Ray cluster (of this machine before Ray starts)."""
    if not ray.is_initialized():
        return os.cpu_count() or 1
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


# -- counting ------------------------------------------------------------------------------------

def _with_partition(partial: pl.DataFrame, parts: int) -> pa.Table:
    """A partial table with its hash partition: a word's partition comes from its hash (the
    same on every worker of one Polars version), the sentinels go to partition `parts`."""
    return partial.with_columns(
        pl.when(pl.col("word").is_null()).then(pl.lit(parts, pl.UInt32))
        .otherwise((pl.col("word").hash() % parts).cast(pl.UInt32)).alias("part")).to_arrow()


def _count_units(batch: pa.Table, units: list[Unit], cfg: TrainConfig, parts: int) -> pa.Table:
    """Ray task: the partial tables of the units whose numbers the batch holds."""
    return pa.concat_tables([_with_partition(count_unit(units[i], cfg), parts)
                             for i in batch.column("unit").to_pylist()])


def _sum_partition(partials: pa.Table) -> pa.Table:
    """Ray task: one hash partition's partial tables summed."""
    return sum_partials(pl.from_arrow(partials).drop("part")).to_arrow()


def _count_batch(batch: pa.Table, cfg: TrainConfig) -> pa.Table:
    """Ray task: a user's batch counted as unit 0, tagged with a random batch id (ranked
    later in the dataset's order)."""
    if cfg.column in batch.column_names:
        batch = batch.select([cfg.column])
    partial = partial_table(iter_sequences(batch, column=cfg.column), cfg, 0)
    return partial.with_columns(pl.lit(secrets.randbits(63), pl.UInt64).alias("batch")
                                ).to_arrow()


def _sentinels(partials: pa.Table) -> pa.Table:
    """Ray task: the batch ids of the partial tables, one row per batch."""
    return pl.from_arrow(partials).filter(pl.col("word").is_null()).select("batch").to_arrow()


def _rank_batches(partials: pa.Table, ranks: dict[int, int], parts: int) -> pa.Table:
    """Ray task: keys moved to the batch's rank in the dataset (its unit number)."""
    df = pl.from_arrow(partials)
    rank = df.get_column("batch").replace_strict(ranks, return_dtype=pl.UInt64)
    return _with_partition(df.select("word", "count", (pl.col("key") + (rank * (1 << UNIT_SHIFT))
                                                       ).alias("key")), parts)


def _sum_to_driver(ray: Any, partials: Any, parts: int) -> pl.DataFrame:
    """Sum the partial tables in Ray, one task per hash partition; the sums on the driver."""
    summed = partials.groupby("part", num_partitions=parts + 1).map_groups(
        _sum_partition, batch_format="pyarrow", runtime_env={"env_vars": WORKER_ENV})
    tables = ray.get(summed.to_arrow_refs())
    return pl.from_arrow(pa.concat_tables(tables)) if tables else pl.DataFrame(
        schema={"word": pl.String, "count": pl.UInt64, "key": pl.UInt64})


def count_words_ray(inputs: Any, cfg: TrainConfig, unit_bytes: int = UNIT_BYTES
                    ) -> pl.DataFrame:
    """The words table (word, count, first_seen) of files or of a `ray.data.Dataset`, counted
    on Ray: the single-machine table (see the module docstring)."""
    import_ray()  # before any work: a missing Ray is the first thing to say
    if is_ray_dataset(inputs):
        return _count_dataset(inputs, cfg)
    units = worker_units(inputs, cfg.format, unit_bytes, "ray")
    with ray_session(progress=cfg.show_progress) as ray:
        parts = 2 * cluster_cpus(ray)
        ds = ray.data.from_items([{"unit": u.index} for u in units],
                                 override_num_blocks=len(units))
        partials = ds.map_batches(_count_units, batch_size=1, batch_format="pyarrow",
                                  fn_kwargs={"units": units, "cfg": cfg, "parts": parts},
                                  runtime_env={"env_vars": WORKER_ENV})
        summed = _sum_to_driver(ray, partials, parts)
    return finish_count(summed, len(units), cfg.max_word_chars)


def _count_dataset(ds: Any, cfg: TrainConfig) -> pl.DataFrame:
    with ray_session(progress=cfg.show_progress) as ray:
        options = ds.context.execution_options
        saved = options.preserve_order, ds.context.raise_original_map_exception
        options.preserve_order = ds.context.raise_original_map_exception = True
        try:
            partials = ds.map_batches(_count_batch, batch_size=BATCH_ROWS,
                                      batch_format="pyarrow", fn_kwargs={"cfg": cfg},
                                      runtime_env={"env_vars": WORKER_ENV}).materialize()
            ids = pl.from_arrow(pa.concat_tables(ray.get(partials.map_batches(
                _sentinels, batch_format="pyarrow").to_arrow_refs()))).get_column("batch")
            if ids.n_unique() != len(ids):
                raise RuntimeError("two batches drew the same random id")
            parts = 2 * cluster_cpus(ray)
            ranked = partials.map_batches(
                _rank_batches, batch_format="pyarrow",
                fn_kwargs={"ranks": dict(zip(ids.to_list(), range(len(ids)))), "parts": parts})
            summed = _sum_to_driver(ray, ranked, parts)
        finally:
            options.preserve_order, ds.context.raise_original_map_exception = saved
    return finish_count(summed, len(ids), cfg.max_word_chars)


class RayEngine(PolarsEngine):
    """`--engine ray`: words counted on Ray (`count_words_ray`); the merge loop, which needs
    the whole words table, is the Polars engine's, on the driver."""

    name = "ray"
    counts_in_units = False  # counted on Ray, whatever the inputs

    def check_memory(self, words: pl.DataFrame, memory_limit: int, disk: bool,
                     vocab_size: int | None = None) -> None:
        """Not checked (as before the engines made this call: only Polars engine runs were)."""
        return None

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame:
        """The words table, counted on the workers (`timer`: unused, the segmenter's share is
        spent there)."""
        return count_words_ray(inputs, cfg)


# -- encoding ------------------------------------------------------------------------------------

class _EncodeColumn:
    """Ray actor: a user's batches with the token ids of their text column appended."""

    def __init__(self, tokenizer: list[Any], column: str) -> None:
        self.tok = pickle.loads(shared(tokenizer))
        self.column = column

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = next(iter_sequences(batch.select([self.column]), column=self.column))
        ids = self.tok.encode_ids(texts.fill_null("")).get_column("ids")
        return batch.append_column("ids", ids.to_arrow())


def encode_dataset(tok: Any, ds: Any, column: str = "text") -> Any:
    """`ds` with an `ids` column (list<uint32>): the token ids of `column`, a null text
    encoded as "" (lazy, like every Ray Dataset: runs when consumed)."""
    ray = import_ray("Tokenizer.encode_ray")
    if not is_ray_dataset(ds):
        raise TokcolumnarError(f"encode_ray expects a ray.data.Dataset, got {type(ds).__name__}")
    if column not in ds.columns():
        raise TokcolumnarError(f"no column {column!r} in the dataset (columns: "
                               f"{', '.join(ds.columns())})")
    pool = ray.data.ActorPoolStrategy(min_size=1, max_size=cluster_cpus(ray))
    return ds.map_batches(_EncodeColumn, batch_size=BATCH_ROWS, batch_format="pyarrow",
                          compute=pool, runtime_env={"env_vars": WORKER_ENV},
                          fn_constructor_kwargs={"tokenizer": share(ray, pickle.dumps(tok)),
                                                 "column": column})
