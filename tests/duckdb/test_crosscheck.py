"""`crosscheck` (tokcolumnar/duckdb/crosscheck.py): 0 and a summary when both engines agree,
1 and the first difference when a table differs."""

from __future__ import annotations

import polars as pl
import pytest

from tests.support.corpora import corpus as corpus_file
from tests.support.engines import polars_count, train_duckdb
from tokcolumnar.cli import main
from tokcolumnar.config import TrainConfig
from tokcolumnar.duckdb import crosscheck as cc
from tokcolumnar.duckdb.engine import DuckDBEngine
from tokcolumnar.training.pipeline import train

pytestmark = [pytest.mark.duckdb, pytest.mark.corpus]


@pytest.fixture(scope="module")
def corpus() -> str:
    return str(corpus_file("small/en_taylorswift_wiki.txt"))


@pytest.mark.slow
def test_crosscheck_identical_returns_0(corpus, capsys):
    rc = cc.crosscheck([corpus], TrainConfig(vocab_size=700, show_progress=False))
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("identical:") and "merges" in out and out.count("\n") == 1


@pytest.mark.slow
def test_crosscheck_cli(corpus, capsys):
    assert main(["crosscheck", corpus, "--vocab-size", "500", "--min-frequency", "3",
                 "--quiet"]) == 0
    assert "identical" in capsys.readouterr().out


def test_crosscheck_from_counts(tmp_path, corpus, capsys):
    f = tmp_path / "w.parquet"
    polars_count(corpus, TrainConfig(show_progress=False)).write_parquet(f)
    assert main(["crosscheck", "--from-counts", str(f), "--vocab-size", "400",
                 "--end-of-word-suffix", "</w>", "--quiet"]) == 0


def test_crosscheck_reports_a_mismatch(corpus, monkeypatch, capsys):
    real = DuckDBEngine.train

    def altered(self, *args, **kwargs):
        tables = real(self, *args, **kwargs)
        tables.merges = tables.merges.with_columns(
            pl.when(pl.col("rank") == 100).then(pl.col("count") + 1).otherwise(pl.col("count"))
            .alias("count"))
        return tables

    monkeypatch.setattr(DuckDBEngine, "train", altered)
    rc = cc.crosscheck([corpus], TrainConfig(vocab_size=500, show_progress=False))
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("MISMATCH: merges row 100 (rank 100), column 'count'")


@pytest.fixture(scope="module")
def results(corpus):
    cfg = TrainConfig(vocab_size=500, show_progress=False)
    return train(corpus, config=cfg), train_duckdb(corpus, cfg)


def test_compare_results_finds_each_kind_of_change(results):
    a, b = results
    assert cc.compare_results(a, b) is None
    b2 = type(b)(**{**b.__dict__})
    b2.vocab = b.vocab.with_columns(
        pl.when(pl.col("id") == 7).then(pl.lit("X")).otherwise(pl.col("token")).alias("token"))
    assert cc.compare_results(a, b2) == (
        f"vocab row 7 (id 7), column 'token': a {a.vocab['token'][7]!r} vs b 'X'")
    b3 = type(b)(**{**b.__dict__})
    b3.merges = b.merges.head(b.merges.height - 1)
    assert "merges: " in cc.compare_results(a, b3)
    b4 = type(b)(**{**b.__dict__})
    b4.words = b.words.with_columns(pl.col("count").cast(pl.Int64))
    assert "words.count: type" in cc.compare_results(a, b4)


def test_compare_dirs(results, tmp_path, capsys):
    a, b = results
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    assert cc.compare_dirs(tmp_path / "a", tmp_path / "b") == 0
    assert capsys.readouterr().out.startswith("identical")
    m = pl.read_parquet(tmp_path / "b" / "merges.parquet")
    m = m.with_columns(pl.when(pl.col("rank") == 3).then(pl.lit("zz")).otherwise(
        pl.col("right")).alias("right"))
    m.write_parquet(tmp_path / "b" / "merges.parquet")
    assert cc.compare_dirs(tmp_path / "a", tmp_path / "b") == 1
    out = capsys.readouterr().out
    assert out.startswith("DIFFERENT: merges row 3 (rank 3), column 'right'")
