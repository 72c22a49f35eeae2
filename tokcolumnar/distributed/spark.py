"""Counting and encoding on Spark (`--engine spark`, extra `tokcolumnar[spark]`); the only
module that imports PySpark, when a run uses it.

As on Ray (`distributed.ray`): the driver cuts the inputs into ordered units
(`units.worker_units`); a Spark partition per unit reads and counts it with tokcolumnar's own
reader (`mapInArrow`, `units.count_unit`); Spark's JVM sums the partial tables
(`groupBy(word, sentinel unit).agg(sum, min)`); the driver computes `first_seen`
(`units.finish_count`). The words table is the single-machine one, `first_seen` included. The
merge loop runs on the driver (`PolarsEngine.train`).

A Spark DataFrame (`count_words(df, column=...)`, `train(df, ...)`): each partition counts its
rows of the text column (`mapInArrow`, `units.partial_table`) as unit number
`TaskContext.partitionId()`, so that `first_seen` is the position in partition order, then row
order within a partition (the DataFrame's order for `spark.read.text` / `.parquet` and
`createDataFrame`; after a shuffle, whatever order the shuffle left). The partial tables are
summed as for files.

Encoding: a Spark partition per unit encodes it and writes `part-<unit>.parquet` itself
(`encode_units`), so the output is the Ray engine's: the single-machine rows in name order, ids
as list<uint32>.

Spark has no unsigned types: counts and keys travel as `long` (int64: below 2**63)."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Iterator
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
    worker_units,
)
from ..errors import TokcolumnarError
from ..progress import StageTimer
from ..tokenizer import Tokenizer
from ..training.polars_engine import PolarsEngine
from .encode_units import encode_files_with, encode_unit

SPARK_MISSING = "needs Spark: pip install 'tokcolumnar[spark]' (and Java 17 or later)"
#: A partial table in Spark: the sentinels' word is "" with `sunit` = their unit (a word's
#: `sunit` is -1), so that the group-by keeps every sentinel apart from the words.
PARTIAL_DDL = "word string, count long, key long, sunit long"


def import_spark() -> Any:
    """`pyspark.sql`, or the one-line error saying how to install it."""
    try:
        import pyspark.sql
    except ImportError:
        raise TokcolumnarError(f"--engine spark {SPARK_MISSING}") from None
    return pyspark.sql


@contextmanager
def spark_session(progress: bool | None = None) -> Iterator[Any]:
    """The active Spark session (a caller's, left running), else one started here and stopped
    at the end: on `$SPARK_MASTER`; under `spark-submit`, on its `--master`; else `local[*]`."""
    sql = import_spark()
    spark = sql.SparkSession.getActiveSession()
    started = spark is None
    if started:
        # the workers run this Python (and its packages), not `python3` from PATH
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = sql.SparkSession.builder
        if "SPARK_MASTER" in os.environ or "PYSPARK_GATEWAY_PORT" not in os.environ:
            # (spark-submit starts the JVM first and tells Python its port: its master stays)
            builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
        try:
            spark = (builder
                     .appName("tokcolumnar")
                     .config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", str(progress is not False).lower())
                     .config("spark.executorEnv.POLARS_MAX_THREADS", "1")
                     .getOrCreate())
        except Exception as e:  # noqa: BLE001 - PySparkRuntimeError and friends
            if "JAVA_GATEWAY_EXITED" in str(e):
                raise TokcolumnarError("Spark could not start Java (install a JDK 17 or later, "
                                       "or set JAVA_HOME)") from None
            raise
        spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    except Exception as e:
        message = _worker_error(e)
        if message is None:
            raise
        raise TokcolumnarError(message) from None
    finally:
        if started:
            spark.stop()


def _worker_error(e: BaseException) -> str | None:
    """The message of a TokcolumnarError a Spark worker raised: Spark hands the driver only
    the worker's traceback as text, whose line `tokcolumnar.errors.TokcolumnarError: ...`
    holds it."""
    marker = "tokcolumnar.errors.Tokcolumnar"
    for line in str(e).splitlines():
        if line.startswith(marker) and ": " in line:
            return line.split(": ", 1)[1]
    return None


def is_spark_dataframe(x: Any) -> bool:
    """A PySpark DataFrame (classic or Spark Connect; checked without importing PySpark)."""
    return type(x).__module__.startswith("pyspark.sql") and type(x).__name__ == "DataFrame"


def _spark_partial(partial: pl.DataFrame) -> list[Any]:
    """A partial table as Spark's rows (`PARTIAL_DDL`): Arrow batches."""
    return partial.with_columns(
        pl.when(pl.col("word").is_null()).then(pl.col("key") // (1 << UNIT_SHIFT))
        .otherwise(-1).cast(pl.Int64).alias("sunit"),
        pl.col("word").fill_null(""), pl.col("count").cast(pl.Int64),
        pl.col("key").cast(pl.Int64)).to_arrow().to_batches()


def _count_partitions(units: list[Unit], cfg: TrainConfig) -> Callable[[Any], Iterator[Any]]:
    """The `mapInArrow` function: each input row is a unit number; its partial table out."""
    def count(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from _spark_partial(count_unit(units[index], cfg))
    return count


def _count_rows(cfg: TrainConfig) -> Callable[[Any], Iterator[Any]]:
    """The `mapInArrow` function of a DataFrame's text column: the partition's rows counted
    as one unit, numbered by the partition."""
    def count(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        unit = TaskContext.get().partitionId()
        # the batches' texts in row order, as the single-machine reader gives a table's
        chunks = (texts for batch in batches for texts in iter_sequences(
            pa.Table.from_batches([batch]), column=cfg.column))
        yield from _spark_partial(partial_table(chunks, cfg, unit))
    return count


def _summed(partials: Any) -> pl.DataFrame:
    """The partial tables (a Spark DataFrame of `PARTIAL_DDL`) summed in Spark's JVM, on the
    driver as `units.sum_partials` gives them."""
    functions = import_spark().functions
    summed = (partials.groupBy("word", "sunit")
              .agg(functions.sum("count").alias("count"), functions.min("key").alias("key"))
              .toArrow())
    return pl.from_arrow(summed).select(
        pl.when(pl.col("sunit") >= 0).then(None).otherwise(pl.col("word")).alias("word"),
        pl.col("count").cast(pl.UInt64), pl.col("key").cast(pl.UInt64))


def count_words_spark(inputs: Any, cfg: TrainConfig, unit_bytes: int = UNIT_BYTES
                      ) -> pl.DataFrame:
    """The words table (word, count, first_seen) of files or of a Spark DataFrame's text
    column, counted on Spark: the single-machine table (see the module docstring)."""
    import_spark()  # before any work: a missing Spark is the first thing to say
    if is_spark_dataframe(inputs):
        return _count_dataframe(inputs, cfg)
    units = worker_units(inputs, cfg.format, unit_bytes, "spark")
    with spark_session(cfg.show_progress) as spark:
        table = _summed(spark.range(0, len(units), 1, len(units))
                        .mapInArrow(_count_partitions(units, cfg), PARTIAL_DDL))
    return finish_count(table, len(units), cfg.max_word_chars)


def _count_dataframe(df: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The words table of a DataFrame's text column (`cfg.column`), a partition per unit."""
    types = import_spark().types
    if cfg.column not in df.columns:
        raise TokcolumnarError(f"no column {cfg.column!r} in the data frame (columns: "
                               f"{', '.join(df.columns)})")
    kind = df.schema[cfg.column].dataType
    if not isinstance(kind, (types.StringType, types.NullType)):
        raise TokcolumnarError(f"data frame: text column has type {kind.simpleString()}, "
                               "expected strings")
    with spark_session(cfg.show_progress):
        column = df.select(cfg.column)
        partitions = column.rdd.getNumPartitions()
        table = _summed(column.mapInArrow(_count_rows(cfg), PARTIAL_DDL))
    return finish_count(table, partitions, cfg.max_word_chars)


class SparkEngine(PolarsEngine):
    """`--engine spark`: words counted on Spark (`count_words_spark`); the merge loop on the
    driver, as the Polars engine runs it."""

    name = "spark"
    counts_in_units = False  # counted on Spark, whatever the inputs

    def check_memory(self, words: pl.DataFrame, memory_limit: int, disk: bool,
                     vocab_size: int | None = None) -> None:
        """Not checked (as before the engines made this call: only Polars engine runs were)."""
        return None

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame:
        """The words table, counted on the workers (`timer`: unused, the segmenter's share is
        spent there)."""
        return count_words_spark(inputs, cfg)


def _encode_partitions(tokenizer: bytes, units: list[Unit], out: str, column: str,
                       keep_newlines: bool) -> Callable[[Any], Iterator[Any]]:
    """The `mapInArrow` function: each input row is a unit number, encoded into its file; one
    row (unit, rows) out per unit."""
    def encode(batches: Iterator[Any]) -> Iterator[Any]:
        tok = pickle.loads(tokenizer)  # once per partition
        for batch in batches:
            index = batch.column(0).to_pylist()
            rows = [encode_unit(tok, units[i], out, column, keep_newlines) for i in index]
            yield pa.RecordBatch.from_pydict({"unit": pa.array(index, pa.int64()),
                                              "rows": pa.array(rows, pa.int64())})
    return encode


def encode_files_spark(tokenizer: Tokenizer | str | os.PathLike, inputs: list[str], out: str,
                       fmt: str | None = None, column: str = "text",
                       keep_newlines: bool = False, force: bool = False,
                       progress: bool | None = None, unit_bytes: int = UNIT_BYTES) -> int:
    """`encode_files` on Spark (`encode_files_with`): `out` is a directory of part files."""
    import_spark()  # before any work: a missing Spark is the first thing to say

    def run(tok: Tokenizer, units: list[Unit], tmp: str, column: str,
            keep_newlines: bool) -> int:
        with spark_session(progress) as spark:
            done = (spark.range(0, len(units), 1, len(units))
                    .mapInArrow(_encode_partitions(pickle.dumps(tok), units, tmp, column,
                                                   keep_newlines), "unit long, rows long")
                    .toArrow())
        return int(pl.from_arrow(done).get_column("rows").sum() or 0)

    return encode_files_with(run, "spark", tokenizer, inputs, out, fmt, column, keep_newlines,
                             force, unit_bytes)
