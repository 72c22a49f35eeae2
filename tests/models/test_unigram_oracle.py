"""The Unigram oracle (tests/support/unigram_oracle.py) against the real SentencePiece: the same
pieces, in the same order, with the same float32 scores, on generated and on real small corpora,
with one thread and with several (SentencePiece's float sums depend on its threads)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import unigram_oracle as uo
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.spm_reference import spm_unigram

ALPHABETS = ["ab ", "abc  ", "aé文 ", "xy1, ", "ab\u0301 ", "あア漢 ", "a▁ "]


@st.composite
def corpora(draw) -> list[str]:
    alphabet = draw(st.sampled_from(ALPHABETS))
    lines = draw(st.lists(st.text(alphabet=alphabet, min_size=0, max_size=14), min_size=1,
                          max_size=12))
    if not any(line.strip(" ▁") for line in lines):  # SentencePiece needs one character
        lines.append(alphabet[0] * 3)
    return lines


def vocab_for(lines: list[str], extra: int) -> int:
    """A vocabulary size above the required characters (every character of a tiny corpus)."""
    chars = {c for line in lines for c in uo.normalize_identity(line)}
    return len(chars) + uo.META + extra


def test_normalize_identity() -> None:
    assert uo.normalize_identity("  Hello   world ") == "▁Hello▁world"
    assert uo.normalize_identity("   ") == ""


def test_valid_pieces() -> None:
    opts = uo.Options()
    assert uo.is_valid_piece("▁ab", opts)
    assert not uo.is_valid_piece("a▁b", opts)  # whitespace only in front
    assert not uo.is_valid_piece("a,", opts)  # Latin then Common
    assert not uo.is_valid_piece("a1", opts)  # digits are Common (split_by_number)
    assert uo.is_valid_piece("ab\u0301c", opts)  # a combining mark takes the script before it
    assert uo.is_valid_piece("あア漢", opts)  # Hiragana and Katakana count as Han
    assert not uo.is_valid_piece("a" * 17, opts)


@examples(0.3)
@given(corpora(), st.integers(0, 25), st.sampled_from([1, 3, 16]))
def test_oracle_matches_sentencepiece(lines: list[str], extra: int, threads: int) -> None:
    vocab = vocab_for(lines, extra)
    expected = spm_unigram(lines, vocab, num_threads=threads)
    got = uo.train(lines, uo.Options(vocab_size=vocab, num_threads=threads)).pieces
    assert got == expected


REAL = [("small/en_botchan.txt", 100, 200, 16), ("small/ru_pushkin_300k.txt", 60, 250, 4),
        ("small/udhr_multiscript.txt", 60, 350, 1)]


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("rel,lines,vocab,threads", REAL)
def test_oracle_matches_sentencepiece_on_corpora(rel: str, lines: int, vocab: int,
                                                 threads: int) -> None:
    with open(corpus(rel), encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(lines), f)]
    expected = spm_unigram(text, vocab, num_threads=threads, hard_vocab_limit=True)
    assert uo.train(text, uo.Options(vocab_size=vocab, num_threads=threads)).pieces == expected
