"""The BPE merge loop's rounds (`BPEModel.apply_merges`): with a well-formed merge table a round
merges every occurrence of a word's lowest-rank pair (every other one in a run `a a a`); the
ids must be HF's and the one-merge-per-round loop's, on random tables with repeated pairs and
on random byte strings through a trained byte-level BPE; a table that is not well formed keeps
one merge per round (merging every occurrence would then differ from HF)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

from tests.support.corpora import PRIMER
from tokcolumnar import Tokenizer, train
from tokcolumnar.layout import Layout
from tokcolumnar.models import BPEModel
from tokcolumnar.models.bpe.pair_index import NO_PAIR, PairIndex
from tokcolumnar.text.bytelevel import bytes_to_unicode


def hf_ids(vocab: dict[str, int], merges: list[tuple[str, str]], words: list[str]
           ) -> list[list[int]]:
    """HF's BPE on each word alone (the word is one pre-token)."""
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    return [tok.encode(w).ids if w else [] for w in words]


def merged(model: BPEModel, words: list[str], every_occurrence: bool
           ) -> tuple[list[list[int]], int, int]:
    """The merge loop on whole words (no cutting into pieces) in the given mode: (ids per word,
    rounds, merges traced)."""
    lengths, ids = model.initial_symbols(pl.Series(words, dtype=pl.String))
    layout = Layout.from_symbols(lengths, ids, np.ones(len(words), dtype=np.int64))
    trace: list[tuple[np.ndarray, np.ndarray]] = []
    model.apply_merges(layout, trace=trace, every_occurrence=every_occurrence)
    offsets, flat = layout.segmentation(len(words))
    out = [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(words))]
    return out, len(trace), sum(len(w) for w, _ in trace)


@st.composite
def repeating_tables(draw: st.DrawFn) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A random merge table over a small alphabet that favours merges of a token with itself
    ("a"+"a", "aa"+"aa"), each merge joining tokens made earlier (well formed unless a string
    is made twice, which hypothesis also draws)."""
    tokens = list("abc")
    merges: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 25))):
        a = draw(st.sampled_from(tokens))
        b = a if draw(st.booleans()) else draw(st.sampled_from(tokens))
        if (a, b) in merges or len(a + b) > 8:
            continue
        merges.append((a, b))
        if a + b not in tokens:
            tokens.append(a + b)
    return {t: i for i, t in enumerate(tokens)}, merges


RUNS = st.lists(st.sampled_from(["a", "aa", "aaaa", "b", "ab", "ba", "c", "aaaaaaa"]),
                max_size=12).map("".join)


@given(repeating_tables(), st.lists(RUNS, min_size=1, max_size=20))
def test_every_occurrence_rounds_match_hf_and_one_merge_rounds(
        table: tuple[dict[str, int], list[tuple[str, str]]], words: list[str]) -> None:
    vocab, merges = table
    model = BPEModel(vocab=vocab, merges=merges)
    expected = hf_ids(vocab, merges, words)
    one, one_rounds, one_merges = merged(model, words, every_occurrence=False)
    assert one == expected
    if model.merges_well_formed():
        every, rounds, n_merges = merged(model, words, every_occurrence=True)
        assert every == expected
        assert n_merges == one_merges  # the trace names every merge, as one-merge rounds do
        assert rounds <= one_rounds
    # the model's own choice (and the piece cutting) gives HF's ids either way
    assert model.encode_words(pl.Series(words, dtype=pl.String)).to_list() == expected


def test_a_run_of_one_pair_merges_in_few_rounds() -> None:
    """"a" * 16 with a+a, aa+aa, aaaa+aaaa: three rounds (every other pair of each run), not
    fourteen, and HF's ids."""
    vocab = {t: i for i, t in enumerate(["a", "aa", "aaaa", "aaaaaaaa"])}
    merges = [("a", "a"), ("aa", "aa"), ("aaaa", "aaaa")]
    model = BPEModel(vocab=vocab, merges=merges)
    words = ["a" * 16, "a" * 7, "a" * 3]
    every, rounds, _ = merged(model, words, every_occurrence=True)
    assert every == hf_ids(vocab, merges, words) == [[3, 3], [2, 1, 0], [1, 0]]
    assert rounds == 3
    assert merged(model, words, every_occurrence=False)[1] == 14


