"""`crosscheck` (tokcolumnar/engines/crosscheck.py): 0 and a summary when both engines agree,
1 and the first difference when a table differs."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from tokcolumnar.cli import main
from tokcolumnar.config import TrainConfig
from tokcolumnar.engines import crosscheck as cc
from tokcolumnar.engines import duckdb_engine as de
from tokcolumnar.training import train

ROOT = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))


def small(name: str) -> Path:
    p = CORPORA / "small" / name
    if not p.exists():
        pytest.skip(f"corpus {p} not available (set TOKCOLUMNAR_CORPORA)")
    return p


@pytest.fixture(scope="module")
def corpus() -> str:
    return str(small("en_taylorswift_wiki.txt"))


def test_crosscheck_identical_returns_0(corpus, capsys):
    rc = cc.crosscheck([corpus], TrainConfig(vocab_size=700, show_progress=False))
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("identical:") and "merges" in out and out.count("\n") == 1


def test_crosscheck_cli(corpus, capsys):
    assert main(["crosscheck", corpus, "--vocab-size", "500", "--min-frequency", "3",
                 "--quiet"]) == 0
    assert "identical" in capsys.readouterr().out


def test_crosscheck_from_counts(tmp_path, corpus, capsys):
    from tokcolumnar.training import words_from_inputs

    f = tmp_path / "w.parquet"
    words_from_inputs(corpus, TrainConfig(show_progress=False)).write_parquet(f)
    assert main(["crosscheck", "--from-counts", str(f), "--vocab-size", "400",
                 "--end-of-word-suffix", "</w>", "--quiet"]) == 0


def test_crosscheck_reports_a_mismatch(corpus, monkeypatch, capsys):
    real = de.train_duckdb

    def altered(*args, **kwargs):
        r = real(*args, **kwargs)
        r.merges = r.merges.with_columns(
            pl.when(pl.col("rank") == 100).then(pl.col("count") + 1).otherwise(pl.col("count"))
            .alias("count"))
        return r

    monkeypatch.setattr(de, "train_duckdb", altered)
    rc = cc.crosscheck([corpus], TrainConfig(vocab_size=500, show_progress=False))
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("MISMATCH: merges row 100 (rank 100), column 'count'")


@pytest.fixture(scope="module")
def results(corpus):
    cfg = TrainConfig(vocab_size=500, show_progress=False)
    return train(corpus, config=cfg), de.train_duckdb(corpus, cfg)


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
