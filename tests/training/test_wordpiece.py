"""Likelihood WordPiece training (docs/architecture.md: ids and tie-breaks): the seed / HF-course
example, agreement with the plain-Python oracle (Hypothesis corpora and every file of
corpora/small), stopping rules and the exported files."""

from __future__ import annotations

import json
from functools import cache

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, processors

import tokcolumnar as tc
from tests.support.cli import run_cli
from tests.support.corpora import corpus, small_tiered
from tests.support.examples import examples
from tests.support.wordpiece_oracle import (
    frequency_wordpiece,
    initial_vocab,
    likelihood_wordpiece,
)
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.training import wordpiece

COURSE = [("hug", 10), ("pug", 5), ("pun", 12), ("bun", 4), ("hugs", 5)]


def words_frame(words):
    return pl.DataFrame({"word": [w for w, _ in words], "count": [c for _, c in words]},
                        schema={"word": pl.String, "count": pl.UInt64})


def engine(words, vocab_size, **kw):
    r = tc.train(from_counts=words_frame(words), model="wordpiece", vocab_size=vocab_size, **kw)
    m = r.merges
    merges = list(zip(m["left"].to_list(), m["right"].to_list(), m["count"].to_list(),
                      m["score"].to_list()))
    return merges, r.vocab["token"].to_list(), r


# -- the seed / HF course example -------------------------------------------------------------
def test_course_first_merge_is_gs_with_score_one_twentieth():
    merges, vocab, r = engine(COURSE, 100)
    left, right, count, score = merges[0]
    assert (left, right, count) == ("##g", "##s", 5)
    assert score == 1 / 20  # count(##g ##s) / (count(##g) * count(##s)) = 5 / (20 * 5)
    first = r.merges.row(0, named=True)
    assert (first["left_count"], first["right_count"], first["token"]) == (20, 5, "##gs")
    assert r.merges["words"].to_list() == [1, 2, 2, 1, 1, 1, 1, 1, 1]  # words each touched


def test_course_every_step_matches_oracle_and_hand_computation():
    merges, vocab, _ = engine(COURSE, 100)
    om, ov = likelihood_wordpiece(COURSE, 100)
    assert merges == om and vocab == ov
    # worked by hand (ties: equal float scores, then the higher pair count, then ids)
    assert [(a, b, c) for a, b, c, _ in merges] == [
        ("##g", "##s", 5),
        ("p", "##u", 17),   # every pair scores 1/36 (##u is in each): highest count wins
        ("h", "##u", 15),   # 1/19 tie with (b, ##u) and (##u, ##gs): highest count
        ("b", "##u", 4),    # 4 / (4 * 4)
        ("hu", "##gs", 5),  # 5 / (15 * 5)
        ("hu", "##g", 10),  # 10 / (10 * 15)
        ("bu", "##n", 4),   # 4 / (4 * 16)
        ("pu", "##n", 12),  # 1/17, tied with (pu, ##g) 5/85: higher count
        ("pu", "##g", 5),
    ]
    assert merges[1][3] == 1 / 36 and merges[7][3] == 12 / (17 * 12) == 5 / (17 * 5)
    assert vocab[:11] == ["[UNK]", "b", "g", "h", "n", "p", "s", "u", "##g", "##n", "##s"]


def test_seed_003_example_scores():
    """Seed 003's table: {hug 10, pug 5, pun 12, bun 4}, ##u 31, ##g 15, ##n 16."""
    words = [("hug", 10), ("pug", 5), ("pun", 12), ("bun", 4)]
    merges, _, r = engine(words, 100, max_merges=1)
    om, _ = likelihood_wordpiece(words, 100, max_merges=1)
    assert merges == om
    # all pairs with ##u: (p,##u) 17/(17*31), (##u,##n) 16/(31*16) ... all equal 1/31
    assert merges[0][3] == 1 / 31
    assert merges[0][:3] == ("p", "##u", 17)
    row = r.merges.row(0, named=True)
    assert (row["left_count"], row["right_count"]) == (17, 31)


# -- oracle agreement ----------------------------------------------------------------------------
word_st = st.text(alphabet="abcdeé#日", min_size=1, max_size=9)
corpus_st = st.lists(st.tuples(word_st, st.integers(1, 40)), min_size=1, max_size=30,
                     unique_by=lambda t: t[0])


@examples(1.5)
@given(words=corpus_st, extra=st.integers(0, 60), specials=st.booleans(),
       min_freq=st.sampled_from([0, 0, 2, 5]), max_len=st.sampled_from([None, None, 2, 4]),
       limit=st.sampled_from([None, None, None, 3, 5]))
