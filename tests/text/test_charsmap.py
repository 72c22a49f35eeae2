"""SentencePiece's compiled normalization rules (`text.charsmap`, `normalizers.Precompiled`):
`nmt_nfkc` applied as SentencePiece's own normalizer applies it, and the char map read from and
written to tokenizer.json as HF reads it."""

from __future__ import annotations

import base64
import struct

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.corpora import SMALL, corpus
from tokcolumnar.errors import TokcolumnarValueError
from tokcolumnar.text.charsmap import decode_charsmap, nmt_nfkc_bytes
from tokcolumnar.text.normalizers import Precompiled, build_normalizer, normalizer_from_hf
from tokcolumnar.training.unigram import sentencepiece_whitespace


def ours(lines: list[str], restricted: bool = False) -> list[str]:
    """nmt_nfkc, then SentencePiece's whitespace handling (what spm_train trains on); with
    `restricted`, the rule's sources cut to those that start with a character of `lines`."""
    norm = build_normalizer("nmt_nfkc")
    assert isinstance(norm, Precompiled)
    if restricted:
        norm = norm.for_characters(set("".join(lines)))
    return (pl.Series("t", lines, dtype=pl.String).to_frame()
            .select(sentencepiece_whitespace(norm.expr(pl.col("t")))).to_series().to_list())


def theirs(lines: list[str]) -> list[str]:
    import sentencepiece as spm

    ref = spm.SentencePieceNormalizer(rule_name="nmt_nfkc")
    return [ref.Normalize(line) for line in lines]


# what nmt_nfkc changes: compatibility forms, control characters, other spaces, composition
# of a base and a combining mark (a 2-character source), full-width forms, ligatures
TRICKY = ["ｱｲｳ ﾃﾞｽ", "ﬁne ﬂow", "a\u200bb\tc\u3000d", "e\u0301 o\u0308 A\u030a", "①②③ ㍿",
          "\x01x\x7f\u00a0y", "  ▁a▁  ", "Ⅻ ½ ﹏", "가각\u1100\u1161", "ᾊ\u0345"]


def test_nmt_nfkc_as_sentencepiece() -> None:
    assert ours(TRICKY) == theirs(TRICKY)
    assert ours(TRICKY, restricted=True) == theirs(TRICKY)


def test_restricted_rule_keeps_the_texts_sources() -> None:
    """`Precompiled.for_characters`: the sources that can meet the text (a composition
    sequence starting with one of its characters included), not the others."""
    norm = build_normalizer("nmt_nfkc")
    assert isinstance(norm, Precompiled)
    cut = norm.for_characters(set("ｱe"))
    assert "ｱ" in cut._sources and "e\u0301" in cut._sources
    assert "ﬁ" not in cut._sources and len(cut._sources) < len(norm._sources) // 100
    assert cut.to_hf() == norm.to_hf()


@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
                        max_size=12), max_size=20))
@settings(max_examples=20, deadline=None)
def test_nmt_nfkc_random_text(lines: list[str]) -> None:
    lines = [line.replace("\n", " ").replace("\x00", "") for line in lines]
    assert ours(lines) == ours(lines, restricted=True) == theirs(lines)


@pytest.mark.corpus
@pytest.mark.parametrize("name", SMALL)
def test_nmt_nfkc_on_small_corpora(name: str) -> None:
    """Every line of every small corpus normalizes as SentencePiece normalizes it."""
    lines = corpus(f"small/{name}").read_text(encoding="utf-8").split("\n")
    assert ours(lines) == ours(lines, restricted=True) == theirs(lines)


def test_charsmap_table() -> None:
    table = decode_charsmap(nmt_nfkc_bytes())
    assert table["ｱ"] == "ア" and table["\ufb01"] == "fi" and table["\x01"] == ""
    assert table["e\u0301"] == "é"  # a source of two characters: a longest match
    assert len(table) > 200_000


@pytest.mark.parametrize("data,needle", [
    (b"\x01", "too short"), (struct.pack("<I", 7) + b"abc", "bad trie size"),
    # the root (offset 0) has a child by byte 1 (unit 1) with a leaf whose value unit lies
    # outside the trie, is its own child, or whose value points past the replacements
    (struct.pack("<I", 8) + struct.pack("<II", 0, (1000 << 10) | 0x100 | 1), "bad trie"),
    (struct.pack("<I", 12) + struct.pack("<III", 0, (1 << 10) | 0x100 | 1, 0) + b"\0",
     "a cycle"),
    (struct.pack("<I", 12) + struct.pack("<III", 0, (3 << 10) | 0x100 | 1, 5) + b"x",
     "bad replacement offset")])
def test_bad_charsmap_refused(data: bytes, needle: str) -> None:
    with pytest.raises(TokcolumnarValueError, match=needle):
        decode_charsmap(data)


def test_precompiled_as_hf() -> None:
    """tokenizer.json's `Precompiled` (base64) read and written back; HF's normalizer gives
    the same text as ours, but on a grapheme of 6+ UTF-8 bytes that is itself a source of the
    map (a half-width kana and its voiced mark, a Hangul syllable in conjoining jamo): HF maps
    such a grapheme character by character, SentencePiece (and we) by its longest source."""
    from tokenizers.normalizers import Precompiled as HFPrecompiled

    data = nmt_nfkc_bytes()
    d = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(data).decode()}
    norm = normalizer_from_hf(d)
    assert isinstance(norm, Precompiled) and norm.to_hf() == d
    hf = HFPrecompiled(data)
    grapheme = {"ｱｲｳ ﾃﾞｽ", "가각\u1100\u1161"}
    for text, got in zip(TRICKY, norm.apply(TRICKY)):
        assert (got == hf.normalize_str(text)) == (text not in grapheme), text
    with pytest.raises(TokcolumnarValueError, match="not base64"):
        normalizer_from_hf({"type": "Precompiled", "precompiled_charsmap": "@@"})
