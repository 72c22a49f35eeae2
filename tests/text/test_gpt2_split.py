"""The GPT-2 split on code points (`text/gpt2_split.py`) gives exactly HF's pieces of the GPT-2
pattern (`Split(Regex(GPT2_PATTERN), "isolated")`): on random text, on every code point, on the
corpora; and the encoder's batches that hold our escape characters take the expression."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers import pre_tokenizers as hfp

from tests.support.hf_text import (
    ALL_CODE_POINTS,
    CONTRACTIONS,
    WHITESPACE,
    corpus_ids,
    corpus_path,
    read_lines,
    text_strategy,
)
from tokcolumnar.text import pretokenizers as P
from tokcolumnar.text.bytelevel import byte_map
from tokcolumnar.text.gpt2_split import gpt2_pieces

HF_SPLIT = hfp.Split(Regex(P.GPT2_PATTERN), "isolated")


def hf_pieces(texts: list[str | None]) -> list[list[str]]:
    return [[] if t is None else [p for p, _ in HF_SPLIT.pre_tokenize_str(t)] for t in texts]


def our_pieces(texts: list[str | None]) -> list[list[str]]:
    found = gpt2_pieces(pl.Series("text", texts, dtype=pl.String))
    assert found is not None
    per_text, flat = found
    assert len(per_text) == len(texts)
    bounds = np.concatenate([[0], np.cumsum(per_text)])
    assert bounds[-1] == len(flat)
    pieces = flat.to_list()
    return [pieces[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def assert_same(texts: list[str | None]) -> None:
    ours, theirs = our_pieces(texts), hf_pieces(texts)
    for text, a, b in zip(texts, ours, theirs):
        assert a == b, f"text {text!r}: ours {a!r}, hf {b!r}"


# the characters the split's rules turn on: whitespace of every kind before letters, numbers
# and others; apostrophes and contraction letters; ends of texts
EDGES = st.lists(st.one_of(st.sampled_from(WHITESPACE), st.sampled_from(CONTRACTIONS),
                           st.sampled_from(list("astmdrevlSx1٣,!'\u3000中。 "))),
                 max_size=14).map("".join)


@given(st.lists(st.one_of(st.none(), text_strategy(), EDGES), min_size=1, max_size=8))
def test_random_texts_match_hf(texts: list[str | None]) -> None:
    assert_same(texts)


@pytest.mark.parametrize("text", [
    "", " ", "  ", "a", " a", "  a", "\na", "\n a", " \na", "a ", "a  ", "don't", "x's", " 's",
    "\n's", "''s", "'s'll", "'", "'r", "'re", "'rex", "a\t\tb", "a \u3000 b", "1a", "a1",
    "中文。中", "\u3000\u3000\u3000（", "it's 2'll ' 're", "'S", "a\r\n b",
])
def test_edge_cases_match_hf(text: str) -> None:
    assert_same([text, None, text])


@pytest.mark.slow
def test_every_code_point_matches_hf() -> None:
    """Each code point between letters, numbers, punctuation and spaces: its class decides
    every boundary around it."""
    texts = []
    for low in range(0, len(ALL_CODE_POINTS), 1 << 14):
        block = ALL_CODE_POINTS[low:low + (1 << 14)]
        texts.append("".join(f"{chr(c)}a{chr(c)}1{chr(c)},{chr(c)} {chr(c)}" for c in block))
    assert_same(texts)


@settings(max_examples=30)
@given(st.lists(EDGES, min_size=1, max_size=4), st.sampled_from(P._MARK + P._ESC + P._ESC_MARK))
def test_a_batch_with_our_escape_characters_is_refused(texts: list[str], marker: str) -> None:
    """The ByteLevel pre-tokenizer leaves such a batch to its expression (whose pieces, the
    word cache's keys, are escaped); others take the kernel, with the expression's pieces."""
    pre = P.ByteLevel()
    with_marker = pl.Series("text", [*texts, "a" + marker], dtype=pl.String)
    assert pre.encode_split_flat(with_marker) is None
    plain = pl.Series("text", texts, dtype=pl.String)
    per_text, flat = pre.encode_split_flat(plain)
    split = plain.to_frame().select(pre.encode_split_expr(pl.col("text"))).to_series()
    assert per_text.tolist() == split.list.len().to_list()
    assert flat.to_list() == split.explode().drop_nulls().to_list()


@given(st.lists(st.one_of(st.none(), EDGES), min_size=1, max_size=6))
def test_prefix_space_matches_hf(texts: list[str | None]) -> None:
    found = P.ByteLevel(add_prefix_space=True).encode_split_flat(
        pl.Series("text", texts, dtype=pl.String))
    assert found is not None
    per_text, flat = found
    # HF ByteLevel(add_prefix_space=True) gives byte-mapped pieces: ours are mapped the same way
    hf_byte_level = hfp.ByteLevel(add_prefix_space=True)
    theirs = [[] if t is None else [p for p, _ in hf_byte_level.pre_tokenize_str(t)]
              for t in texts]
    pieces = [byte_map(p) for p in flat.to_list()]
    bounds = np.concatenate([[0], np.cumsum(per_text)])
    assert [pieces[a:b] for a, b in zip(bounds[:-1], bounds[1:])] == theirs


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
def test_corpus_lines_match_hf(name: str) -> None:
    path, limit = corpus_path(name)
    lines = list(read_lines(path, limit))
    assert_same(lines)
