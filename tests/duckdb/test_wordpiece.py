"""WordPiece in the DuckDB engine (sql/10_wordpiece_scores.sql, sql/11_wordpiece_merge.sql,
tokcolumnar/duckdb/wordpiece.py): the same words, merges (score bit for bit, token
counts) and vocab tables as the Polars engine, and the plain-Python oracle's merges, on
Hypothesis corpora and on every file of corpora/small; the HF course example; crosscheck."""

from __future__ import annotations

import dataclasses
from functools import cache

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tokcolumnar as tc
from tests.support.corpora import corpus, small_scripts
from tests.support.engines import train_duckdb
from tests.support.examples import examples
from tests.support.strategies import as_table, corpora
from tests.support.wordpiece_oracle import (
    frequency_wordpiece,
    initial_vocab,
    likelihood_wordpiece,
)
from tokcolumnar.cli import main
from tokcolumnar.config import TrainConfig
from tokcolumnar.duckdb import crosscheck as cc
from tokcolumnar.duckdb import wordpiece as dw
from tokcolumnar.duckdb.engine import DuckDBEngine
from tokcolumnar.errors import TokcolumnarError

pytestmark = pytest.mark.duckdb

COURSE = [("hug", 10), ("pug", 5), ("pun", 12), ("bun", 4), ("hugs", 5)]


def both(words, **options):
    """Train from a words table with both engines; assert identical tables; return them."""
    table = words if isinstance(words, pl.DataFrame) else as_table(words)
    cfg = TrainConfig(model="wordpiece", show_progress=False, **options)
    a = tc.train(from_counts=table, config=dataclasses.replace(cfg))
    b = train_duckdb(None, dataclasses.replace(cfg, engine="duckdb"), from_counts=table)
    assert cc.compare_results(a, b, ("polars", "duckdb")) is None
    for name in ("words", "merges", "vocab"):
        assert getattr(a, name).equals(getattr(b, name)), name
        assert getattr(a, name).schema == getattr(b, name).schema, name
    return a, b


def merge_rows(r):
    m = r.merges
    return list(zip(m["left"].to_list(), m["right"].to_list(), m["count"].to_list(),
                    m["score"].to_list()))


# -- the HF course example (seeds 003/004) ------------------------------------------------------
def test_course_example_through_duckdb():
    _, b = both(COURSE, vocab_size=100)
    first = b.merges.row(0, named=True)
    assert (first["left"], first["right"], first["token"], first["count"]) == ("##g", "##s",
                                                                               "##gs", 5)
    assert first["score"] == 1 / 20  # 5 / (20 * 5)
    assert (first["left_count"], first["right_count"]) == (20, 5)
    om, ov = likelihood_wordpiece(COURSE, 100)
    assert merge_rows(b) == om and b.vocab["token"].to_list() == ov
    assert [(a, c) for a, _, c, _ in merge_rows(b)][:3] == [("##g", 5), ("p", 17), ("h", 15)]
    assert b.merges["words"].to_list() == [1, 2, 2, 1, 1, 1, 1, 1, 1]


def test_course_example_frequency_scoring():
    _, b = both(COURSE, vocab_size=40, wordpiece_scoring="frequency")
    om, ov = frequency_wordpiece(COURSE, 40)
    assert [m[:3] for m in merge_rows(b)] == om and b.vocab["token"].to_list() == ov
    assert b.merges["score"].to_list() == [float(c) for c in b.merges["count"].to_list()]


# -- generated corpora: DuckDB == Polars == oracle -------------------------------------------
@st.composite
def wp_options(draw) -> dict:
    o: dict = {}
    if draw(st.booleans()):
        o["special_tokens"] = draw(st.sampled_from([["[UNK]"], ["[UNK]", "a"], ["x", "[CLS]"]]))
    if draw(st.booleans()):
        o["min_frequency"] = draw(st.integers(0, 5))
    if draw(st.integers(0, 3)) == 0:
        o["limit_alphabet"] = draw(st.integers(1, 4))
    if draw(st.integers(0, 3)) == 0:
        o["max_token_length"] = draw(st.integers(1, 4))
    if draw(st.integers(0, 3)) == 0:
        o["max_merges"] = draw(st.integers(0, 12))
    if draw(st.integers(0, 3)) == 0:
        o["min_score"] = draw(st.sampled_from([0.01, 0.05, 0.2]))
    return o


