"""Hypothesis strategies shared by the engine tests: small word-count corpora (small alphabets
make ties, runs such as `a a a`, and re-created tokens frequent) and BPE trainer options."""

from __future__ import annotations

import polars as pl
from hypothesis import strategies as st

ALPHABETS = ["ab", "abc", "abcd", "aé文🎉", "xyz_-"]


@st.composite
def corpora(draw) -> list[tuple[str, int]]:
    """A list of distinct (word, count) pairs in first-seen order."""
    alphabet = draw(st.sampled_from(ALPHABETS))
    words = draw(st.lists(st.text(alphabet=alphabet, min_size=1, max_size=9), min_size=1,
                          max_size=14, unique=True))
    counts = draw(st.lists(st.integers(1, 9), min_size=len(words), max_size=len(words)))
    return list(zip(words, counts))


def as_table(words: list[tuple[str, int]]) -> pl.DataFrame:
    """The `words` table (word, count, first_seen) of a corpus drawn by `corpora`."""
    return pl.DataFrame({"word": [w for w, _ in words], "count": [c for _, c in words]},
                        schema={"word": pl.String, "count": pl.UInt64}).with_row_index(
        "first_seen").select("word", "count", "first_seen")


@st.composite
def options(draw, max_token_length: bool = False) -> dict:
    """BPE trainer options (docs/architecture.md); `max_token_length` adds that option
    sometimes."""
    o = {}
    if draw(st.booleans()):
        o["min_frequency"] = draw(st.integers(0, 4))
    if draw(st.booleans()):
        o["special_tokens"] = draw(st.sampled_from([["<s>"], ["[UNK]", "a"], ["x", "<pad>"]]))
    if draw(st.booleans()):
        o["limit_alphabet"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        o["initial_alphabet"] = draw(st.sampled_from([["z"], ["a", "q"]]))
    marker = draw(st.sampled_from(["none", "prefix", "suffix", "eow", "prefix+suffix"]))
    if "prefix" in marker:
        o["continuing_subword_prefix"] = "##"
    if "suffix" in marker:
        o["end_of_word_suffix"] = "</w>"
    if marker == "eow":
        o["end_of_word_token"] = "</w>"
    if max_token_length and draw(st.integers(0, 3)) == 0:
        o["max_token_length"] = draw(st.integers(1, 4))
    return o
