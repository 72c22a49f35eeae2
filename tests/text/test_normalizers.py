"""Normalizers give exactly HF `tokenizers`' strings: on every code point, on real corpora and on
random Unicode text (less the documented Unicode-version differences, `NORM_DIFF`)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex
from tokenizers import normalizers as hfn

from tests.support.examples import examples
from tests.support.hf_text import (
    ALL_CODE_POINTS,
    NORM_DIFF,
    corpus_ids,
    corpus_path,
    read_lines,
    text_strategy,
)
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text import normalizers as N
from tokcolumnar.text.charsmap import nmt_nfkc_bytes


def assert_same(ours, theirs, texts):
    texts = list(texts)
    got = ours.apply(texts)
    for t, a in zip(texts, got):
        b = theirs.normalize_str(t)
        if a != b:
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise AssertionError(f"{ours}: differs at {k}: ours={a[k:k + 20]!r} "
                                 f"hf={b[k:k + 20]!r} (text {t[max(0, k - 10):k + 20]!r})")


def chunks(code_points, template="{c}", size=16384):
    out = []
    for i in range(0, len(code_points), size):
        out.append("".join(template.format(c=chr(c)) for c in code_points[i:i + size]))
    return out


# --- every code point: the embedded tables are HF's ----------------------------------------------

ALL_NORM_SAFE = [c for c in ALL_CODE_POINTS if c not in NORM_DIFF]

EVERY_CODE_POINT = {
    "clean_text": (N.BertNormalizer(True, False, False, False),
                   hfn.BertNormalizer(True, False, False, False), ALL_CODE_POINTS),
    "chinese_chars": (N.BertNormalizer(False, True, False, False),
                      hfn.BertNormalizer(False, True, False, False), ALL_CODE_POINTS),
    "strip_accents": (N.BertNormalizer(False, False, True, False),
                      hfn.BertNormalizer(False, False, True, False), ALL_NORM_SAFE),
    "lowercase": (N.Lowercase(), hfn.Lowercase(), ALL_CODE_POINTS),
    "bert_lowercase": (N.BertNormalizer(False, False, False, True),
                       hfn.BertNormalizer(False, False, False, True), ALL_CODE_POINTS),
    "StripAccents": (N.StripAccents(), hfn.StripAccents(), ALL_CODE_POINTS),
    "NFC": (N.NFC(), hfn.NFC(), ALL_NORM_SAFE),
    "NFD": (N.NFD(), hfn.NFD(), ALL_NORM_SAFE),
    "NFKC": (N.NFKC(), hfn.NFKC(), ALL_NORM_SAFE),
    "NFKD": (N.NFKD(), hfn.NFKD(), ALL_NORM_SAFE),
    "Strip": (N.Strip(), hfn.Strip(), ALL_CODE_POINTS),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVERY_CODE_POINT))
def test_every_code_point(name):
    ours, theirs, cps = EVERY_CODE_POINT[name]
    assert_same(ours, theirs, chunks(cps, "a{c}"))
    # next to combining marks, capital letters and sigma, which normalise in context
    assert_same(ours, theirs, chunks(cps[::7], "{c}\u0301\u0323A{c}Σ {c}"))


def test_normalization_diffs_are_real():
    """Each code point kept out of the property tests does differ from HF somewhere."""
    diffs = sorted(NORM_DIFF)
    contexts = ["{c}", "a{c}\u0334", "a\u0334{c}", "a{c}\u0316", "a\u0316{c}", "a{c}\u0301",
                "a\u0301{c}", "a{c}\u0345", "a\u0345{c}", "a{c}\u05b0", "a\u05b0{c}",
                "{c}\u0307", "{c}\U000113c9", "{c}\U000113bb", "{c}\U000113c2", "{c}\U000113b8",
                "{c}\U0001611e", "{c}\U0001611f", "{c}\U00016120", "{c}\U00016129",
                "{c}\U00016d67", "{c}\U00011930"]
    forms = [(N.NFD(), hfn.NFD()), (N.NFKD(), hfn.NFKD()), (N.NFC(), hfn.NFC()),
             (N.NFKC(), hfn.NFKC())]
    texts = [ctx.format(c=chr(c)) for c in diffs for ctx in contexts]
    differing = set()
    for ours, theirs in forms:
        for i, (a, t) in enumerate(zip(ours.apply(texts), texts)):
            if a != theirs.normalize_str(t):
                differing.add(diffs[i // len(contexts)])
    assert differing == set(diffs), sorted(hex(c) for c in set(diffs) - differing)[:10]


# --- real corpora ----------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
def test_corpus_lines(name):
    path, limit = corpus_path(name)
    lines = list(read_lines(path, limit))
    for ours, theirs in [(N.BertNormalizer(), hfn.BertNormalizer()),
                         (N.BertNormalizer(lowercase=False), hfn.BertNormalizer(lowercase=False)),
                         (N.NFKC(), hfn.NFKC())]:
        got = ours.apply(lines)
        bad = next(((t, a) for t, a in zip(lines, got) if a != theirs.normalize_str(t)), None)
        assert bad is None, (ours, bad)


# --- random text -------------------------------------------------------------------------------

FAST = examples(3)

# Normalisers that decompose or compose: the documented Unicode-version differences
# (`UNICODE_NORMALIZATION_DIFFS`) are left out of their inputs.
DECOMPOSING = [
    (N.BertNormalizer(), hfn.BertNormalizer()),
    (N.BertNormalizer(False, True, True, False), hfn.BertNormalizer(False, True, True, False)),
    (N.BertNormalizer(True, False, None, False), hfn.BertNormalizer(True, False, None, False)),
    (N.BertNormalizer(lowercase=True, strip_accents=False),
     hfn.BertNormalizer(lowercase=True, strip_accents=False)),
    (N.NFC(), hfn.NFC()), (N.NFKC(), hfn.NFKC()), (N.NFD(), hfn.NFD()), (N.NFKD(), hfn.NFKD()),
    (N.Sequence([N.NFD(), N.StripAccents(), N.Lowercase()]),
     hfn.Sequence([hfn.NFD(), hfn.StripAccents(), hfn.Lowercase()])),
    (N.Sequence([N.NFKD(), N.StripAccents()]), hfn.Sequence([hfn.NFKD(), hfn.StripAccents()])),
]
# Character-by-character normalisers: any text at all.
PLAIN = [
    (N.Lowercase(), hfn.Lowercase()),
    (N.StripAccents(), hfn.StripAccents()),
    (N.BertNormalizer(True, True, False, False), hfn.BertNormalizer(True, True, False, False)),
    (N.Strip(), hfn.Strip()), (N.Strip(True, False), hfn.Strip(True, False)),
    (N.Strip(False, True), hfn.Strip(False, True)),
    (N.Replace("a", "XY"), hfn.Replace("a", "XY")),
    (N.Replace("''", '"'), hfn.Replace("''", '"')),
    (N.Replace(" ", "▁"), hfn.Replace(" ", "▁")),
    (N.Replace(r"\s+", " ", regex=True), hfn.Replace(Regex(r"\s+"), " ")),
    (N.Replace(r"(\w)(\d)", "$2$1", regex=True), hfn.Replace(Regex(r"(\w)(\d)"), "$2$1")),
    (N.Replace(r"^ |x$", "$$", regex=True), hfn.Replace(Regex(r"^ |x$"), "$$")),
    (N.Prepend("▁"), hfn.Prepend("▁")),
    (N.Sequence([N.Strip(), N.Lowercase(), N.Prepend("_")]),
     hfn.Sequence([hfn.Strip(), hfn.Lowercase(), hfn.Prepend("_")])),
]


@FAST
@given(texts=st.lists(text_strategy(exclude=NORM_DIFF), min_size=1, max_size=6),
       pick=st.integers(0, len(DECOMPOSING) - 1))
def test_random_text_decomposing(texts, pick):
    ours, theirs = DECOMPOSING[pick]
    assert_same(ours, theirs, texts)


@FAST
@given(texts=st.lists(text_strategy(), min_size=1, max_size=6),
       pick=st.integers(0, len(PLAIN) - 1))
def test_random_text_plain(texts, pick):
    ours, theirs = PLAIN[pick]
    assert_same(ours, theirs, texts)


@pytest.mark.parametrize("pair", DECOMPOSING + PLAIN, ids=lambda p: type(p[0]).__name__)
def test_fixed_examples(pair):
    ours, theirs = pair
    assert_same(ours, theirs, ["Héllo\tWORLD 中文 ΣΑΣ ΟΔΟΣ.\x00x\u200b\ufffd", "İstanbul ǅ ﬁ ½",
                               "  Me llamó \r\n", "", "a1b2 c3", "ậ… Cụ thể"])


# --- JSON, names, errors -------------------------------------------------------------------------

HF_OBJECTS = [
    (N.BertNormalizer(), hfn.BertNormalizer()),
    (N.BertNormalizer(False, False, True, False), hfn.BertNormalizer(False, False, True, False)),
    (N.StripAccents(), hfn.StripAccents()), (N.Lowercase(), hfn.Lowercase()),
    (N.NFC(), hfn.NFC()), (N.NFD(), hfn.NFD()), (N.NFKC(), hfn.NFKC()), (N.NFKD(), hfn.NFKD()),
    (N.Replace("a", "b"), hfn.Replace("a", "b")),
    (N.Replace(r"\s+", " ", regex=True), hfn.Replace(Regex(r"\s+"), " ")),
    (N.Strip(True, False), hfn.Strip(True, False)), (N.Prepend("▁"), hfn.Prepend("▁")),
    (N.Sequence([N.NFD(), N.StripAccents()]), hfn.Sequence([hfn.NFD(), hfn.StripAccents()])),
]


@pytest.mark.parametrize("ours,theirs", HF_OBJECTS, ids=lambda x: type(x).__name__)
def test_hf_json_round_trip(ours, theirs):
    hf_json = json.loads(theirs.__getstate__())
    assert ours.to_hf() == hf_json
    again = N.normalizer_from_hf(hf_json)
    assert again.to_hf() == hf_json
    assert_same(again, theirs, ["Héllo  WÖRLD 中 ΣΑΣ\t"])


@pytest.mark.parametrize("name", N.NORMALIZER_NAMES)
@pytest.mark.parametrize("lowercase", [False, True])
def test_build_by_name(name, lowercase):
    norm = N.build_normalizer(name, lowercase)
    if name == "none" and not lowercase:
        assert norm is None
        return
    hf = hfn.Sequence([]) if norm is None else None
    hf = {"nfc": hfn.NFC(), "nfkc": hfn.NFKC(), "nfd": hfn.NFD(), "nfkd": hfn.NFKD(),
          "bert": hfn.BertNormalizer(lowercase=lowercase), "none": None,
          "nmt_nfkc": hfn.Precompiled(nmt_nfkc_bytes())}[name]
    if name != "bert" and lowercase:
        hf = hfn.Lowercase() if hf is None else hfn.Sequence([hf, hfn.Lowercase()])
    assert_same(norm, hf, ["Héllo WÖRLD ﬁ 中文 ΣΑΣ\x00"])
    assert norm.to_hf() == json.loads(hf.__getstate__())
    if name == "nmt_nfkc":  # SentencePiece's default rule, as SentencePiece applies it
        assert norm.apply(["ｶﾀｶﾅ ①"]) == ["カタカナ 1"]


def test_bad_names_and_patterns():
    with pytest.raises(TokcolumnarError):
        N.build_normalizer("nope")
    with pytest.raises(TokcolumnarError, match="look-around"):
        N.Replace(r"a(?=b)", "", regex=True)
    with pytest.raises(TokcolumnarError):
        N.normalizer_from_hf({"type": "Precompiled"})


def test_nulls_stay_null():
    df = pl.DataFrame({"t": ["A", None]})
    for norm in (N.BertNormalizer(), N.NFKC(), N.Strip(), N.Prepend()):
        assert df.select(norm.expr(pl.col("t"))).to_series().to_list()[1] is None


@pytest.mark.parametrize("pair", DECOMPOSING + PLAIN, ids=lambda p: type(p[0]).__name__)
def test_expression_keeps_the_column_name(pair):
    """The encoder normalizes with `with_columns(normalizer.expr(pl.col("text")))`: an
    expression named otherwise adds a column and leaves the text as it was (`Prepend` did,
    `lit + col` being named "literal": a tokenizer.json with it encoded unnormalized)."""
    ours, _ = pair
    frame = pl.DataFrame({"text": ["ab c", ""]}).with_columns(ours.expr(pl.col("text")))
    assert frame.columns == ["text"]
