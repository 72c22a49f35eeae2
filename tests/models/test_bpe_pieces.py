"""BPE encoding of long words cut into pieces (`CrossingFilter`): the ids must be HF's for any
merge table, including tables where merges do cross the boundaries a looser rule would cut,
and the cut must actually happen where no merge can cross (else it saves nothing)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from tokcolumnar.models import BPEModel
from tokcolumnar.models.bpe import SPLIT_MIN_SYMBOLS

ALPHABET = "abcdé中文"


def hf_ids(vocab: dict[str, int], merges: list[tuple[str, str]], words: list[str]
           ) -> list[list[int]]:
    """HF's BPE on each word alone (no normalizer, no pre-tokenizer: the word is one
    pre-token)."""
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    return [tok.encode(w).ids if w else [] for w in words]


@st.composite
def merge_tables(draw: st.DrawFn) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A random but valid merge table: each merge joins two tokens that exist already."""
    tokens = list(ALPHABET)
    merges: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 40))):
        a = draw(st.sampled_from(tokens))
        b = draw(st.sampled_from(tokens))
        if (a, b) in merges or len(a + b) > 6:
            continue
        merges.append((a, b))
        if a + b not in tokens:
            tokens.append(a + b)
    return {t: i for i, t in enumerate(tokens)}, merges


@given(merge_tables(),
       st.lists(st.text(alphabet=ALPHABET, min_size=0, max_size=40), min_size=1, max_size=30))
def test_cut_words_encode_as_hf(table: tuple[dict[str, int], list[tuple[str, str]]],
                                words: list[str]) -> None:
    vocab, merges = table
    model = BPEModel(vocab=vocab, merges=merges)
    got = model.encode_words(pl.Series(words, dtype=pl.String)).to_list()
    assert got == hf_ids(vocab, merges, words)


def test_repeated_batches_use_the_piece_cache_and_stay_exact() -> None:
    """The same long words twice (the second time from the piece cache), and merges that cross
    the would-be cut points ("ab"+"cd", "cd"+"ab") next to boundaries nothing crosses."""
    vocab = {t: i for i, t in enumerate(
        ["a", "b", "c", "d", "x", "ab", "cd", "abcd", "cdab", "xx"])}
    merges = [("a", "b"), ("c", "d"), ("ab", "cd"), ("cd", "ab"), ("x", "x")]
    model = BPEModel(vocab=vocab, merges=merges)
    words = ["abcdx" * 4, "xxabcdabcdx", "cdabxabcdxxx", "abcd" * 5, "x" * 17]
    expected = hf_ids(vocab, merges, words)
    for _ in range(2):
        assert model.encode_words(pl.Series(words)).to_list() == expected


def test_boundaries_no_merge_crosses_are_cut() -> None:
    """With merges only inside "ab" and "cd", a word made of them is cut between every pair
    (and not inside one), so its pieces are the two short words, whatever its length."""
    vocab = {t: i for i, t in enumerate(["a", "b", "c", "d", "ab", "cd"])}
    model = BPEModel(vocab=vocab, merges=[("a", "b"), ("c", "d")])
    word = "abcdcdab" * 3
    assert len(word) >= SPLIT_MIN_SYMBOLS
    lengths, ids = model.initial_symbols(pl.Series([word]))
    crossing = model.crossing_filter()
    assert crossing is not None
    starts = crossing.piece_starts(lengths, ids, np.ones(1, dtype=bool))
    assert np.flatnonzero(starts).tolist() == list(range(0, len(word), 2))
