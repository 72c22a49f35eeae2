"""Shared helpers for the HF-parity tests of the text components: corpus lines, all code points,
Hypothesis strategies."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.support.corpora import MEDIUM, MISSING, SMALL, corpus
from tokcolumnar.text.unicode_tables import UNICODE_NORMALIZATION_DIFFS

MEDIUM_LINES = 20_000


def split_lines(text: str) -> list[str]:
    """Lines as HF reads a training file: split after each '\\n', which is kept."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def encoded_rows(path: Any) -> list[str]:
    """The rows `tokcolumnar encode` reads from a text file: its lines without their line
    endings ('\n', then one '\r')."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    return [line.removesuffix("\n").removesuffix("\r") for line in split_lines(text)]


@cache
def read_lines(path: str, limit: int | None = None) -> tuple[str, ...]:
    with open(path, encoding="utf-8", newline="") as f:
        if limit is None:
            return tuple(split_lines(f.read()))
        lines: list[str] = []
        for line in f:
            lines.append(line)
            if len(lines) >= limit:
                break
        return tuple(lines)


def corpus_ids() -> list[Any]:
    """Every corpus the parity tests read, for `parametrize`: each small file whole, the first
    MEDIUM_LINES lines of each medium one (marked slow)."""
    return [f"small/{n}" for n in SMALL] + [
        pytest.param(f"medium/{n}", marks=pytest.mark.slow) for n in MEDIUM if n != MISSING]


def corpus_path(name: str) -> tuple[str, int | None]:
    """(path, line limit) of a corpus id; skips or fails the test when it is absent."""
    return str(corpus(name)), (MEDIUM_LINES if name.startswith("medium/") else None)


ALL_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


NORM_DIFF = frozenset(c for a, b in UNICODE_NORMALIZATION_DIFFS for c in range(a, b + 1))

# --- Hypothesis strategies ----------------------------------------------------------------------
WHITESPACE = (" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2007",
              "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b",
              "\x1c", "\x1f", "\ufeff")
CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'", "n't", "'S", "'LL", "’s", "''")
# Our internal marker / escape characters: they must behave like any other character.
MARKERS = tuple(chr(c) for c in range(0xFDD0, 0xFDD7))


def text_strategy(exclude: frozenset[int] = frozenset(), max_pieces: int = 12):
    """Random text: any code point of any plane, mixed with what makes pre-tokenizers and
    normalizers interesting (whitespace runs of every kind, contractions, digits of several
    scripts, combining marks, control and format characters, CJK, our marker characters)."""

    def ok(s: str) -> bool:
        return not any(ord(c) in exclude for c in s)

    any_char = st.characters(codec="utf-8")
    piece = st.one_of(
        st.text(any_char, min_size=1, max_size=4),
        st.text(st.sampled_from(WHITESPACE), min_size=1, max_size=5),
        st.sampled_from(CONTRACTIONS),
        st.text(st.sampled_from("0123456789٣٤۵߂३²½Ⅻ"), min_size=1, max_size=4),
        st.text(st.characters(categories=["Mn", "Mc", "Me"]), min_size=1, max_size=3),
        st.text(st.characters(categories=["Cc", "Cf", "Co", "Cn"]), min_size=1, max_size=2),
        st.text(st.characters(categories=["L"]), min_size=1, max_size=6),
        st.text(st.characters(categories=["P", "S"]), min_size=1, max_size=3),
        st.text(st.characters(min_codepoint=0x3400, max_codepoint=0x9FFF), min_size=1,
                max_size=3),
        st.text(st.sampled_from("aeiouAEIOUÉéÀİıΣσςßẞǅ\u0301\u0308\u0323 "), min_size=1,
                max_size=6),
        st.text(st.sampled_from(MARKERS + (" ", "a", "\n")), min_size=1, max_size=4),
        st.sampled_from(("\x00", "\ufffd", "\u200d", "\u200c", "\ufeff", "\r\n", "▁", "##")),
    )
    return st.lists(piece, max_size=max_pieces).map("".join).filter(ok)
