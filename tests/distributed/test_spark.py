"""Counting and training on Spark (`local[2]`, one session for the module): the words table —
first_seen included — is the single-machine one for text, gzip, Parquet and JSONL inputs."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import sys

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.corpora import corpus
from tokcolumnar import count_words, train
from tokcolumnar.config import TrainConfig
from tokcolumnar.errors import TokcolumnarError

pytestmark = [pytest.mark.slow, pytest.mark.corpus]


#: CI (`.ci/run`) sets TOKCOLUMNAR_REQUIRE_SPARK=1: a missing PySpark or Java then fails these
#: tests instead of skipping them.
REQUIRED = os.environ.get("TOKCOLUMNAR_REQUIRE_SPARK", "") not in ("", "0")


def needs_spark() -> None:
    """Skip (or with TOKCOLUMNAR_REQUIRE_SPARK=1 fail) without PySpark or Java."""
    missing = []
    if importlib.util.find_spec("pyspark") is None:
        missing.append("PySpark is not installed (pip install 'tokcolumnar[spark]')")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        missing.append("the Spark tests need Java 17 or later (apt-get install -y "
                       "openjdk-17-jre-headless)")
    if missing:
        if REQUIRED:
            pytest.fail("; ".join(missing) + " (and TOKCOLUMNAR_REQUIRE_SPARK is set)",
                        pytrace=False)
        pytest.skip("; ".join(missing))


@pytest.fixture(scope="module")
def spark_local():
    needs_spark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.executorEnv.POLARS_MAX_THREADS", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


def test_count_and_train_on_spark_match_the_single_machine(spark_local, tmp_path):
    from tokcolumnar.distributed.spark import count_words_spark

    en = corpus("small/en_botchan.txt")
    ja = corpus("small/ja_wagahai_300k.txt")
    gz = tmp_path / "udhr.txt.gz"
    gz.write_bytes(gzip.compress(corpus("small/udhr_multiscript.txt").read_bytes()))
    lines = ja.read_text().splitlines(keepends=True)
    parquet, jsonl = tmp_path / "ja.parquet", tmp_path / "ja.jsonl"
    pq.write_table(pa.table({"text": lines}), parquet, row_group_size=700)
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    inputs = [str(en), str(parquet), str(gz), str(jsonl)]
    cfg = TrainConfig(pre_tokenizer="byte-level", show_progress=False)
    expected = count_words(inputs, config=cfg)
    assert count_words_spark(inputs, cfg, unit_bytes=50_000).equals(expected)
    single = train([str(en)], vocab_size=500, pre_tokenizer="byte-level")
    on_spark = train([str(en)], vocab_size=500, pre_tokenizer="byte-level", engine="spark")
    assert on_spark.merges.equals(single.merges) and on_spark.vocab.equals(single.vocab)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\n" * 20 + b"bad \xff\n")
    with pytest.raises(TokcolumnarError) as one:
        count_words([str(bad)])
    with pytest.raises(TokcolumnarError) as spark:
        count_words([str(bad)], engine="spark")
    assert str(spark.value) == str(one.value)


def test_encode_on_spark_writes_the_single_machine_rows(spark_local, tmp_path):
    import polars as pl

    from tokcolumnar.distributed.spark import encode_files_spark
    from tokcolumnar.encode.dataset import encode_files

    en = corpus("small/en_botchan.txt")
    parquet = tmp_path / "en.parquet"
    pq.write_table(pa.table({"text": en.read_text().splitlines()}), parquet,
                   row_group_size=1000)
    inputs = [str(en), str(parquet)]
    tok = train([str(en)], vocab_size=500, pre_tokenizer="byte-level").tokenizer()
    n = encode_files(tok, inputs, str(tmp_path / "one.parquet"), progress=False)
    assert encode_files_spark(tok, inputs, str(tmp_path / "parts"), unit_bytes=50_000) == n
    parts = sorted((tmp_path / "parts").glob("part-*.parquet"))
    assert len(parts) > len(inputs)
    assert pl.concat([pl.read_parquet(p) for p in parts]).equals(
        pl.read_parquet(tmp_path / "one.parquet"))


def test_file_uris_on_spark_count_as_local_paths(spark_local, tmp_path):
    from tokcolumnar.distributed.spark import count_words_spark

    ja = corpus("small/ja_wagahai_300k.txt")
    parquet = tmp_path / "ja.parquet"
    pq.write_table(pa.table({"text": ja.read_text().splitlines(keepends=True)}), parquet,
                   row_group_size=700)
    inputs = [str(corpus("small/en_botchan.txt")), str(parquet)]
    cfg = TrainConfig(pre_tokenizer="byte-level", show_progress=False)
    got = count_words_spark([f"file://{p}" for p in inputs], cfg, unit_bytes=50_000)
    assert got.equals(count_words(inputs, config=cfg))


def test_a_spark_dataframe_counts_as_its_rows_in_partition_order(spark_local, tmp_path):
    import polars as pl

    # the lines of two corpora, as Spark reads them (line endings dropped), in several
    # partitions: first_seen is the position in partition order, then row order
    src = tmp_path / "lines.txt"
    src.write_bytes(corpus("small/udhr_multiscript.txt").read_bytes()
                    + corpus("small/en_botchan.txt").read_bytes())
    lines = src.read_text().splitlines()
    spark_local.conf.set("spark.sql.files.maxPartitionBytes", "60000")  # read when planned
    made = spark_local.createDataFrame([(i, t) for i, t in enumerate(lines)],
                                       "id long, line string")
    try:
        read = spark_local.read.text(str(src))
        assert read.rdd.getNumPartitions() > 2 and made.rdd.getNumPartitions() > 1
        for df, column in ((read, "value"), (made, "line")):
            for pre_tokenizer in ("byte-level", "whitespace"):
                expected = count_words(pl.DataFrame({"text": lines}),
                                       pre_tokenizer=pre_tokenizer)
                got = count_words(df, column=column, pre_tokenizer=pre_tokenizer)
                assert got.equals(expected), (column, pre_tokenizer)
        with pytest.raises(TokcolumnarError, match="no column 'text' in the data frame"):
            count_words(read)
    finally:
        spark_local.conf.unset("spark.sql.files.maxPartitionBytes")
    # an empty partition counts nothing; train on a DataFrame as on the same rows
    sparse = spark_local.sparkContext.parallelize([(t,) for t in lines[:50]], 60).toDF(["text"])
    assert count_words(sparse).equals(count_words(pl.DataFrame({"text": lines[:50]})))
    single = train(pl.DataFrame({"text": lines}), vocab_size=2000, pre_tokenizer="whitespace")
    on_spark = train(made, column="line", vocab_size=2000, pre_tokenizer="whitespace")
    assert on_spark.merges.equals(single.merges) and on_spark.vocab.equals(single.vocab)
    with pytest.raises(TokcolumnarError, match="text column has type bigint"):
        count_words(made, column="id")
    with pytest.raises(TokcolumnarError, match=r"--engine spark reads files \(paths, "
                       r"directories, globs, URIs\) or a Spark DataFrame, not DataFrame"):
        count_words(pl.DataFrame({"text": lines}), engine="spark")


def test_spark_submit_runs_the_shipped_job(tmp_path):
    # the README's recipe: spark-submit the file `python -m tokcolumnar.distributed.spark_job`
    # prints, with the command line's arguments; the words are the single-machine ones
    needs_spark()
    import subprocess

    from tests.support.cli import cli_env

    submit = shutil.which("spark-submit", path=os.path.dirname(sys.executable)) or \
        shutil.which("spark-submit")
    assert submit, "PySpark's spark-submit is not on the path"
    job = subprocess.run([sys.executable, "-m", "tokcolumnar.distributed.spark_job"],
                         capture_output=True, text=True, env=cli_env(), check=True).stdout.strip()
    src = tmp_path / "c.txt"
    src.write_bytes(corpus("small/en_botchan.txt").read_bytes()[:50_000])
    out = tmp_path / "words.parquet"
    proc = subprocess.run([submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           job, "count", "--engine", "spark", str(src), "--out", str(out), "-q"],
                          capture_output=True, text=True,
                          env=cli_env({"PYSPARK_PYTHON": sys.executable}))
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = count_words(str(src))
    assert pl.read_parquet(out).equals(expected)
