"""GPT-2's pre-tokenization on code points: the pieces of the GPT-2 pattern
`'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`, found with
NumPy.

Polars' `extract_all` builds one string per match: on Chinese text (a piece every ~3 characters)
that costs ~4x the regex scan itself. The pieces of this pattern tile the text (every character
is in one), so they are given by where they start; here that is worked out from each
character's class (letter L, number N, whitespace W, other O) and the output is the text's own
UTF-8 buffer cut at those starts (no string is copied).

Where a piece starts, reading the pattern left to right:

* at a text's first character, and wherever the class changes (`\\p{L}+`, `\\p{N}+`,
  `[^\\s\\p{L}\\p{N}]+` and `\\s+` are each greedy over one class);
* a whitespace run followed by a non-whitespace character (in the same text): its last
  character starts a piece of its own (`\\s+(?!\\S)` leaves it out of the run), and when that
  character is a space (U+0020) it joins the piece after it instead (` ?` of the three
  non-whitespace alternatives), which then does not start at the class change;
* a contraction: at a piece start (not one taken by a space, as ` '` is matched by
  ` ?[^\\s\\p{L}\\p{N}]+`) an apostrophe followed by `s`, `t`, `m`, `d`, `re`, `ve` or `ll`
  is a piece of its own (the alternatives come first), and the letters after it start the
  next piece. The apostrophe is O and these letters L, so the apostrophe's O run is the
  apostrophe alone.

The classes are those of the regex crate (the engine of the Polars pattern this replaces):
each code point is classed by running `\\p{L}`, `\\p{N}` and `\\s` on it the first time a batch
holds it. `tests/text/test_gpt2_split.py` checks the pieces against the Polars pattern and HF
on Hypothesis texts and the corpora."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..buffers import string_parts, strings_from_parts, utf8_chars

LETTER, NUMBER, OTHER, WHITE = 0, 1, 2, 3  # \p{L}, \p{N}, the rest, \s
UNCLASSED = 255
N_CODE_POINTS = 0x110000
APOSTROPHE, SPACE = 0x27, 0x20
CONTRACTION_ONE = (ord("s"), ord("t"), ord("m"), ord("d"))  # 's 't 'm 'd
CONTRACTION_TWO = ((ord("r"), ord("e")), (ord("v"), ord("e")), (ord("l"), ord("l")))  # 're 've 'll

# code point -> class, filled on first sight (a race only writes the same value twice)
_classes = np.full(N_CODE_POINTS, UNCLASSED, dtype=np.uint8)


def char_classes(code: np.ndarray) -> np.ndarray:
    """The class (LETTER, NUMBER, OTHER, WHITE) of each code point, by the regex crate's
    `\\p{L}`, `\\p{N}` and `\\s`."""
    cls = _classes[code]
    unclassed = cls == UNCLASSED
    if unclassed.any():
        new = np.unique(code[unclassed])
        chars = pl.Series("c", [chr(c) for c in new.tolist()], dtype=pl.String)
        found = np.full(len(new), OTHER, dtype=np.uint8)
        found[chars.str.contains(r"^\p{N}$").to_numpy()] = NUMBER
        found[chars.str.contains(r"^\p{L}$").to_numpy()] = LETTER
        found[chars.str.contains(r"^\s$").to_numpy()] = WHITE
        _classes[new] = found
        cls = _classes[code]
    return cls


def piece_starts(code: np.ndarray, cls: np.ndarray, text_start: np.ndarray) -> np.ndarray:
    """Per character, whether a GPT-2 piece starts there (see the module's docstring), for
    texts given as the code points of their characters one after the other; `text_start`:
    per character and one past the end (True there), whether a text starts."""
    n = len(code)
    starts = text_start.copy()
    # a class change inside a text
    starts[1:n] |= cls[1:] != cls[:-1]
    # whitespace before non-whitespace in the same text: the last whitespace character starts
    # a piece (`\s+(?!\S)` stops before it); a space joins the piece after it
    ws_last = np.flatnonzero((cls[:-1] == WHITE) & (cls[1:] != WHITE) & ~text_start[1:n])
    starts[ws_last] = True
    starts[ws_last[code[ws_last] == SPACE] + 1] = False
    # contractions: an apostrophe starting a piece, followed in its text by the letters
    apostrophe = np.flatnonzero((code == APOSTROPHE) & starts[:n])
    apostrophe = apostrophe[(apostrophe + 1 < n) & ~text_start[apostrophe + 1]]
    if len(apostrophe):
        first = code[apostrophe + 1]
        # the second letter, 0 where the text ends after the first
        at = np.minimum(apostrophe + 2, n)
        second = np.where(text_start[at], 0, np.append(code, 0)[at])
        length = np.isin(first, CONTRACTION_ONE).astype(np.int64)
        for a, b in CONTRACTION_TWO:
            length[(first == a) & (second == b)] = 2
        found = length > 0
        apostrophe, length = apostrophe[found], length[found]
        # the letters are in the apostrophe's piece; the piece after starts past them (a
        # class change or a text start there is a start already)
        starts[apostrophe + 1] = False
        starts[apostrophe + 1 + length] = True
    return starts


def gpt2_pieces(texts: pl.Series, refuse: tuple[int, int] | None = None
                ) -> tuple[np.ndarray, pl.Series] | None:
    """The GPT-2 pieces of each text (a String Series; null: no pieces): the number of pieces
    of each text, and all the pieces in order as one String Series. None when a character
    of the range `refuse` (first, last code point) is in the texts."""
    offsets, data = string_parts(texts)
    code, char_byte = utf8_chars(data)  # char_byte None: all ASCII, a character per byte
    if refuse is not None and char_byte is not None and (
            (code >= refuse[0]) & (code <= refuse[1])).any():
        return None
    # each text's first character, and the end
    text_char = offsets if char_byte is None else np.searchsorted(char_byte, offsets)
    text_start = np.zeros(len(code) + 1, dtype=bool)
    text_start[text_char] = True
    starts = np.flatnonzero(piece_starts(code, char_classes(code), text_start)[:len(code)])
    per_text = np.diff(np.searchsorted(starts, text_char)).astype(np.int64)
    # the pieces tile the texts: the UTF-8 buffer cut at the pieces' first bytes
    bounds = np.append(starts if char_byte is None else char_byte[starts], len(data))
    return per_text, strings_from_parts("word", bounds, data)
