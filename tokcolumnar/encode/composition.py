"""Offsets through NFC and NFKC (Qwen2's normalizer is NFC): which original character each
normalized character is aligned to, as HF aligns it (docs/encode.md, "Offsets").

NFC is not character-local — `e` + U+0301 becomes `é` — so `encode.offsets`' per-character
table cannot say it. HF normalizes with the `unicode-normalization-alignments` crate, which
gives each output character a *change*: 0 for a character that replaces one original
character, -n for one that replaces n + 1 of them (a composition), +1 for one inserted after
the previous (a decomposition's second character). `NormalizedString::transform` then walks
the original characters in order: a character with change <= 0 is aligned to the next
original character and consumes 1 - change of them; one with change > 0 to the last one
consumed. So each normalized character belongs to one original character, and the text's
alignment is a count per original character (0 for a combining mark composed into the
character before it), which `offsets.NormAlignment` turns into positions.

`composed_counts` follows the crate's three steps with Python's `unicodedata`: the canonical
(or compatibility) decomposition of each character, a change of +1 on each character a
decomposition adds; the canonical reordering of combining marks (each mark keeps its change);
the canonical composition, where a mark composed into its starter adds its change - 1 to the
starter's. It runs only on the texts the normalizer changes (NFC leaves most text alone), once
per distinct text. Tests: tests/encode/test_composition.py against HF's offsets."""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

_SBASE, _LBASE, _VBASE, _TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_LCOUNT, _VCOUNT, _TCOUNT = 19, 21, 28
_NCOUNT = _VCOUNT * _TCOUNT
_SCOUNT = _LCOUNT * _NCOUNT


@functools.lru_cache(maxsize=1 << 16)
def _decomposition(c: str, compat: bool) -> str:
    """The full canonical (`compat`: compatibility) decomposition of one character."""
    cp = ord(c)
    if _SBASE <= cp < _SBASE + _SCOUNT:  # Hangul syllables: decomposed by arithmetic
        s = cp - _SBASE
        t = s % _TCOUNT
        out = chr(_LBASE + s // _NCOUNT) + chr(_VBASE + (s % _NCOUNT) // _TCOUNT)
        return out + (chr(_TBASE + t) if t else "")
    return unicodedata.normalize("NFKD" if compat else "NFD", c)


@functools.lru_cache(maxsize=1 << 16)
def _compose(a: str, b: str) -> str | None:
    """The primary composite of the pair, or None."""
    pair = a + b
    composed = unicodedata.normalize("NFC", pair)
    return composed if len(composed) == 1 and composed != pair else None


def changes(text: str, compat: bool) -> list[tuple[str, int]]:
    """The crate's (character, change) stream of `text` under NFC (`compat`: NFKC)."""
    # 1. decomposition: +1 on each character a decomposition adds
    chars: list[tuple[str, int]] = []
    for c in text:
        d = _decomposition(c, compat)
        chars.append((d[0], 0))
        chars.extend((x, 1) for x in d[1:])
    # 2. canonical reordering: each run of marks sorted by combining class (stable)
    ccc = [unicodedata.combining(c) for c, _ in chars]
    i, n = 0, len(chars)
    while i < n:
        if ccc[i] == 0:
            i += 1
            continue
        j = i
        while j < n and ccc[j] != 0:
            j += 1
        run = sorted(range(i, j), key=lambda k: ccc[k])
        chars[i:j] = [chars[k] for k in run]
        ccc[i:j] = [ccc[k] for k in run]
        i = j
    # 3. canonical composition: a character joins the last starter unless a character
    # between them has combining class 0 or one >= its own
    out: list[list] = []  # [character, change]
    starter: int | None = None  # index in `out` of the last starter
    between: int | None = None  # combining class of the last character after it, if any
    for (c, change), cc in zip(chars, ccc):
        if starter is not None and (between is None or 0 < between < cc):
            composed = _compose(out[starter][0], c)
            if composed is not None:
                out[starter][0] = composed
                out[starter][1] += change - 1
                continue
        out.append([c, change])
        if cc == 0:
            starter, between = len(out) - 1, None
        else:
            between = cc
    return [(c, ch) for c, ch in out]


def composed_counts(text: str, compat: bool = False) -> np.ndarray:
    """Per original character of `text`, how many characters of its NFC (`compat`: NFKC) are
    aligned to it (see the module docstring)."""
    counts = np.zeros(len(text), dtype=np.int64)
    idx = 0
    for _, change in changes(text, compat):
        if change > 0:
            counts[max(idx - 1, 0)] += 1
        else:
            counts[min(idx, len(text) - 1)] += 1
            idx += 1 - change
    return counts


def normalized_text(text: str, compat: bool = False) -> str:
    """The text `changes` normalizes `text` to (checked against the normalizer's own output
    by the caller)."""
    return "".join(c for c, _ in changes(text, compat))
