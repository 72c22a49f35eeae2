"""Extended grapheme clusters (UAX #29), as far as HF's `Precompiled` normalizer needs them.

HF's `Precompiled` walks the text by grapheme cluster (the `unicode-segmentation` crate) and
replaces a cluster of fewer than 6 UTF-8 bytes as a whole when a source of the char map is a
prefix of it, character by character otherwise (docs/unigram.md). Only clusters of 2+
characters and at most 5 bytes behave differently from single characters, so the rules that
only ever build clusters of 6+ bytes (regional indicator pairs, emoji ZWJ sequences, Indic
conjuncts: GB11-GB13, GB9c) are left out — a cluster they would extend is 6+ bytes either way,
or made of parts that are then each 6+ bytes or single characters. What remains: CR LF (GB3),
no break around controls (GB4, GB5), Hangul syllable sequences (GB6-GB8), Extend/ZWJ/SpacingMark
after anything (GB9, GB9a), anything after Prepend (GB9b).

The classes come from Python's `unicodedata` (general categories) plus the short lists of
UAX #29 that are not categories (Other_Grapheme_Extend, Prepend, the Mc characters that are not
SpacingMark). Characters newer than Python's Unicode version have no category there and count
as Other."""

from __future__ import annotations

import unicodedata

import numpy as np

OTHER, CR, LF, CONTROL, EXTEND, SPACING_MARK, PREPEND, L, V, T, LV, LVT = range(12)

_OTHER_GRAPHEME_EXTEND = [
    (0x09BE, 0x09BE), (0x09D7, 0x09D7), (0x0B3E, 0x0B3E), (0x0B57, 0x0B57), (0x0BBE, 0x0BBE),
    (0x0BD7, 0x0BD7), (0x0CC2, 0x0CC2), (0x0CD5, 0x0CD6), (0x0D3E, 0x0D3E), (0x0D57, 0x0D57),
    (0x0DCF, 0x0DCF), (0x0DDF, 0x0DDF), (0x1B35, 0x1B35), (0x200C, 0x200D), (0x302E, 0x302F),
    (0xFF9E, 0xFF9F), (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0),
    (0x114BD, 0x114BD), (0x115AF, 0x115AF), (0x11930, 0x11930), (0x1D165, 0x1D165),
    (0x1D16E, 0x1D172), (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F)]
_PREPEND = [(0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
            (0x08E2, 0x08E2), (0x0D4E, 0x0D4E), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
            (0x111C2, 0x111C3), (0x1193F, 0x1193F), (0x11941, 0x11941), (0x11A3A, 0x11A3A),
            (0x11A84, 0x11A89), (0x11D46, 0x11D46), (0x11F02, 0x11F02)]
# spacing combining marks (Mc) that are not SpacingMark (Myanmar, Tai Tham, ...), and the two
# Lo characters that are
_NOT_SPACING = [(0x102B, 0x102C), (0x1038, 0x1038), (0x1062, 0x1064), (0x1067, 0x106D),
                (0x1083, 0x1083), (0x1087, 0x108C), (0x108F, 0x108F), (0x109A, 0x109C),
                (0x1A61, 0x1A61), (0x1A63, 0x1A64), (0xAA7B, 0xAA7B), (0xAA7D, 0xAA7D),
                (0x11720, 0x11721)]
_SPACING_LO = (0x0E33, 0x0EB3)


def _in(cp: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= cp <= b for a, b in ranges)


def grapheme_class(c: str) -> int:
    """The UAX #29 Grapheme_Cluster_Break class of one character (the classes used here)."""
    cp = ord(c)
    if cp == 0x0D:
        return CR
    if cp == 0x0A:
        return LF
    if _in(cp, _PREPEND):
        return PREPEND
    if _in(cp, _OTHER_GRAPHEME_EXTEND):
        return EXTEND
    if 0xAC00 <= cp <= 0xD7A3:
        return LV if (cp - 0xAC00) % 28 == 0 else LVT
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return L
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return V
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return T
    cat = unicodedata.category(c)
    if cat in ("Mn", "Me"):
        return EXTEND
    if cat == "Mc" or cp in _SPACING_LO:
        return OTHER if _in(cp, _NOT_SPACING) else SPACING_MARK
    if cat in ("Cc", "Zl", "Zp", "Cf"):
        return CONTROL
    return OTHER


def joined(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether there is no cluster break between characters of classes `a` and `b` (one
    after the other)."""
    control = (a == CR) | (a == LF) | (a == CONTROL)
    control_b = (b == CR) | (b == LF) | (b == CONTROL)
    hangul = (((a == L) & ((b == L) | (b == V) | (b == LV) | (b == LVT)))
              | (((a == LV) | (a == V)) & ((b == V) | (b == T)))
              | (((a == LVT) | (a == T)) & (b == T)))
    extend = (b == EXTEND) | (b == SPACING_MARK) | (a == PREPEND) | hangul
    return ((a == CR) & (b == LF)) | (~control & ~control_b & extend)