def test_engine_matches_oracle_on_generated_corpora(words, extra, specials, min_freq, max_len,
                                                    limit):
    sp = ["[UNK]", "[CLS]"] if specials else []
    v0, _ = initial_vocab(words, sp, limit_alphabet=limit)
    vs = len(v0) + extra
    kw = {"special_tokens": sp, "min_frequency": min_freq, "max_token_length": max_len,
          "limit_alphabet": limit}
    merges, vocab, _ = engine(words, vs, **kw)
    om, ov = likelihood_wordpiece(words, vs, special_tokens=sp, min_frequency=min_freq,
                                  max_token_length=max_len, limit_alphabet=limit)
    assert merges == om
    assert vocab == ov


@examples(1.0)
@given(words=corpus_st, extra=st.integers(0, 60), tiny=st.sampled_from([1, 3, 10**9]))
def test_tiny_python_pass_and_numpy_pass_match_oracle(words, extra, tiny):
    """Every pass in plain Python (`TINY` 10**9) or a mix, and every pass in NumPy (0): the
    merges are the oracle's either way (runs `##a ##a ##a`, stale positions, new pairs), and
    both count the same words touched per merge."""
    v0, _ = initial_vocab(words)
    runs = []
    for limit in (tiny, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(wordpiece, "TINY", limit)
            runs.append(engine(words, len(v0) + extra))
    om, ov = likelihood_wordpiece(words, len(v0) + extra)
    for merges, vocab, _ in runs:
        assert merges == om
        assert vocab == ov
    assert runs[0][2].merges["words"].to_list() == runs[1][2].merges["words"].to_list()


@examples(0.6)
@given(words=corpus_st, max_merges=st.integers(0, 20), min_score=st.sampled_from(
    [None, 0.01, 0.05, 0.2]))
def test_stopping_rules_match_oracle(words, max_merges, min_score):
    v0, _ = initial_vocab(words)
    merges, vocab, _ = engine(words, len(v0) + 100, max_merges=max_merges, min_score=min_score)
    om, ov = likelihood_wordpiece(words, len(v0) + 100, max_merges=max_merges,
                                  min_score=min_score)
    assert merges == om and vocab == ov
    assert len(merges) <= max_merges
    if min_score is not None:
        assert all(s >= min_score for *_, s in merges)


def test_runs_of_one_symbol_merge_left_to_right():
    words = [("aaaaa", 3), ("aaa", 2), ("ba", 1), ("aab", 7)]
    merges, vocab, _ = engine(words, 40)
    om, ov = likelihood_wordpiece(words, 40)
    assert merges == om and vocab == ov


def test_existing_string_reuses_its_id():
    # "ab" + "##c" and "a" + "##bc" both make "abc": the second merge keeps the first id
    words = [("abc", 5), ("abd", 1), ("xbc", 4)]
    merges, vocab, r = engine(words, 60)
    om, ov = likelihood_wordpiece(words, 60)
    assert merges == om and vocab == ov
    ids = r.merges["id"].to_list()
    tokens = r.merges["token"].to_list()
    for t, i in zip(tokens, ids):
        assert vocab[i] == t


@cache
def small_words(name: str) -> pl.DataFrame:
    return tc.count_words(str(corpus(f"small/{name}")))


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_tiered("en_botchan.txt"))
def test_engine_matches_oracle_on_small_corpora(name):
    words = small_words(name)
    pairs = list(zip(words["word"].to_list(), words["count"].to_list()))
    v0, _ = initial_vocab(pairs)
    # vocab 2000 where the alphabet allows; large alphabets (CJK, multiscript) get 400 merges
    # (the oracle rescans every pair at every step: it is slow there)
    vs = 2000 if len(v0) < 1000 else len(v0) + 400
    r = tc.train(from_counts=words, model="wordpiece", vocab_size=vs)
    m = r.merges
    merges = list(zip(m["left"].to_list(), m["right"].to_list(), m["count"].to_list(),
                      m["score"].to_list()))
    om, ov = likelihood_wordpiece(pairs, vs)
    assert len(merges) == len(om) == vs - len(v0)
    assert merges == om
    assert r.vocab["token"].to_list() == ov


# -- stopping rules and options ------------------------------------------------------------------
def test_vocab_size_counts_specials_alphabet_and_variants():
    _, vocab, r = engine(COURSE, 15, special_tokens=["[UNK]"])
    assert len(vocab) == 15
    assert r.vocab.filter(pl.col("kind") == "special")["token"].to_list() == ["[UNK]"]


def test_no_pairs_left_stops():
    merges, vocab, _ = engine([("ab", 3)], 1000)
    assert [m[:2] for m in merges] == [("a", "##b")]
    assert vocab == ["[UNK]", "a", "b", "##b", "ab"]


def test_frequency_scoring_is_bpe_with_prefix():
    merges, vocab, _ = engine(COURSE, 40, wordpiece_scoring="frequency")
    om, ov = frequency_wordpiece(COURSE, 40)
    assert [m[:3] for m in merges] == om and vocab == ov
    assert merges[0][:3] == ("##u", "##g", 20) or merges[0][:3] == om[0]
    assert all(s == float(c) for _, _, c, s in merges)


