"""HF regexes with look-around run by Python's engine (`text/backtracking.py`): HF's own
`Split(Regex(p), behavior, invert)` gives the same pieces on random text (every Unicode
category, whitespace runs, digits of many scripts, case changes), on every code point and on
the corpora, for every behavior; and what has no exact translation is refused in one line."""

from __future__ import annotations

import sys

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers import pre_tokenizers as hfp

from tests.support.hf_text import (
    ALL_CODE_POINTS,
    corpus_ids,
    corpus_path,
    read_lines,
    text_strategy,
)
from tests.support.markers import heavy
from tests.text.test_llm_split import EDGES
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text import pretokenizers as P
from tokcolumnar.text.backtracking import onig_to_python

#: Regexes with look-around, each exercising a translated construct: the LLM style with a
#: look-ahead digit grouping; look-behind at a case change (empty matches); line anchors and
#: \z, \Z; an atomic group and a possessive quantifier; negated properties and \w \d \h in
#: and out of classes; case-insensitive groups.
PATTERNS = [
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,2}(?=(?:\p{N}{2})*(?!\p{N}))"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?<=\p{Ll})(?=\p{Lu})",
    r"^\s+|\s+$|\p{Lu}(?=\p{Ll})|\s+\z|x\Z",
    r"(?>\p{L}+)\d*+|[\w.]?\W(?!\w)" if sys.version_info >= (3, 11) else r"\p{L}+\W(?!\w)",
    r"\P{L}+(?<![\d\s])|[\h\p{^N}]{2}(?=\S)",
    r"(?i:kelvin|k|'re)(?!\p{M})",
]
BEHAVIORS = ["isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous"]


def assert_same(pattern: str, behavior: str, invert: bool, texts: list[str | None]) -> None:
    ours = P.Split(pattern, behavior, invert, True)
    hf = hfp.Split(Regex(pattern), behavior, invert=invert)
    got = ours.apply(texts)
    for text, pieces in zip(texts, got):
        want = [] if text is None else [p for p, _ in hf.pre_tokenize_str(text)]
        assert (pieces or []) == want, f"{pattern!r} {behavior} {invert}: {text!r}"


@pytest.mark.parametrize("pattern", PATTERNS)
@given(texts=st.lists(st.one_of(st.none(), text_strategy(), EDGES), min_size=1, max_size=6),
       behavior=st.sampled_from(BEHAVIORS), invert=st.booleans())
def test_random_texts_match_hf(pattern, texts, behavior, invert):
    assert_same(pattern, behavior, invert, texts)


@pytest.mark.parametrize("pattern", heavy(
    PATTERNS, full=lambda p: p == PATTERNS[1], fast=lambda p: False))  # 5-40 s each
def test_every_code_point_matches_hf(pattern):
    texts = []
    for low in range(0, len(ALL_CODE_POINTS), 1 << 13):
        block = ALL_CODE_POINTS[low:low + (1 << 13)]
        texts.append("".join(f"{chr(c)}a{chr(c)}A{chr(c)}1{chr(c)},{chr(c)} {chr(c)}'{chr(c)}"
                             for c in block))
    assert_same(pattern, "isolated", False, texts)


@pytest.mark.corpus
@pytest.mark.parametrize("corpus", corpus_ids())
def test_corpus_lines_match_hf(corpus):
    path, limit = corpus_path(corpus)
    assert_same(PATTERNS[0], "isolated", False, list(read_lines(path, limit)))


@pytest.mark.parametrize("pattern,what", [
    (r"(a)\1", "\\1"),
    (r"(?<q>')x\k<q>(?=y)", "\\k"),
    (r"\bx(?=y)", "\\b"),
    (r"[a[b]](?=c)", "a nested class"),
    (r"[a-z&&[^aeiou]](?=c)", "a nested class"),
    (r"a{1,3}+(?=b)", "X{n,m}+"),
    (r"(?i:ß)(?!x)", "case folding"),  # Oniguruma's (?i:ß) matches SS (found by Hypothesis)
    (r"(?i:st)(?!x)", "case folding"),  # and (?i:st) the ligature ﬆ
])
def test_untranslatable_is_refused(pattern, what):
    with pytest.raises(TokcolumnarError, match="cannot be run exactly|is not supported") as e:
        P.Split(pattern, "isolated", False, True)
    assert what in str(e.value)


def test_invalid_regex_is_one_error():
    with pytest.raises(TokcolumnarError, match="invalid regex"):
        P.Split(r"(?=a", "isolated", False, True)
    with pytest.raises(TokcolumnarError, match="invalid regex"):
        P.Split(r"\p{Nope}(?=a)", "isolated", False, True)


def test_translation():
    assert onig_to_python(r"^a$\z\Z\x{1F600}") == r"(?m:^)a(?m:$)\Z(?=\n?\Z)\U0001F600"
    # a class escape is its code points, as ranges
    assert onig_to_python(r"[\d]").startswith(r"[\U00000030-\U00000039\U00000660-")


def test_expression_runs_once_per_distinct_text():
    split = P.Split(r"\s+(?!\S)|\s+", "isolated", False, True)
    texts = pl.Series("t", ["a  b", None, "a  b", "", "x"], dtype=pl.String)
    out = texts.to_frame().select(split.split_expr(pl.col("t"))).to_series().to_list()
    assert out == [["a", " ", " ", "b"], None, ["a", " ", " ", "b"], [], ["x"]]
