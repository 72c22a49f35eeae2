"""The columnar Unigram trainer (tokcolumnar/training/unigram.py) against the plain-Python oracle
(tests/support/unigram_oracle.py, itself equal to spm_train: tests/models/test_unigram_oracle.py)
and, on real corpora, against SentencePiece directly: the same pieces, order and float32
scores."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.test_unigram_oracle import corpora, vocab_for
from tests.support import unigram_oracle as uo
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.spm_reference import spm_unigram
from tokcolumnar.training import unigram as ug


def columnar(lines: list[str], vocab: int, threads: int) -> list[tuple[str, float]]:
    sentences = ug.load_sentences(pl.Series(lines, dtype=pl.String))
    result = ug.train_unigram(sentences, None,
                              ug.UnigramOptions(vocab_size=vocab, num_threads=threads))
    return list(zip(result.pieces, result.scores.tolist()))


def oracle_sentences(lines: list[str]) -> list[str]:
    sentences, _ = uo.load_sentences(lines, uo.Options(vocab_size=10**9))
    return sentences


@examples(0.5)
@given(st.lists(st.text(alphabet="ab ▅", max_size=6), max_size=12))
def test_load_sentences_as_sentencepiece(lines: list[str]) -> None:
    got = ug.load_sentences(pl.Series(lines, dtype=pl.String)).to_list()
    # the oracle replaces rare characters too: compare before that, with every character kept
    expected = [s for s, _ in oracle_sentences(lines)] if got else []
    assert [s.replace("▅", "") for s in got] == [s.replace("▅", "") for s in expected]


@examples(0.5)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 10, width=32)), max_size=40))
def test_sequential_f32_sums(pairs: list[tuple[int, float]]) -> None:
    keys = np.array([k for k, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64) / 3  # doubles, not floats
    expected = [0.0] * 4
    for k, v in zip(keys.tolist(), values.tolist()):
        expected[k] = uo.f32(expected[k] + v)
    assert ug.sequential_f32_sums(keys, values, 4).tolist() == expected


@examples(0.5)
@given(corpora(), st.integers(0, 25), st.sampled_from([1, 3, 16]))
def test_columnar_matches_oracle(lines: list[str], extra: int, threads: int) -> None:
    vocab = vocab_for(lines, extra)
    expected = uo.train(lines, uo.Options(vocab_size=vocab, num_threads=threads)).pieces
    assert columnar(lines, vocab, threads) == expected


def test_too_small_vocabulary() -> None:
    with pytest.raises(ug.UnigramError, match="smaller than the required characters"):
        columnar(["abcdef ghij"], 8, 1)


REAL = [("small/en_botchan.txt", 300, 400, 16), ("small/ja_wagahai_300k.txt", 30, 1000, 16),
        ("small/ar_tashkeela_plain_300k.txt", 100, 500, 4)]


@pytest.mark.corpus
@pytest.mark.parametrize("rel,lines,vocab,threads", REAL)
def test_columnar_matches_sentencepiece(rel: str, lines: int, vocab: int, threads: int) -> None:
    with open(corpus(rel), encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(lines), f)]
    expected = spm_unigram(text, vocab, num_threads=threads, hard_vocab_limit=True)
    assert columnar(text, vocab, threads) == expected