@examples(0.4)
@given(words=corpora(), extra=st.integers(0, 40), options=wp_options())
def test_likelihood_matches_polars_and_oracle(words, extra, options):
    sp = options.get("special_tokens", [])
    v0, _ = initial_vocab(words, sp, limit_alphabet=options.get("limit_alphabet"))
    vs = len(v0) + extra
    _, b = both(words, vocab_size=vs, **options)
    om, ov = likelihood_wordpiece(words, vs, special_tokens=sp,
                                  min_frequency=options.get("min_frequency", 0),
                                  max_token_length=options.get("max_token_length"),
                                  limit_alphabet=options.get("limit_alphabet"),
                                  max_merges=options.get("max_merges"),
                                  min_score=options.get("min_score"))
    assert merge_rows(b) == om
    assert b.vocab["token"].to_list() == ov


@examples(0.15)
@given(words=corpora(), extra=st.integers(0, 30), min_frequency=st.integers(0, 3))
def test_frequency_matches_polars(words, extra, min_frequency):
    v0, _ = initial_vocab(words)
    both(words, vocab_size=len(v0) + extra, wordpiece_scoring="frequency",
         min_frequency=min_frequency)


def test_runs_and_reused_strings():
    # `a a a` merges left to right; "ab" + "##c" and "a" + "##bc" both make "abc" (one id)
    for words in ([("aaaaa", 3), ("aaa", 2), ("ba", 1), ("aab", 7)],
                  [("abc", 5), ("abd", 1), ("xbc", 4)]):
        _, b = both(words, vocab_size=60)
        om, ov = likelihood_wordpiece(words, 60)
        assert merge_rows(b) == om and b.vocab["token"].to_list() == ov


def test_chain_limits_give_the_same_tables(monkeypatch):
    # one merge per pass, and passes cut by the word limit, against the default passes
    words = [(w, c) for w, c in zip("ab abc bca cab aabb abab bbba caca".split(),
                                    [5, 3, 8, 2, 7, 1, 4, 6])]
    _, ref = both(words, vocab_size=40)
    for steps, max_words in ((1, 4096), (3, 1), (256, 2)):
        monkeypatch.setattr(dw, "STEPS", steps)
        monkeypatch.setattr(dw, "MAX_WORDS", max_words)
        _, b = both(words, vocab_size=40)
        assert b.merges.equals(ref.merges)
    monkeypatch.setattr(dw, "STEPS", 256)
    monkeypatch.setattr(dw, "MAX_WORDS", 4096)
    monkeypatch.setattr(dw, "CANDIDATES", 1)  # chains go on only above the one candidate
    _, b = both(words, vocab_size=40)
    assert b.merges.equals(ref.merges)


def test_initial_alphabet_prefix_and_variant_order():
    _, b = both(COURSE + [("zzq", 2)], vocab_size=40, initial_alphabet=["q", "x"])
    assert "x" in b.vocab["token"].to_list()
    _, b = both(COURSE, vocab_size=40, continuing_subword_prefix="@@")
    assert b.merges["token"][0] == "@@gs"
    _, b = both(COURSE, vocab_size=40, variant_order=["##u", "##s"])
    assert b.vocab["token"].to_list()[8:10] == ["##u", "##s"]  # after [UNK] and 7 letters


