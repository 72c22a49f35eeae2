"""The LLM patterns' split (`text/llm_split.py`) gives exactly HF's pieces of
`Split(Regex(p), "isolated")` for each named pattern (cl100k = Llama 3's, o200k, qwen2): on
random text (every Unicode category, CR/LF runs, digits of many scripts, apostrophes in every
case), on every code point, and on the corpora."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
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
from tests.support.markers import SLOW_ONLY
from tokcolumnar.text.llm_split import llm_pieces, llm_split_expr
from tokcolumnar.text.patterns import PATTERNS, named_pattern, recognise

NAMES = ("cl100k", "o200k", "qwen2")
_HF = {name: hfp.Split(Regex(PATTERNS[name].regex), "isolated") for name in NAMES}


def hf_pieces(name: str, texts: list[str | None]) -> list[list[str]]:
    return [[] if t is None else [p for p, _ in _HF[name].pre_tokenize_str(t)] for t in texts]


def our_pieces(name: str, texts: list[str | None]) -> list[list[str]]:
    per_text, flat = llm_pieces(pl.Series("text", texts, dtype=pl.String), PATTERNS[name])
    assert len(per_text) == len(texts)
    bounds = np.concatenate([[0], np.cumsum(per_text)])
    assert bounds[-1] == len(flat)
    pieces = flat.to_list()
    return [pieces[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def assert_same(name: str, texts: list[str | None]) -> None:
    ours, theirs = our_pieces(name, texts), hf_pieces(name, texts)
    for text, a, b in zip(texts, ours, theirs):
        assert a == b, f"{name}: text {text!r}: ours {a!r}, hf {b!r}"


# apostrophes before the contraction letters in every case (and their case-folding kin: long s,
# Kelvin sign, ligatures), line breaks in runs, digits of many scripts, case changes (o200k)
APOSTROPHES = [a + b for a in ("'", "’", "''") for b in (
    "s", "S", "ſ", "t", "T", "re", "RE", "Re", "rE", "ve", "VE", "m", "M", "ll", "LL", "lL", "d",
    "D", "K", "ﬅ", "ß", "x", "")]
EDGES = st.lists(st.one_of(
    st.sampled_from(WHITESPACE), st.sampled_from(CONTRACTIONS), st.sampled_from(APOSTROPHES),
    st.text(st.sampled_from(" \t\r\n\u3000\xa0"), min_size=1, max_size=5),
    st.text(st.sampled_from("0123456789٣٤۵߂३²½Ⅻ௰𝟘"), min_size=1, max_size=7),
    st.text(st.sampled_from("aAbBǅǈΣσςİıßẞ中ʰ\u0301\u0915\u093f/.,!'"), min_size=1, max_size=6),
    st.text(st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"]),
            min_size=1, max_size=4),
    st.sampled_from(list("astmdrevlSx1٣,!'\u3000中。 /"))), max_size=16).map("".join)


@pytest.mark.parametrize("name", NAMES)
@given(texts=st.lists(st.one_of(st.none(), text_strategy(), EDGES), min_size=1, max_size=8))
def test_random_texts_match_hf(name: str, texts: list[str | None]) -> None:
    assert_same(name, texts)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("text", [
    "", " ", "  ", "a", " a", "  a", "\na", "\n a", " \na", "a ", "a  ", "don't", "x's", " 's",
    "\n's", "''s", "'s'll", "'", "'r", "'re", "'rex", "a\t\tb", "a \u3000 b", "1a", "a1",
    "中文。中", "\u3000\u3000\u3000（", "it's 2'll ' 're", "'S", "a\r\n b", "a  \n  b",
    "\t\t,b", " ,b", "..b", "1234567", "x'ſ 'ſ", "HTMLParser", "ABCdef", "abcDEF", "A中B.",
    "ab中C", "x.\n/y", "  \n\n  \n x", "a \n", "a\n\n", " \r\n\r\n  ", "WE'LL we'Re",
    "\u0301a", "x\u0301Y", "\u3000\u3000x",
])
def test_edge_cases_match_hf(name: str, text: str) -> None:
    assert_same(name, [text, None, text, ""])


@pytest.mark.slow
# the full run: cl100k. With TOKCOLUMNAR_SLOW=1 also qwen2 (cl100k's split with one digit a
# piece: the same code) and o200k (~90 s: the regex crate's o200k classes on every code point;
# random texts of every category check it in every tier)
@pytest.mark.parametrize("name", [n if n == "cl100k" else pytest.param(n, marks=SLOW_ONLY)
                                  for n in NAMES])
def test_every_code_point_matches_hf(name: str) -> None:
    """Each code point between letters of both cases, numbers, punctuation, apostrophes and
    spaces: its class (and case) decides every boundary around it."""
    texts = []
    for low in range(0, len(ALL_CODE_POINTS), 1 << 13):
        block = ALL_CODE_POINTS[low:low + (1 << 13)]
        texts.append("".join(f"{chr(c)}a{chr(c)}A{chr(c)}1{chr(c)},{chr(c)} {chr(c)}'{chr(c)}"
                             for c in block))
    assert_same(name, texts)


@pytest.mark.corpus
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("corpus", corpus_ids())
def test_corpus_lines_match_hf(name: str, corpus: str) -> None:
    path, limit = corpus_path(corpus)
    assert_same(name, list(read_lines(path, limit)))


def test_expression_gives_the_lists() -> None:
    texts = pl.Series("t", ["it's  a\n", None, "", "x  y"], dtype=pl.String)
    out = texts.to_frame().select(llm_split_expr(pl.col("t"), PATTERNS["cl100k"])).to_series()
    assert out.to_list() == [["it", "'s", " ", " a", "\n"], [], [], ["x", " ", " y"]]


def test_names_and_aliases() -> None:
    assert named_pattern("llama3") is PATTERNS["cl100k"]
    assert named_pattern("GPT4o") is PATTERNS["o200k"]
    assert recognise(PATTERNS["qwen2"].regex) is PATTERNS["qwen2"]
    with pytest.raises(ValueError, match="unknown pattern"):
        named_pattern("gpt5")


CHUNK_TEXT = st.lists(st.sampled_from(
    [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "\u2028", "\x0b", "a", "B", "É", "東",
     "。", ".", ",", "/", "'", "'s", "'LL", "1", "-", "\u0301", "\ufdd0"]),
    max_size=30).map("".join)


@pytest.mark.parametrize("name", NAMES)
@given(texts=st.lists(st.one_of(CHUNK_TEXT, EDGES), min_size=1, max_size=10),
       offset=st.integers(0, 50))
def test_counting_through_chunks_gives_hf_pieces(name, texts, offset):
    """Training counts the distinct chunks (lines cut before ASCII spaces, `chunk_expr`):
    the words, counts and first positions are those of HF's pieces of the whole texts."""
    from collections import Counter

    from tokcolumnar.corpus.counting import count_chunk
    from tokcolumnar.text.pretokenizers import PatternByteLevel

    pre = PatternByteLevel(use_regex=False, pattern=PATTERNS[name])
    series = pl.Series("text", [*texts, None], dtype=pl.String)
    assert pre.chunk_expr(pl.col("text")) is not None
    direct = [p for pieces in hf_pieces(name, [*texts, None]) for p in pieces]
    want_first: dict[str, int] = {}
    for position, word in enumerate(direct):
        want_first.setdefault(word, offset + position)
    part, n = count_chunk(series, None, pre, offset)
    assert n == len(direct)
    assert dict(zip(part["word"], part["count"])) == Counter(direct)
    assert dict(zip(part["word"], part["first_seen"])) == want_first


def test_tiktoken_possessive_cl100k_is_refused_by_name():
    """tiktoken 0.7+ ships cl100k_base with possessive quantifiers and `\\s++$`: not the same
    split (and HF reads it otherwise again), refused with a message saying so."""
    import regex

    from tokcolumnar.text.patterns import CL100K, CL100K_TIKTOKEN_POSSESSIVE
    from tokcolumnar.text.pretokenizers import Split

    text = "a  \n  "
    assert regex.findall(CL100K, text) != regex.findall(CL100K_TIKTOKEN_POSSESSIVE, text)
    with pytest.raises(ValueError, match="possessive rewrite"):
        Split(CL100K_TIKTOKEN_POSSESSIVE, "isolated", False, True)