def test_a_table_that_is_not_well_formed_keeps_one_merge_rounds() -> None:
    """("ab", "a") comes before ("a", "b"), which makes "ab": in "ababa" HF merges the first
    "ab", then "ab"+"a" (rank 0) before the second "a"+"b". Merging both "a"+"b" in one round
    would give ab|aba; the check sees the table is not well formed and keeps HF's order."""
    vocab = {t: i for i, t in enumerate(["a", "b", "ab", "aba"])}
    merges = [("ab", "a"), ("a", "b")]
    model = BPEModel(vocab=vocab, merges=merges)
    assert not model.merges_well_formed()
    words = ["ababa", "ababa" * 3]
    expected = hf_ids(vocab, merges, words)
    assert expected[0] == [3, 1, 0]
    assert model.encode_words(pl.Series(words)).to_list() == expected
    assert merged(model, words, every_occurrence=False)[0] == expected
    assert merged(model, words, every_occurrence=True)[0][0] == [2, 3]  # what the check avoids
    assert BPEModel(vocab=vocab, merges=merges[::-1]).merges_well_formed()


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A gpt2-preset (byte-level) BPE trained on the primer plus runs of repeated bytes and
    CJK text, so that merges of a token with itself and of multi-byte characters exist."""
    text = tmp_path_factory.mktemp("text") / "t.txt"
    extra = ["aaaaaaaa bbbb " * 20, "        indented    more " * 20, "!!!!!!!! ???? " * 20,
             "文文文文中文中文字字字 " * 20, "ééééé ëë " * 20]
    text.write_text(PRIMER.read_text(encoding="utf-8") + "\n" + "\n".join(extra) + "\n",
                    encoding="utf-8")
    out = tmp_path_factory.mktemp("gpt2") / "o"
    train([str(text)], out_dir=out, vocab_size=1200, preset="gpt2")
    return Tokenizer.from_dir(out)


CHUNKS = [b"a", b"aaaa", b"b", b" ", b"    ", b"!!", b"?", b"the", b" token", b"\xc3\xa9",
          "文".encode(), "中".encode(), "字".encode(), b"\xe6", b"\x00", b"\xff"]
BYTE_WORDS = st.lists(st.one_of(st.sampled_from(CHUNKS), st.binary(max_size=3)),
                      max_size=20).map(b"".join)


@given(st.lists(BYTE_WORDS, min_size=1, max_size=20))
def test_byte_strings_through_a_byte_level_bpe(byte_level: Tokenizer,
                                               words: list[bytes]) -> None:
    """Random byte strings, as the byte-level pre-tokenizer hands them to the model (one
    character per byte): HF's ids, and the one-merge rounds' ids."""
    model = byte_level.model
    assert isinstance(model, BPEModel) and model.merges_well_formed()
    chars = bytes_to_unicode()
    texts = ["".join(chars[b] for b in w) for w in words]
    expected = hf_ids(model.vocab, model.merges, texts)
    assert merged(model, texts, every_occurrence=True)[0] == expected
    assert merged(model, texts, every_occurrence=False)[0] == expected
    assert model.encode_words(pl.Series(texts, dtype=pl.String)).to_list() == expected


@given(st.dictionaries(st.integers(0, (1 << 40) - 1), st.integers(0, 10**6), max_size=400),
       st.lists(st.integers(-(1 << 40), (1 << 40) - 1), max_size=200))
def test_pair_index_finds_every_key_and_nothing_else(table: dict[int, int],
                                                     others: list[int]) -> None:
    """The hashed pair index against a dict: every key's rank (keys that share a home slot
    included: hundreds of keys in a table of a few thousand slots), NO_PAIR for any other."""
    keys = np.array(sorted(table), dtype=np.int64)
    index = PairIndex.build(keys, np.array([table[k] for k in keys.tolist()], dtype=np.int64))
    queries = keys.tolist() + others + [-1, -(1 << 32) + 5]  # -1 is a free slot's mark
    got = index.lookup(np.array(queries, dtype=np.int64)).tolist()
    assert got == [table.get(q, int(NO_PAIR)) for q in queries]


def test_pair_index_keys_sharing_a_home_slot() -> None:
    """Five keys hashed to one slot sit in five consecutive slots; each is found, and a key
    hashed there that is not in the table probes past them to a free slot."""
    candidates = np.arange(200_000, dtype=np.int64)
    home = PairIndex.home(candidates, 10)  # 10 bits: the smallest table, as five keys get
    same = candidates[home == home[0]][:6]
    keys, absent = same[:5], int(same[5])
    index = PairIndex.build(keys, np.arange(5, dtype=np.int64) * 7)
    assert index.bits == 10 and index.max_probe == 4
    got = index.lookup(np.append(keys, absent)).tolist()
    assert got == [0, 7, 14, 21, 28, int(NO_PAIR)]
