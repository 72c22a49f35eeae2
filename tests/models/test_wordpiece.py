"""The columnar WordPiece encoder against seed 004's greedy longest-match-first `encode_word`
(tests/support/wordpiece_oracle.greedy_encode) and against HF's `models.WordPiece`, on random
vocabularies and words."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from tests.support.examples import examples
from tests.support.wordpiece_oracle import greedy_encode
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.models import MODEL_TYPES, WordPieceModel, model_from_hf
from tokcolumnar.models import wordpiece as wm

ALPHABET = "abcé日#"
piece_st = st.text(alphabet=ALPHABET, min_size=1, max_size=5)


@st.composite
def vocab_and_words(draw):
    pieces = draw(st.lists(piece_st, min_size=1, max_size=30, unique=True))
    cont = draw(st.lists(piece_st, max_size=30, unique=True))
    tokens = ["[UNK]"] + pieces + ["##" + p for p in cont]
    tokens = list(dict.fromkeys(tokens))
    words = draw(st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=14), min_size=1,
                          max_size=40))
    max_chars = draw(st.sampled_from([100, 100, 6, 1]))
    return {t: i for i, t in enumerate(tokens)}, words, max_chars


@examples(3)
@given(data=vocab_and_words())
def test_encoder_matches_seed_greedy_longest_match(data):
    vocab, words, max_chars = data
    model = WordPieceModel(vocab, max_input_chars_per_word=max_chars)
    inv = model.id_to_token()
    got = model.encode_words(pl.Series(words, dtype=pl.String)).to_list()
    for w, ids in zip(words, got):
        assert [inv[i] for i in ids] == greedy_encode(w, vocab, max_chars=max_chars), w


@given(data=vocab_and_words())
def test_encoder_matches_hf_wordpiece_model(data):
    vocab, words, max_chars = data
    hf = HFTokenizer(models.WordPiece(vocab, unk_token="[UNK]",
                                      max_input_chars_per_word=max_chars))
    model = WordPieceModel(vocab, max_input_chars_per_word=max_chars)
    got = model.encode_words(pl.Series(words, dtype=pl.String)).to_list()
    for w, ids in zip(words, got):
        assert ids == hf.encode(w).ids, w


def test_seed_004_examples():
    m = WordPieceModel({"[UNK]": 0, "un": 1, "##affable": 2, "##able": 3, "low": 4, "##e": 5,
                        "##s": 6, "##t": 7})
    assert m.tokenize("unaffable") == ["un", "##affable"]
    assert m.tokenize("lowest") == ["low", "##e", "##s", "##t"]
    assert m.tokenize("unable") == ["un", "##able"]
    assert m.tokenize("unx") == ["[UNK]"]  # any unmatched piece: the whole word
    assert m.tokenize("") == []


def test_max_input_chars_per_word():
    m = WordPieceModel({"[UNK]": 0, "a": 1, "##a": 2})
    assert m.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert m.tokenize("a" * 101) == ["[UNK]"]
    assert WordPieceModel(m.vocab, max_input_chars_per_word=3).tokenize("aaaa") == ["[UNK]"]


def test_missing_unk_is_a_clear_error():
    m = WordPieceModel({"a": 0})
    assert m.tokenize("a") == ["a"]
    with pytest.raises(TokcolumnarError, match="not in the vocabulary"):
        m.tokenize("b")


def test_hf_json_round_trip_and_registration(tmp_path):
    d = {"type": "WordPiece", "unk_token": "<unk>", "continuing_subword_prefix": "@@",
         "max_input_chars_per_word": 7, "vocab": {"<unk>": 0, "ab": 1, "@@c": 2}}
    m = model_from_hf(d)
    assert isinstance(m, WordPieceModel) and MODEL_TYPES["WordPiece"] is WordPieceModel
    assert m.to_hf() == d
    assert m.tokenize("abc") == ["ab", "@@c"]
    vt = tmp_path / "vocab.txt"
    vt.write_text("[UNK]\nab\n##c\n", encoding="utf-8")
    assert WordPieceModel.from_vocab_txt(vt).vocab == {"[UNK]": 0, "ab": 1, "##c": 2}


def test_many_words_at_once_keep_their_order():
    vocab = {"[UNK]": 0, "a": 1, "b": 2, "##a": 3, "##b": 4, "ab": 5, "##ab": 6}
    words = ["ab", "ba", "abab", "x", "aab", "b"] * 500
    got = WordPieceModel(vocab).encode_words(pl.Series(words)).to_list()
    inv = {i: t for t, i in vocab.items()}
    assert [[inv[i] for i in ids] for ids in got] == [greedy_encode(w, vocab) for w in words]


def test_hash_collisions_are_caught(monkeypatch):
    """With base 1 the hash is the byte sum, so anagrams collide: every false hit must be
    caught by the byte check and the word redone by the string join."""
    monkeypatch.setattr(wm, "HASH_BASE", 1)
    vocab = {"[UNK]": 0, "ab": 1, "a": 2, "b": 3, "##a": 4, "##b": 5, "##ba": 6}
    m = WordPieceModel(vocab)
    words = ["ba", "ab", "aab", "bab", "abba", "c", "bc"]
    got = m.encode_words(pl.Series(words)).to_list()
    inv = m.id_to_token()
    assert [[inv[i] for i in ids] for ids in got] == [greedy_encode(w, vocab) for w in words]
    # duplicate hashes inside the vocabulary itself ("ab" and "ba" as pieces): string join only
    vocab2 = {"[UNK]": 0, "ab": 1, "ba": 2, "a": 3, "b": 4, "##a": 5, "##b": 6}
    m2 = WordPieceModel(vocab2)
    got2 = m2.encode_words(pl.Series(words)).to_list()
    inv2 = m2.id_to_token()
    assert [[inv2[i] for i in ids] for ids in got2] == [greedy_encode(w, vocab2) for w in words]
