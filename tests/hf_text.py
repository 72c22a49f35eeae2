"""Shared helpers for the HF-parity tests: corpus lines, all code points, Hypothesis strategies."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest
from hypothesis import strategies as st

from tokcolumnar.normalizers import UNICODE_NORMALIZATION_DIFFS

ROOT = Path(__file__).resolve().parent.parent
MEDIUM_LINES = 20_000


def corpora_dir() -> Path:
    d = Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))
    if not d.is_dir():
        pytest.skip(f"corpora directory {d} not found (set TOKCOLUMNAR_CORPORA)")
    return d


def split_lines(text: str) -> list[str]:
    """Lines as HF reads a training file: split after each '\\n', which is kept."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


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


def corpus_files() -> list[tuple[str, int | None]]:
    """(path, line limit) for every corpus file the parity tests read."""
    d = corpora_dir()
    files = [(str(p), None) for p in sorted((d / "small").glob("*.txt"))]
    files += [(str(p), MEDIUM_LINES) for p in sorted((d / "medium").glob("*.txt"))]
    if not files:
        pytest.skip(f"no corpus files under {d}")
    return files


def corpus_ids() -> list[str]:
    d = Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))
    names = [f"small/{p.name}" for p in sorted((d / "small").glob("*.txt"))]
    names += [f"medium/{p.name}" for p in sorted((d / "medium").glob("*.txt"))]
    return names or ["missing"]


def corpus_path(name: str) -> tuple[str, int | None]:
    d = corpora_dir()
    if name == "missing":
        pytest.skip(f"no corpus files under {d}")
    return str(d / name), (MEDIUM_LINES if name.startswith("medium/") else None)


ALL_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def in_table(cp: int, table: tuple[tuple[int, int], ...]) -> bool:
    return any(a <= cp <= b for a, b in table)


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
