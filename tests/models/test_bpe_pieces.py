"""BPE encoding of long words cut into pieces (`CrossingFilter`): the ids must be HF's for any
merge table, including tables where merges do cross the boundaries a looser rule would cut,
and the cut must actually happen where no merge can cross (else it saves nothing)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from tokcolumnar.models import BPEModel
from tokcolumnar.models.bpe import model as bpe
from tokcolumnar.models.bpe.model import SPLIT_MIN_SYMBOLS, distinct_pieces

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


@given(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=6), min_size=1, max_size=60))
def test_distinct_pieces_groups_equal_runs(runs: list[list[int]]) -> None:
    """Runs grouped by their symbols in order (`distinct_pieces`), as a dict would group them."""
    offsets = np.cumsum([0] + [len(r) for r in runs]).astype(np.int64)
    ids = np.array([x for r in runs for x in r], dtype=np.int64)
    distinct = distinct_pieces(offsets, ids)
    assert distinct is not None
    first, hashes, index = distinct
    assert len(set(hashes.tolist())) == len(hashes) == len({tuple(r) for r in runs})
    assert [runs[first[i]] for i in index] == runs  # each run's group holds an equal run
    assert sorted(first.tolist()) == sorted({tuple(r): i for i, r in reversed(
        list(enumerate(runs)))}.values())  # the first run of each group


def test_pieces_sharing_a_hash_are_grouped_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every piece hashed alike (a stand-in for a 64-bit collision) `distinct_pieces`
    reports it and the pieces are grouped by their symbols instead: HF's ids still."""
    vocab = {t: i for i, t in enumerate(["a", "b", "c", "d", "ab", "cd"])}
    merges = [("a", "b"), ("c", "d")]
    words = ["abcdcdab" * 3, "cdab" * 4, "abab" * 3]
    monkeypatch.setattr(bpe, "_mix64", lambda x: np.zeros_like(x))
    offsets = np.array([0, 2, 4], dtype=np.int64)
    assert bpe.distinct_pieces(offsets, np.array([0, 1, 2, 3], dtype=np.int64)) is None
    model = BPEModel(vocab=vocab, merges=merges)
    assert model.encode_words(pl.Series(words)).to_list() == hf_ids(vocab, merges, words)


@given(merge_tables(), st.lists(st.text(alphabet=ALPHABET, min_size=0, max_size=30),
                                min_size=1, max_size=10), st.data())
def test_only_cuttable_boundaries_are_cut(table: tuple[dict[str, int], list[tuple[str, str]]],
                                          words: list[str], data: st.DataObject) -> None:
    """With `cuttable`, a piece starts where it starts without it and a cut is allowed (each
    boundary is tested on its own window), and at every word's first symbol."""
    vocab, merges = table
    crossing = BPEModel(vocab=vocab, merges=merges).crossing_filter()
    if crossing is None:
        return
    model = BPEModel(vocab=vocab, merges=merges)
    lengths, ids = model.initial_symbols(pl.Series(words, dtype=pl.String))
    cuttable = np.array(data.draw(st.lists(st.booleans(), min_size=len(ids),
                                           max_size=len(ids))), dtype=bool)
    eligible = lengths >= 2
    if not eligible.any():  # encode_symbols cuts only when some word is long enough
        return
    word_start = np.zeros(len(ids), dtype=bool)
    word_start[(np.cumsum(lengths) - lengths)[lengths > 0]] = True
    everywhere = crossing.piece_starts(lengths, ids, eligible)
    some = crossing.piece_starts(lengths, ids, eligible, cuttable)
    assert np.array_equal(some, everywhere & (cuttable | word_start))


@given(merge_tables(), st.sets(st.sampled_from(ALPHABET + "😀")))
def test_no_boundary_a_merge_joins_is_cut(table: tuple[dict[str, int], list[tuple[str, str]]],
                                          missing: set[str]) -> None:
    """The filter's patterns are the merges' edges (built with NumPy over all merges at once):
    in the word a+b of every merge (a, b) whose characters are all symbols, the boundary
    between a and b is never cut, whatever the lengths of a and b (1 to 5 characters, an
    astral character among them); merges naming a character that is not a one-character
    token (`missing` drops some from the vocabulary) add no pattern and break nothing."""
    vocab, merges = table
    vocab = {t: i for i, t in enumerate(t for t in vocab if t not in missing)}
    vocab.setdefault("😀", len(vocab))
    merges = [*merges, ("😀", "a"), ("b😀", "😀")]
    for a, b in [("😀", "a"), ("b😀", "😀")]:
        for t in (a, b, a + b):
            vocab.setdefault(t, len(vocab))
    merges = [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]
    crossing = BPEModel(vocab=vocab, merges=merges).crossing_filter()
    if crossing is None:
        return
    single = {t: i for t, i in vocab.items() if len(t) == 1}
    joined = [(a, b) for a, b in merges if all(ch in single for ch in a + b)]
    for a, b in joined:
        ids = np.array([single[ch] for ch in a + b], dtype=np.int64)
        starts = crossing.piece_starts(np.array([len(ids)], dtype=np.int64), ids,
                                       np.ones(1, dtype=bool))
        assert not starts[len(a)], (a, b)