def test_bad_options_are_clear_errors():
    with pytest.raises(TokcolumnarError, match="wordpiece-scoring"):
        engine(COURSE, 40, wordpiece_scoring="bogus")
    with pytest.raises(TokcolumnarError, match="end-of-word"):
        engine(COURSE, 40, end_of_word_suffix="</w>")
    with pytest.raises(TokcolumnarError, match="vocab-size"):
        engine(COURSE, 3)


# -- exports ---------------------------------------------------------------------------------------
def test_exports(tmp_path):
    out = tmp_path / "wp"
    r = tc.train(from_counts=words_frame(COURSE), model="wordpiece", vocab_size=30,
                 special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], out_dir=out)
    lines = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    assert lines[:-1] == r.vocab.sort("id")["token"].to_list()
    assert lines[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tj = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    model = tj["model"]
    assert list(model) == ["type", "unk_token", "continuing_subword_prefix",
                           "max_input_chars_per_word", "vocab"]
    assert (model["type"], model["unk_token"], model["continuing_subword_prefix"],
            model["max_input_chars_per_word"]) == ("WordPiece", "[UNK]", "##", 100)
    assert model["vocab"] == {t: i for i, t in enumerate(lines[:-1])}
    assert tj["post_processor"] is None  # only the bert preset adds [CLS] ... [SEP]
    merges = pl.read_parquet(out / "merges.parquet")
    assert {"rank", "left", "right", "token", "left_id", "right_id", "id", "count", "score",
            "words", "left_count", "right_count"} <= set(merges.columns)
    assert merges.row(0, named=True)["score"] == 1 / 20
    assert merges.select((pl.col("count") / (pl.col("left_count").cast(pl.Float64)
                                             * pl.col("right_count").cast(pl.Float64))
                          == pl.col("score")).all()).item()
    vocab = pl.read_parquet(out / "vocab.parquet")
    assert vocab["kind"].unique().sort().to_list() == ["alphabet", "merge", "special",
                                                       "variant"]
    assert (out / "run.json").exists() and not (out / "merges.txt").exists()


def test_bert_preset_post_processor_json_is_hfs(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("Hello, World! hello world.\nunaffable Unaffable\n", encoding="utf-8")
    out = tmp_path / "bert"
    r = tc.train(str(src), preset="bert", vocab_size=80, out_dir=out)
    assert r.config.lowercase and r.config.normalizer == "bert"
    tj = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    assert tj["post_processor"] == json.loads(hf.to_str())["post_processor"]
    assert tj["decoder"]["type"] == "WordPiece"
    assert [t["content"] for t in tj["added_tokens"]] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                          "[MASK]"]


def test_cli_train_wordpiece(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5 + "\n",
                   encoding="utf-8")
    for scoring in ("likelihood", "frequency"):
        out = tmp_path / scoring
        p = run_cli("train", str(src), "--model", "wordpiece", "--vocab-size", "40",
                    "--special-tokens", "[UNK]", "--wordpiece-scoring", scoring, "--max-merges",
                    "3", "--quiet", "--out", str(out))
        assert p.returncode == 0, p.stderr
        merges = pl.read_parquet(out / "merges.parquet")
        assert merges.height == 3
        if scoring == "likelihood":
            assert merges.row(0, named=True)["token"] == "##gs"
        assert (out / "vocab.txt").read_text(encoding="utf-8").startswith("[UNK]\n")
    p = run_cli("train", str(src), "--model", "wordpiece", "--vocab-size", "40", "--min-score",
                "0.04", "--quiet", "--out", str(tmp_path / "ms"))
    assert p.returncode == 0, p.stderr
    scores = pl.read_parquet(tmp_path / "ms" / "merges.parquet")["score"].to_list()
    assert scores == [1 / 20]  # the next best scores 1/36 < 0.04


def test_pair_table_slices_are_taken_once_in_order_of_addition():
    """A pair's position slices (the first in the table's arrays, further ones aside) come
    back in the order they were added, once; the arrays grow with the slots."""
    table = wordpiece.PairTable(capacity=2)
    slots = table.add_list([(1 << 32) | 2, (3 << 32) | 4, (5 << 32) | 6])  # grows past 2
    assert slots == [0, 1, 2]
    table.add_slice(2, 0, 5, 9)
    table.add_slice(2, 3, 0, 1)
    table.add_slice(2, 7, 2, 4)
    table.add_slice(1, 4, 1, 2)
    assert table.take_slices(0) == []
    assert table.take_slices(2) == [(0, 5, 9), (3, 0, 1), (7, 2, 4)]
    assert table.take_slices(2) == []
    table.add_slice(2, 8, 0, 3)  # a pair made again after its merge
    assert table.take_slices(2) == [(8, 0, 3)]
    assert table.take_slices(1) == [(4, 1, 2)]
    assert not table.more
