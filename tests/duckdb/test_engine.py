"""The DuckDB twin (tokcolumnar/duckdb/ + sql/) against the Polars engine: identical words /
merges / vocab tables on every small corpus, on hypothesis-generated corpora for each tie-break
and option (the text functions of stage 1: tests/duckdb/test_text.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tokcolumnar as tc
from tests.support.corpora import corpus, small_scripts
from tests.support.engines import duckdb_count, polars_count, train_duckdb
from tests.support.examples import examples
from tests.support.markers import tiered
from tests.support.strategies import as_table, corpora, options
from tokcolumnar.cli import main
from tokcolumnar.config import TrainConfig
from tokcolumnar.duckdb import wordpiece as dw
from tokcolumnar.duckdb.crosscheck import compare_results
from tokcolumnar.duckdb.engine import DuckDBEngine
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.training.pipeline import train

pytestmark = pytest.mark.duckdb


def small(name: str) -> Path:
    return corpus(f"small/{name}")


def vocab_for(name: str) -> int:
    return 5000 if name.startswith(("ja_", "zh_")) else 2000


def both(inputs=None, from_counts=None, **options):
    cfg = TrainConfig(show_progress=False, **options)
    a = train(inputs, from_counts=from_counts, config=cfg)
    b = train_duckdb(inputs, cfg, from_counts=from_counts)
    return a, b


def assert_same(a, b) -> None:
    d = compare_results(a, b, ("polars", "duckdb"))
    assert d is None, d
    for name in ("words", "merges", "vocab"):
        assert getattr(a, name).equals(getattr(b, name)), name


# -- counting -------------------------------------------------------------------------------
@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("en_botchan.txt"))
def test_count_matches_polars(name):
    path = small(name)
    cfg = TrainConfig(show_progress=False)
    assert duckdb_count(str(path), cfg).equals(polars_count(str(path), cfg))


@pytest.mark.corpus
@pytest.mark.parametrize("opts", [
    {"pre_tokenizer": "whitespace-split"},
    {"pre_tokenizer": "none"},
    {"lowercase": True},
    {"normalizer": "nfc", "lowercase": True},
])
def test_count_options_match_polars(opts):
    path = str(small("udhr_multiscript.txt"))
    cfg = TrainConfig(show_progress=False, **opts)
    assert duckdb_count(path, cfg).equals(polars_count(path, cfg))


@pytest.mark.corpus
def test_count_formats_match_polars(tmp_path):
    text = small("en_taylorswift_wiki.txt").read_text(encoding="utf-8")
    lines = text.splitlines()[:400]
    pl.DataFrame({"body": lines, "n": list(range(len(lines)))}).write_parquet(
        tmp_path / "c.parquet")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"body": x}) + "\n" for x in lines),
                                      encoding="utf-8")
    pl.DataFrame({"id": list(range(len(lines))), "body": lines}).write_csv(tmp_path / "c.csv")
    (tmp_path / "a.txt").write_text("\n".join(lines[:200]) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\r\n".join(lines[200:]))
    for inputs, column in [(str(tmp_path / "c.parquet"), "body"),
                           (str(tmp_path / "c.jsonl"), "body"),
                           (str(tmp_path / "c.csv"), "body"),
                           ([str(tmp_path / "a.txt"), str(tmp_path / "b.txt.gz")], "text")]:
        cfg = TrainConfig(show_progress=False, column=column)
        assert duckdb_count(inputs, cfg).equals(polars_count(inputs, cfg)), inputs


def test_count_python_inputs_match_polars():
    texts = ["Hello, world!", "", "héllo  wörld\n", "naïve café", "日本語のテキスト"]
    cfg = TrainConfig(show_progress=False)
    assert duckdb_count(iter(texts), cfg).equals(polars_count(iter(texts), cfg))
    df = pl.DataFrame({"text": texts})
    assert duckdb_count(df, cfg).equals(polars_count(df, cfg))


@pytest.mark.corpus
def test_python_api_engine_option_runs_duckdb(tmp_path, monkeypatch):
    """`train(..., engine="duckdb")` and `count_words(..., engine="duckdb")` go through the
    DuckDB engine (as the CLI's --engine does) and give the Polars engine's tables."""
    calls = []
    real = DuckDBEngine.train
    monkeypatch.setattr(DuckDBEngine, "train",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    f = str(small("en_botchan.txt"))
    a = tc.train(f, vocab_size=800, show_progress=False)
    b = tc.train(f, vocab_size=800, show_progress=False, engine="duckdb",
                 out_dir=tmp_path / "d")
    assert calls == [1]
    assert_same(a, b)
    assert (tmp_path / "d" / "merges.txt").exists()
    assert tc.count_words(f, engine="duckdb").equals(tc.count_words(f))


def test_unsupported_options_fail_clearly(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("a b\n", encoding="utf-8")
    with pytest.raises(TokcolumnarError, match="end-of-word"):
        train_duckdb(str(p), TrainConfig(model="wordpiece", end_of_word_suffix="</w>",
                                         show_progress=False))
    with pytest.raises(TokcolumnarError, match="no words"):
        (tmp_path / "e.txt").write_text("  \n", encoding="utf-8")
        duckdb_count(str(tmp_path / "e.txt"), TrainConfig(show_progress=False))


# -- training on the real corpora -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("en_botchan.txt"))
def test_train_matches_polars_on_small_corpora(name):
    a, b = both(str(small(name)), vocab_size=vocab_for(name))
    assert a.merges.height > 400
    assert_same(a, b)


@pytest.mark.slow
@pytest.mark.corpus
def test_train_30000_matches_polars():
    a, b = both(str(small("en_taylorswift_wiki.txt")), vocab_size=30000)
    assert a.merges.height > 5000
    assert_same(a, b)


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("opts", [
    {"min_frequency": 6},
    {"special_tokens": ["<unk>", "<s>", "e"], "limit_alphabet": 40},
    {"initial_alphabet": ["Q", "ж", "€"], "limit_alphabet": 30},
    {"continuing_subword_prefix": "##"},
    {"end_of_word_suffix": "</w>"},
    {"continuing_subword_prefix": "##", "end_of_word_suffix": "</w>"},
    {"end_of_word_token": "</w>"},
    {"max_token_length": 4},
    {"max_merges": 333},
    {"preset": "subword-nmt"},
    {"tie_break": "lexical-max", "continuing_subword_prefix": "##"},
])
def test_train_options_match_polars(opts, tmp_path):
    # 600: ~500 merges past botchan's alphabet, each option's effect on every pass (the DuckDB
    # loop's cost is per pass; test_train_30000_matches_polars runs the long loop)
    a, b = both(str(small("en_botchan.txt")), vocab_size=600, **opts)
    assert_same(a, b)
    if opts.get("preset") == "subword-nmt":  # -s 600: 600 merges, codes.txt identical
        assert a.merges.height == 600
        a.save(tmp_path / "a")
        b.save(tmp_path / "b")
        assert (tmp_path / "a" / "codes.txt").read_bytes() == (
            tmp_path / "b" / "codes.txt").read_bytes()


@pytest.mark.corpus
@pytest.mark.parametrize("tie_break", tiered(["lexical-max", "first-seen"],
                                             lambda t: t == "lexical-max"))
def test_exact_tie_breaks_match_polars(tie_break):
    words = polars_count(str(small("en_botchan.txt")), TrainConfig(show_progress=False))
    a, b = both(from_counts=words.head(1500), vocab_size=800, tie_break=tie_break)
    assert_same(a, b)


@pytest.mark.parametrize("tie_break", ["lexical-max", "first-seen"])
def test_exact_tie_break_chains_cut_anywhere_give_the_same_tables(tie_break, monkeypatch):
    # lexical-max / first-seen run the chain of stage 11 (docs/architecture.md, "The chain for
    # lexical-max and first-seen"): one merge per pass, passes cut by the word limit, and a
    # single candidate (chains go on only above it, or past it while it is unchanged) give the
    # Polars engine's tables; many equal counts, so the tie-break decides most merges
    words = as_table([(w, c) for w, c in zip(
        "ab abc bca cab aabb abab bbba caca ba cb ac abcabc".split(),
        [5, 3, 5, 2, 3, 1, 4, 2, 1, 1, 3, 2])])
    ref, b = both(from_counts=words, vocab_size=40, tie_break=tie_break)
    assert_same(ref, b)
    for steps, max_words, candidates in ((1, 4096, 256), (3, 1, 256), (256, 2, 256),
                                         (256, 4096, 1)):
        monkeypatch.setattr(dw, "STEPS", steps)
        monkeypatch.setattr(dw, "MAX_WORDS", max_words)
        monkeypatch.setattr(dw, "CANDIDATES", candidates)
        _, b = both(from_counts=words, vocab_size=40, tie_break=tie_break)
        assert_same(ref, b)


@pytest.mark.slow
@pytest.mark.corpus
def test_from_counts_file_matches_polars(tmp_path):
    words = polars_count(str(small("ru_pushkin_300k.txt")), TrainConfig(show_progress=False))
    f = tmp_path / "w.parquet"
    words.select("word", "count").write_parquet(f)  # no first_seen: row order
    a, b = both(from_counts=str(f), vocab_size=600)
    assert_same(a, b)


@pytest.mark.corpus
def test_cli_engine_duckdb_writes_the_same_files(tmp_path):
    path = str(small("en_botchan.txt"))
    assert main(["train", path, "--vocab-size", "700", "--out", str(tmp_path / "p"),
                 "--quiet"]) == 0
    assert main(["train", path, "--vocab-size", "700", "--out", str(tmp_path / "d"),
                 "--engine", "duckdb", "--quiet"]) == 0
    for f in ("merges.txt", "vocab.json", "tokenizer.json"):
        assert (tmp_path / "p" / f).read_bytes() == (tmp_path / "d" / f).read_bytes(), f
    for f in ("merges.parquet", "vocab.parquet", "words.parquet"):
        assert pl.read_parquet(tmp_path / "p" / f).equals(pl.read_parquet(tmp_path / "d" / f))
    assert main(["count", path, "--out", str(tmp_path / "w.parquet"), "--engine", "duckdb",
                 "--quiet"]) == 0
    assert pl.read_parquet(tmp_path / "w.parquet").equals(
        polars_count(path, TrainConfig(show_progress=False)))


# -- hypothesis: tiny corpora make ties, runs and re-created tokens frequent -----------------
SETTINGS = examples(0.4)


def _initial_size(words, opts) -> int:
    r = train(from_counts=words, config=TrainConfig(vocab_size=10**6, max_merges=0,
                                                   show_progress=False, **opts))
    return r.vocab.height


@SETTINGS
@given(corpora().map(as_table), options(max_token_length=True), st.integers(0, 40),
       st.sampled_from(["id", "lexical-max", "first-seen"]))
def test_hypothesis_corpora_match_polars(words, opts, extra, tie_break):
    vs = _initial_size(words, opts) + extra
    a, b = both(from_counts=words, vocab_size=vs, tie_break=tie_break, **opts)
    assert_same(a, b)


def test_python_inputs_read_alike_in_both_engines():
    """Data frames, lazy frames, Arrow tables and iterators reach DuckDB through the Polars
    engine's reader: same words, and the same one-line errors for bad Python inputs."""
    texts = ["hello world\n", "héllo  wörld again", None, ""]
    df = pl.DataFrame({"text": texts})
    for make in (lambda: df, df.lazy, df.to_arrow,
                 lambda: iter([t for t in texts if t is not None])):
        assert tc.count_words(make(), engine="duckdb").equals(tc.count_words(make()))
    for bad, kw, match in ((df.lazy, {"column": "x"}, "no column 'x'"),
                           (lambda: pl.DataFrame({"text": [1]}), {}, "type Int64"),
                           (lambda: 5, {}, "unsupported input int"),
                           (lambda: iter([1]), {}, "expected strings")):
        for engine in ("polars", "duckdb"):
            with pytest.raises(TokcolumnarError, match=match):
                tc.count_words(bad(), engine=engine, **kw)
