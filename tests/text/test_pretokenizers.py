"""Pre-tokenizers give exactly HF `tokenizers`' pieces: on real corpora, on every code point and
on random Unicode text."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers import normalizers as hfn
from tokenizers import pre_tokenizers as hfp

from tests.support.examples import examples
from tests.support.hf_text import (
    ALL_CODE_POINTS,
    CONTRACTIONS,
    NORM_DIFF,
    WHITESPACE,
    corpus_ids,
    corpus_path,
    read_lines,
    text_strategy,
)
from tests.support.markers import SLOW_ONLY
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text import pretokenizers as P
from tokcolumnar.text.bytelevel import BYTE_ALPHABET, byte_map
from tokcolumnar.text.normalizers import BertNormalizer
from tokcolumnar.text.regex import onig_to_rust

PAIRS = {
    "byte-level": (lambda: P.ByteLevel(), lambda: hfp.ByteLevel(add_prefix_space=False)),
    "whitespace": (lambda: P.Whitespace(), lambda: hfp.Whitespace()),
    "whitespace-split": (lambda: P.WhitespaceSplit(), lambda: hfp.WhitespaceSplit()),
    "bert": (lambda: P.BertPreTokenizer(), lambda: hfp.BertPreTokenizer()),
}


def hf_pieces(pre, texts):
    return [[p for p, _ in pre.pre_tokenize_str(t)] for t in texts]


def first_mismatch(texts, ours, theirs):
    """None, or a short description of the first difference."""
    for t, a, b in zip(texts, ours, theirs):
        if a != b:
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            where = "".join(a[:k])
            return (f"text[{len(where)}:] = {t[len(where):len(where) + 60]!r}\n"
                    f" ours={a[k:k + 4]!r}\n   hf={b[k:k + 4]!r}")
    return None


def assert_same(pre, hf, texts):
    texts = list(texts)
    ours = pre.apply(texts)
    theirs = hf_pieces(hf, texts)
    assert len(ours) == len(theirs)
    bad = first_mismatch(texts, ours, theirs)
    assert bad is None, bad


# --- real corpora ----------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
@pytest.mark.parametrize("kind", ["byte-level", "whitespace", "whitespace-split"])
def test_corpus_lines_match_hf(kind, name):
    path, limit = corpus_path(name)
    lines = read_lines(path, limit)
    ours_cls, hf_cls = PAIRS[kind]
    ours = ours_cls().apply(list(lines))
    theirs = hf_pieces(hf_cls(), lines)
    bad = first_mismatch(lines, ours, theirs)
    assert bad is None, bad
    assert sum(map(len, ours)) > 0


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
def test_corpus_lines_bert_matches_hf(name):
    path, limit = corpus_path(name)
    lines = list(read_lines(path, limit))
    hf_norm, hf_pre = hfn.BertNormalizer(), hfp.BertPreTokenizer()
    theirs = [[p for p, _ in hf_pre.pre_tokenize_str(hf_norm.normalize_str(t))] for t in lines]
    ours = pl.DataFrame({"t": lines}).select(
        P.BertPreTokenizer().expr(BertNormalizer().expr(pl.col("t")))).to_series().to_list()
    bad = first_mismatch(lines, ours, theirs)
    assert bad is None, bad


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
def test_corpus_chunk_equals_lines_when_not_line_sensitive(name):
    """`line_sensitive=False` promises: one multi-line chunk gives the words of its lines."""
    path, limit = corpus_path(name)
    lines = list(read_lines(path, limit))[:3000]
    chunk = "".join(lines)
    for pre in (P.Whitespace(), P.WhitespaceSplit(), P.BertPreTokenizer()):
        assert not pre.line_sensitive
        per_line = [w for ws in pre.apply(lines) for w in ws]
        assert pre.apply([chunk])[0] == per_line
    assert P.ByteLevel().line_sensitive
    assert "Ċ" in {w for ws in P.ByteLevel().apply(lines) for w in ws}


# --- every code point --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cls", [r"\p{L}", r"\p{N}", r"\s"])
def test_gpt2_classes_agree_with_oniguruma_on_every_code_point(cls):
    """The classes of the GPT-2 pattern: Polars' regex crate == HF's Oniguruma, all of Unicode."""
    text = "".join(map(chr, ALL_CODE_POINTS))
    theirs = {p for p, _ in hfp.Split(Regex(cls), "removed", invert=True).pre_tokenize_str(text)}
    chars = pl.Series([chr(c) for c in ALL_CODE_POINTS])
    ours = set(chars.filter(chars.str.contains(f"^{cls}$")).to_list())
    assert ours == theirs, sorted(hex(ord(c)) for c in ours ^ theirs)[:20]


@pytest.mark.slow
def test_every_code_point_byte_level():
    """Every code point (a fifth of them with HF's slow regex) alone, after a space, between
    letters, next to digits, before and after whitespace runs."""
    cps = ALL_CODE_POINTS[::5]
    chunks = []
    for i in range(0, len(cps), 2048):
        cs = [chr(c) for c in cps[i:i + 2048]]
        chunks.append("".join(f"{c} {c}x{c}1 {c}  {c}\t\n{c}'s" for c in cs))
    assert_same(P.ByteLevel(), hfp.ByteLevel(add_prefix_space=False), chunks)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["whitespace", pytest.param("whitespace-split", marks=SLOW_ONLY),
                                  "bert"])
def test_every_code_point(kind):
    ours_cls, hf_cls = PAIRS[kind]
    chunks = []
    for i in range(0, len(ALL_CODE_POINTS), 8192):
        cs = [chr(c) for c in ALL_CODE_POINTS[i:i + 8192]]
        chunks.append(" ".join(f"a{c}{c} 1{c}" for c in cs))
    assert_same(ours_cls(), hf_cls(), chunks)


@pytest.mark.slow
@pytest.mark.parametrize("individual", [False, pytest.param(True, marks=SLOW_ONLY)])
def test_every_code_point_digits_and_punctuation(individual):
    chunks = []
    for i in range(0, len(ALL_CODE_POINTS), 8192):
        cs = [chr(c) for c in ALL_CODE_POINTS[i:i + 8192]]
        chunks.append("".join(f"a{c}{c}1{c}b" for c in cs))
    assert_same(P.Digits(individual), hfp.Digits(individual), chunks)
    assert_same(P.Punctuation(), hfp.Punctuation(), chunks)


# --- random text -------------------------------------------------------------------------------

FAST = examples(4)


@pytest.mark.parametrize("kind", sorted(PAIRS))
@FAST
@given(texts=st.lists(text_strategy(), min_size=1, max_size=8))
def test_random_text_matches_hf(kind, texts):
    ours_cls, hf_cls = PAIRS[kind]
    assert_same(ours_cls(), hf_cls(), texts)


@FAST
@given(texts=st.lists(text_strategy(exclude=NORM_DIFF), min_size=1, max_size=8))
def test_random_text_bert_pipeline_matches_hf(texts):
    # BertNormalizer runs NFD: leave out the documented Unicode-version differences
    hf_norm = hfn.BertNormalizer()
    normalized = [hf_norm.normalize_str(t) for t in texts]
    assert BertNormalizer().apply(texts) == normalized
    assert_same(P.BertPreTokenizer(), hfp.BertPreTokenizer(), normalized)


@FAST
@given(text=st.lists(st.one_of(st.sampled_from(WHITESPACE), st.sampled_from(CONTRACTIONS),
                               st.sampled_from(["a", "Z", "1", ".", "\ufdd0", "\ufdd1", "é"])),
                     max_size=30).map("".join))
def test_whitespace_runs_and_contractions(text):
    assert_same(P.ByteLevel(), hfp.ByteLevel(add_prefix_space=False), [text])
    assert_same(P.ByteLevel(add_prefix_space=True), hfp.ByteLevel(add_prefix_space=True), [text])
    assert_same(P.ByteLevel(use_regex=False), hfp.ByteLevel(add_prefix_space=False,
                                                            use_regex=False), [text])


@FAST
@given(texts=st.lists(text_strategy(max_pieces=6), min_size=1, max_size=4),
       individual=st.booleans(),
       behavior=st.sampled_from(P.BEHAVIORS))
def test_random_text_digits_punctuation(texts, individual, behavior):
    assert_same(P.Digits(individual), hfp.Digits(individual), texts)
    assert_same(P.Punctuation(behavior), hfp.Punctuation(behavior), texts)


@FAST
@given(texts=st.lists(text_strategy(max_pieces=6), min_size=1, max_size=4),
       scheme=st.sampled_from(["always", "first", "never"]), split=st.booleans(),
       replacement=st.sampled_from(["▁", "_", "."]))
def test_random_text_metaspace(texts, scheme, split, replacement):
    ours = P.Metaspace(replacement, scheme, split)
    assert_same(ours, hfp.Metaspace(replacement, scheme, split), texts)


SPLIT_PATTERNS = [
    (" ", False), ("ab", False), ("'", False), ("\n", False), (".", False),
    (r"\s+", True), (r"\d+", True), (r"\w+|[^\w\s]+", True), (r"[aeiou]", True),
    (r"\p{L}+", True), (r"^a|b$", True), (r"[\w']+", True), (r"\W", True), ("a+b?", True),
    (r"[^\W\d]+", True), (r"\w\w?", True),
]


@FAST
@given(texts=st.lists(text_strategy(max_pieces=6), min_size=1, max_size=4),
       pattern=st.sampled_from(SPLIT_PATTERNS), behavior=st.sampled_from(P.BEHAVIORS),
       invert=st.booleans())
def test_random_text_split(texts, pattern, behavior, invert):
    text, is_regex = pattern
    hf_pattern = Regex(text) if is_regex else text
    assert_same(P.Split(text, behavior, invert, regex=is_regex),
                hfp.Split(hf_pattern, behavior, invert=invert), texts)


# --- composition, JSON, names ------------------------------------------------------------------


@FAST
@given(texts=st.lists(text_strategy(max_pieces=6), min_size=1, max_size=4))
def test_sequences_match_hf(texts):
    cases = [
        (P.Sequence([P.WhitespaceSplit(), P.Digits(True)]),
         hfp.Sequence([hfp.WhitespaceSplit(), hfp.Digits(True)])),
        (P.Sequence([P.Split(P.GPT2_PATTERN, "isolated", regex=True),
                     P.ByteLevel(use_regex=False)]),
         hfp.Sequence([hfp.Split(Regex(P.GPT2_PATTERN), "isolated"),
                       hfp.ByteLevel(add_prefix_space=False, use_regex=False)])),
        (P.Sequence([P.Punctuation(), P.ByteLevel()]),
         hfp.Sequence([hfp.Punctuation(), hfp.ByteLevel(add_prefix_space=False)])),
        (P.Sequence([P.Whitespace(), P.Metaspace(prepend_scheme="first")]),
         hfp.Sequence([hfp.Whitespace(), hfp.Metaspace(prepend_scheme="first")])),
    ]
    for ours, theirs in cases:
        assert_same(ours, theirs, texts)


@examples(1.2)
@given(texts=st.lists(text_strategy(max_pieces=6), min_size=1, max_size=4))
def test_split_and_word_expr_compose_to_expr(texts):
    for pre in (P.ByteLevel(), P.ByteLevel(add_prefix_space=True), P.BertPreTokenizer(),
                P.Sequence([P.Digits(), P.ByteLevel()]), P.Metaspace()):
        df = pl.DataFrame({"t": texts})
        full = df.select(pre.expr(pl.col("t"))).to_series().to_list()
        two = df.select(pre.split_expr(pl.col("t")).list.eval(
            pre.word_expr(pl.element()))).to_series().to_list()
        assert two == full


def test_byte_level_examples():
    bl = P.ByteLevel()
    assert bl.apply(["Hello there\nHello there", "Hello there       dear", "i⭢j", ""]) == [
        ["Hello", "Ġthere", "Ċ", "Hello", "Ġthere"], ["Hello", "Ġthere", "ĠĠĠĠĠĠ", "Ġdear"],
        ["i", "âŃ¢", "j"], []]
    assert P.ByteLevel(add_prefix_space=True).apply(["Hello", " x", ""]) == [
        ["ĠHello"], ["Ġx"], []]
    assert len(BYTE_ALPHABET) == 256 and byte_map(" \n") == "ĠĊ"


def test_nulls_stay_null():
    s = pl.Series("t", ["a b", None], dtype=pl.String).to_frame()
    for pre in (P.ByteLevel(), P.Whitespace(), P.BertPreTokenizer(), P.Metaspace()):
        out = s.select(pre.expr(pl.col("t"))).to_series().to_list()
        assert out[1] is None and out[0]


def test_split_marker_candidates():
    split = P.Split(r"\s", "isolated", regex=True)
    assert split.apply(["a \ufdd3b", "\ufdd4 \ufdd5"]) == [["a", " ", "\ufdd3b"],
                                                      ["\ufdd4", " ", "\ufdd5"]]
    every = "".join(chr(c) for c in [*range(0xFDD3, 0xFDF0), *range(0xE000, 0xF8FF)])
    assert split.apply([every + " x"]) == [[every, " ", "x"]]
    with pytest.raises(Exception, match="marker"):
        split.apply([every + "\uf8ff x"])


def test_unsupported_regex_is_a_clear_error():
    # look-around is run by Python's engine (tests/text/test_backtracking.py); a
    # back-reference by neither
    with pytest.raises(TokcolumnarError, match=r"\\1 is not supported"):
        P.Split(r"(a)\1", "isolated", regex=True)
    with pytest.raises(TokcolumnarError, match="invalid regex"):
        P.Split(r"(", "isolated", regex=True)
    assert onig_to_rust(r"\w[\w-]^") == (r"[\w\xB2\xB3\xB9\xBC-\xBE--\x{200C}\x{200D}]"
                                          r"[[\w--\x{200C}\x{200D}]-](?m:^)")


@pytest.fixture(scope="module")
def every_char():
    """All code points as one string and as a Series of one-character strings."""
    return "".join(map(chr, ALL_CODE_POINTS)), pl.Series([chr(c) for c in ALL_CODE_POINTS])


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [r"\w", r"[\w']", r"\W", r"[\W]", r"[^\w]", r"\d", r"\s",
                                     r".", r"[^\p{L}\s]"])
def test_translated_classes_agree_with_oniguruma_on_every_code_point(pattern, every_char):
    text, chars = every_char
    # the pieces left after removing the matches are the runs of characters outside the class
    gaps = hfp.Split(Regex(pattern), "removed").pre_tokenize_str(text)
    theirs = set(chars.to_list()) - set("".join(p for p, _ in gaps))
    ours = set(chars.filter(chars.str.contains(f"^(?:{onig_to_rust(pattern)})$")).to_list())
    assert ours == theirs, sorted(hex(ord(c)) for c in ours ^ theirs)[:20]


HF_OBJECTS = [
    (P.ByteLevel(), hfp.ByteLevel(add_prefix_space=False)),
    (P.ByteLevel(True, False, False), hfp.ByteLevel(True, False, False)),
    (P.BertPreTokenizer(), hfp.BertPreTokenizer()),
    (P.Whitespace(), hfp.Whitespace()),
    (P.WhitespaceSplit(), hfp.WhitespaceSplit()),
    (P.Metaspace(), hfp.Metaspace()),
    (P.Metaspace("_", "first", False), hfp.Metaspace("_", "first", False)),
    (P.Digits(True), hfp.Digits(True)),
    (P.Punctuation("contiguous"), hfp.Punctuation("contiguous")),
    (P.Split(" ", "removed"), hfp.Split(" ", "removed")),
    (P.Split(r"\d+", "merged_with_next", True, regex=True),
     hfp.Split(Regex(r"\d+"), "merged_with_next", invert=True)),
    (P.Sequence([P.Whitespace(), P.Digits()]), hfp.Sequence([hfp.Whitespace(), hfp.Digits()])),
]


@pytest.mark.parametrize("ours,theirs", HF_OBJECTS, ids=lambda x: type(x).__name__)
def test_hf_json_round_trip(ours, theirs):
    hf_json = json.loads(theirs.__getstate__())
    assert ours.to_hf() == hf_json
    again = P.pretokenizer_from_hf(hf_json)
    assert again.to_hf() == hf_json
    texts = ["Hello, World! 123 ab  cd\n", "  x'll 4.5 ▁y"]
    assert again.apply(texts) == hf_pieces(theirs, texts)


def test_legacy_metaspace_json():
    pre = P.pretokenizer_from_hf({"type": "Metaspace", "replacement": "▁",
                                  "add_prefix_space": False})
    assert isinstance(pre, P.Metaspace) and pre.prepend_scheme == "never"


@pytest.mark.parametrize("name", P.PRETOKENIZER_NAMES)
def test_build_by_name(name):
    pre = P.build_pretokenizer(name)
    assert isinstance(pre.apply(["Hello world 42!\n"])[0], list)
    if pre.to_hf() is not None:
        assert P.pretokenizer_from_hf(pre.to_hf()).to_hf() == pre.to_hf()
    with pytest.raises(TokcolumnarError):
        P.build_pretokenizer("nope")