# -- real corpora -------------------------------------------------------------------------------
@cache
def small_words(name: str) -> pl.DataFrame:
    return tc.count_words(str(corpus(f"small/{name}")))


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("en_botchan.txt"))
def test_small_corpora_likelihood(name):
    words = small_words(name)
    pairs = list(zip(words["word"].to_list(), words["count"].to_list()))
    v0, _ = initial_vocab(pairs)
    a, b = both(words, vocab_size=len(v0) + 300)
    assert b.merges.height == 300


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", ["en_botchan.txt", "ja_wagahai_300k.txt"])
def test_small_corpora_frequency(name):
    words = small_words(name)
    v0, _ = initial_vocab(list(zip(words["word"].to_list(), words["count"].to_list())))
    both(words, vocab_size=len(v0) + 300, wordpiece_scoring="frequency")


@pytest.mark.slow
@pytest.mark.corpus
def test_small_corpus_from_file_with_options():
    f = str(corpus("small/en_taylorswift_wiki.txt"))
    cfg = TrainConfig(model="wordpiece", vocab_size=600, min_frequency=2, lowercase=True,
                      special_tokens=["[PAD]", "[UNK]"], show_progress=False)
    a = tc.train(f, config=dataclasses.replace(cfg))
    b = train_duckdb(f, dataclasses.replace(cfg, engine="duckdb"))
    assert cc.compare_results(a, b) is None
    assert a.merges.equals(b.merges) and a.words.equals(b.words) and a.vocab.equals(b.vocab)


# -- options the DuckDB WordPiece refuses as the Polars one does --------------------------------
@pytest.mark.parametrize("options, match", [
    ({"wordpiece_scoring": "bogus"}, "wordpiece-scoring"),
    ({"end_of_word_suffix": "</w>"}, "end-of-word"),
    ({"tie_break": "lexical-max"}, "tie-break"),
    ({"max_merges": -1}, "max-merges"),
])
def test_bad_options_are_clear_errors(options, match):
    with pytest.raises(TokcolumnarError, match=match):  # refused by the settings themselves
        cfg = TrainConfig(model="wordpiece", vocab_size=40, engine="duckdb",
                          show_progress=False, **options)
        train_duckdb(None, cfg, from_counts=as_table(COURSE))


# -- CLI and crosscheck ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.corpus
def test_cli_train_duckdb_writes_the_polars_files(tmp_path):
    f = str(corpus("small/en_taylorswift_wiki.txt"))
    for engine in ("polars", "duckdb"):
        assert main(["train", f, "--model", "wordpiece", "--vocab-size", "450", "--engine",
                     engine, "--out", str(tmp_path / engine), "--quiet"]) == 0
    for name in ("vocab.txt", "tokenizer.json"):
        assert ((tmp_path / "polars" / name).read_bytes()
                == (tmp_path / "duckdb" / name).read_bytes()), name
    assert cc.compare_dirs(tmp_path / "polars", tmp_path / "duckdb") == 0


@pytest.mark.slow
@pytest.mark.corpus
def test_crosscheck_wordpiece_identical_returns_0(capsys):
    f = str(corpus("small/en_taylorswift_wiki.txt"))
    assert main(["crosscheck", f, "--model", "wordpiece", "--vocab-size", "450",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("identical:") and "merges" in out


@pytest.mark.parametrize("column, change", [
    ("score", pl.col("score") * (1 + 2 ** -52)),  # the smallest float change is seen
    ("left_count", pl.col("left_count") + 1),
])
def test_crosscheck_wordpiece_reports_a_mismatch(monkeypatch, capsys, column, change):
    real = DuckDBEngine.train

    def altered(self, *args, **kwargs):
        tables = real(self, *args, **kwargs)
        tables.merges = tables.merges.with_columns(
            pl.when(pl.col("rank") == 5).then(change).otherwise(pl.col(column)).alias(column))
        return tables

    monkeypatch.setattr(DuckDBEngine, "train", altered)
    rc = cc.crosscheck(None, TrainConfig(model="wordpiece", vocab_size=60, show_progress=False),
                       from_counts=as_table(COURSE + [("bugs", 3), ("hun", 2)]))
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith(f"MISMATCH: merges row 5 (rank 5), column {column!r}")
