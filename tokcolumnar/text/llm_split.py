"""The pieces of today's LLM pre-tokenization patterns (cl100k, o200k, qwen2: `patterns.py`)
without a backtracking engine: HF's `Split(Regex(p), "isolated")` exactly, for a whole batch
of texts at once.

Every such pattern is `X|\\s+(?!\\S)|\\s+`, where X holds no look-around and takes whitespace
in three ways only: one character of `[^\\r\\n\\p{L}\\p{N}]` (X's letter alternatives) or a
space (` ?[^\\s\\p{L}\\p{N}]+`) in front of a non-whitespace character, line breaks after
others (`[\\r\\n]*`, `[\\r\\n/]*`), and `\\s*[\\r\\n]+` (whitespace up to the run's last line
break). So a *horizontal* whitespace run (no `\\r`, `\\n`) is reached at its first character,
and when two or more of its characters stand before a non-whitespace character, the match
there (X needs a non-whitespace character right after its one whitespace character; no line
break follows) is `\\s+(?!\\S)`: the run but its last character. Hence the cut:

    cut a text before every horizontal whitespace character that follows a horizontal
    whitespace character and precedes a non-whitespace one.

Each cut is where a piece ends in the whole text, the pattern has no look-behind, and the
look-ahead `(?!\\S)` only ever stopped a run before such a cut; so the pieces of the text are
those of its parts, in order, where on each part `\\s+(?!\\S)|\\s+` is just `\\s+` (a run
followed by a non-whitespace character in a part has one character, or ends in a line
break, which `\\s*[\\r\\n]+` took first). What is left is a pattern the Rust regex crate runs
(`NamedPattern.cut_regex`), whose leftmost-first matches are a backtracking engine's. The
character classes of HF's Oniguruma and of Polars' regex crate agree (`\\s`, `\\p{L}`,
`\\p{N}`: pretokenizers.py; the general categories of o200k and the case folding of
`(?i:...)`: checked by tests/text/test_llm_split.py over all of Unicode).

The cuts are found with NumPy from each character's class (`gpt2_split.char_classes`), the
parts are the texts' own UTF-8 buffer cut there (no copy per part), and Polars' `extract_all`
runs once over all the parts. cl100k and qwen2 need no regex at all: their pieces tile the
text, and `cl100k_starts` finds where each one starts from the characters' classes
(docs/patterns.md, "cl100k and qwen2 without a regex engine")."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..buffers import gather_table, lists_at, string_parts, strings_from_parts, utf8_chars
from .gpt2_split import LETTER, NUMBER, OTHER, WHITE, char_classes
from .patterns import NamedPattern

LF, CR, SPACE, APOSTROPHE = 0x0A, 0x0D, 0x20, 0x27
#: The code points `(?i:x)` matches for each letter of the contractions (simple case folding,
#: as HF's Oniguruma and the regex crate fold: `ſ` U+017F is an `s`), by the letter.
FOLDS = {c: (ord(c), ord(c.upper())) + ((0x17F,) if c == "s" else ()) for c in "stmdrevl"}
#: Per code point: 1 if it is in `\\p{Lm}` or `\\p{Lo}`, 0 if not, 255 not looked at yet
#: (`modifier_or_other_letter`; filled on first sight, as `gpt2_split.char_classes`).
_lm_lo = np.full(0x110000, 255, dtype=np.uint8)
#: `o200k_pieces` shortens texts when that leaves out at least 1/SHORTEN_MIN of the characters.
SHORTEN_MIN = 8
#: The patterns `cl100k_starts` splits, with their digits per piece (`\p{N}{1,3}`, `\p{N}`).
DIGITS = {"cl100k": 3, "qwen2": 1}


def part_starts(code: np.ndarray, cls: np.ndarray, text_start: np.ndarray) -> np.ndarray:
    """Per character, whether a part starts there (a text's first character or a cut, see the
    module docstring); `text_start`: per character and one past the end, whether a text
    starts there."""
    n = len(code)
    starts = text_start[:n].copy()
    if n < 3:
        return starts
    white = cls == WHITE
    horizontal = white & (code != LF) & (code != CR)
    # i is a cut: horizontal[i - 1], horizontal[i], not white[i + 1], all in one text
    cut = horizontal[:-2] & horizontal[1:-1] & ~white[2:] & ~text_start[1:n - 1] \
        & ~text_start[2:n]
    starts[1:n - 1] |= cut
    return starts


def _folded(code: np.ndarray, letter: str) -> np.ndarray:
    return np.isin(code, FOLDS[letter])


def contraction_length(code: np.ndarray, at: np.ndarray, n_text: np.ndarray) -> np.ndarray:
    """For each apostrophe at `at`, the letters `(?i:'s|'t|'re|'ve|'m|'ll|'d)` takes after it
    (0: none); `n_text[k]`: how many characters of its text follow the apostrophe."""
    one = np.where(n_text >= 1, code[np.minimum(at + 1, len(code) - 1)], 0)
    two = np.where(n_text >= 2, code[np.minimum(at + 2, len(code) - 1)], 0)
    length = np.zeros(len(at), dtype=np.int64)
    length[_folded(one, "s") | _folded(one, "t") | _folded(one, "m") | _folded(one, "d")] = 1
    for a, b in ("re", "ve", "ll"):
        length[_folded(one, a) & _folded(two, b)] = 2
    return length


def cl100k_starts(code: np.ndarray, cls: np.ndarray, text_start: np.ndarray,
                  digits: int) -> np.ndarray:
    """Per character, whether a piece of cl100k's pattern (qwen2's with `digits` 1) starts
    there, for texts given as their code points one after the other; `text_start`: per
    character and one past the end, whether a text starts there. How each rule follows from
    the pattern: docs/patterns.md, "cl100k and qwen2 without a regex engine"."""
    n = len(code)
    first = text_start[:n]
    after = ~text_start[1:]  # after[i]: character i + 1 exists and is in i's text
    letter, number, other, white = cls == LETTER, cls == NUMBER, cls == OTHER, cls == WHITE
    line_break = (code == LF) | (code == CR)
    # 1. every run of one class (letters, numbers, others, whitespace) starts a piece
    run_first = first.copy()
    run_first[1:] |= cls[1:] != cls[:-1]
    starts = run_first.copy()
    # 2. numbers: a piece every `digits` characters of the run (`\p{N}{1,3}`)
    at = np.flatnonzero(number)
    begin = np.maximum.accumulate(np.where(run_first[at], at, 0)) if len(at) else at
    starts[at[(at - begin) % digits == 0]] = True
    # 3. whitespace. A run ending in horizontal whitespace before a character of its text:
    # its last character starts a piece (`\\s+(?!\\S)` leaves it to the next match) and takes
    # the letters after it (`[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`) or, a space, the others after it
    # (` ?[^\\s\\p{L}\\p{N}]+`)
    white_next = np.append(white[1:], False) & after
    last_h = white & ~line_break & after & ~white_next
    starts |= last_h
    starts[1:] &= ~(last_h[:-1] & (letter[1:] | ((code[:-1] == SPACE) & other[1:])))
    # the runs [p, q) that hold a line break or more than one character; the others are one
    # horizontal character, which the rules above settle
    white_prev = np.zeros(n, dtype=bool)
    white_prev[1:] = white_next[:-1]
    long_run = white & (line_break | white_prev | white_next)
    p = np.flatnonzero(long_run & run_first)
    q = np.flatnonzero(long_run & ~white_next) + 1
    # the positions of their line breaks (-1 in front) and horizontal whitespace (n behind)
    breaks = np.append(-1, np.flatnonzero(long_run & line_break))
    horizontal = np.append(np.flatnonzero(long_run & ~line_break), n)
    # 3a. after others, the line breaks opening the run are theirs (`[^\\s\\p{L}\\p{N}]+
    # [\\r\\n]*`): the run's pieces begin after them
    taken = ~first[p] & other[np.maximum(p - 1, 0)]
    pt, qt = p[taken], q[taken]
    first_h = horizontal[np.searchsorted(horizontal, pt)]
    starts[pt] = False
    starts[first_h[first_h < qt]] = True
    # 3b. `\\s*[\\r\\n]+` takes the run up to its last line break; the rest starts a piece
    last_break = breaks[np.searchsorted(breaks, q) - 1]
    starts[last_break[(last_break >= p) & (last_break + 1 < q)] + 1] = True
    # 4. a lone other character that starts a piece, before letters: an apostrophe of a
    # contraction takes its letters (the letters after them start a piece), any other takes
    # the letters (`[^\r\n\p{L}\p{N}]?\p{L}+`)
    o = np.flatnonzero(other[:-1] & starts[:-1] & after[:-1] & letter[1:]) if n > 1 \
        else np.zeros(0, dtype=np.int64)
    o = o[first[o] | ~other[np.maximum(o - 1, 0)]]  # alone: its run is one character
    apostrophe = o[code[o] == APOSTROPHE]
    if len(apostrophe):
        text_end = np.flatnonzero(text_start)
        left = text_end[np.searchsorted(text_end, apostrophe, side="right")] - apostrophe - 1
        length = contraction_length(code, apostrophe, left)
        c = apostrophe[length > 0]
        o = np.setdiff1d(o, c, assume_unique=True)
        after_c = c + 1 + length[length > 0]
        starts[c + 1] = False
        keep = after_c < n
        keep[keep] = ~text_start[after_c[keep]]
        starts[after_c[keep]] = True
    starts[o + 1] = False
    return starts


def cl100k_pieces(texts: pl.Series, digits: int) -> tuple[np.ndarray, pl.Series]:
    """`llm_pieces` for cl100k (`digits` 3) and qwen2 (1) by `cl100k_starts`: the texts' own
    UTF-8 buffer cut where the pieces start, with no regex engine."""
    offsets, data = string_parts(texts)
    code, char_byte = utf8_chars(data)
    text_char = offsets if char_byte is None else np.searchsorted(char_byte, offsets)
    text_start = np.zeros(len(code) + 1, dtype=bool)
    text_start[text_char] = True
    starts = np.flatnonzero(cl100k_starts(code, char_classes(code), text_start, digits))
    per_text = np.diff(np.searchsorted(starts, text_char)).astype(np.int64)
    bounds = np.append(starts if char_byte is None else char_byte[starts], len(data))
    return per_text, strings_from_parts("word", bounds.astype(np.int64), data)


def modifier_or_other_letter(code: np.ndarray) -> np.ndarray:
    """Whether each code point is in `\\p{Lm}` or `\\p{Lo}` (the regex crate's classes)."""
    found = _lm_lo[code]
    unseen = found == 255
    if unseen.any():
        new = np.unique(code[unseen])
        chars = pl.Series("c", [chr(c) for c in new.tolist()], dtype=pl.String)
        _lm_lo[new] = chars.str.contains(r"^[\p{Lm}\p{Lo}]$").to_numpy()
        found = _lm_lo[code]
    return found == 1


def o200k_pieces(texts: pl.Series, pattern: NamedPattern) -> tuple[np.ndarray, pl.Series]:
    """`llm_pieces` for o200k: `regex_pieces` of the texts with every run of `\\p{Lm}`/`\\p{Lo}`
    characters shortened to its first character, then the texts cut where those pieces start.

    On long runs of such letters (CJK text) the regex crate takes a slow path for o200k's
    letter classes (medium/zh.txt: ~50 s, where cl100k's split took ~1 s). No o200k piece
    starts inside such a run: `\\p{Lm}` and `\\p{Lo}` are in both letter classes of its
    first two alternatives, so their letters stop only at an uppercase letter or at a
    character that is no letter or mark, and the other alternatives take no letter. So the
    pieces of the shortened texts, each mapped to the character it starts at, are the texts'
    pieces (docs/patterns.md, "o200k")."""
    offsets, data = string_parts(texts)
    code, char_byte = utf8_chars(data)
    if char_byte is None:
        return regex_pieces(texts, pattern)
    n = len(code)
    text_char = np.searchsorted(char_byte, offsets)
    text_start = np.zeros(n + 1, dtype=bool)
    text_start[text_char] = True
    letter = modifier_or_other_letter(code)
    # keep a character unless it continues a run of such letters in its text
    keep = ~(letter & np.append(False, letter[:-1]) & ~text_start[:n])
    kept = np.flatnonzero(keep)
    if len(kept) > n - n // SHORTEN_MIN:  # too few letters left out to pay for the copy
        return regex_pieces(texts, pattern)
    short_char, short = gather_table(char_byte, data, kept)
    kept_before = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_before[1:])
    short_texts = strings_from_parts(texts.name, short_char[kept_before[text_char]], short)
    per_text, flat = regex_pieces(short_texts, pattern)
    # the pieces tile the shortened texts: each one's first kept character, then the text's
    lengths = flat.str.len_chars().to_numpy().astype(np.int64)
    if int(lengths.sum()) != len(kept):
        raise AssertionError("o200k pieces do not tile the text")
    first = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    bounds = np.append(char_byte[kept[first]], len(data))
    return per_text, strings_from_parts("word", bounds, data)


def llm_pieces(texts: pl.Series, pattern: NamedPattern) -> tuple[np.ndarray, pl.Series]:
    """The pieces of each text (a String Series; null: none) under `pattern`: the number of
    pieces of each text, and all the pieces in order as one String Series."""
    if pattern.name in DIGITS:
        return cl100k_pieces(texts, DIGITS[pattern.name])
    if pattern.name == "o200k":
        return o200k_pieces(texts, pattern)
    return regex_pieces(texts, pattern)


def regex_pieces(texts: pl.Series, pattern: NamedPattern) -> tuple[np.ndarray, pl.Series]:
    """`llm_pieces` by the cut and one regex pass (the module's docstring)."""
    offsets, data = string_parts(texts)
    code, char_byte = utf8_chars(data)
    text_char = offsets if char_byte is None else np.searchsorted(char_byte, offsets)
    n = len(code)
    text_start = np.zeros(n + 1, dtype=bool)
    text_start[text_char] = True
    starts = np.flatnonzero(part_starts(code, char_classes(code), text_start))
    bounds = np.append(starts, n)
    byte_bounds = bounds if char_byte is None else char_byte[bounds]
    parts = strings_from_parts("part", byte_bounds.astype(np.int64), data)
    split = parts.str.extract_all(pattern.cut_regex)
    per_part = split.list.len().to_numpy().astype(np.int64)
    # the parts of each text: those starting in its span of characters (an empty text has none)
    text_of_part = np.searchsorted(text_char, starts, side="right") - 1
    per_text = np.bincount(text_of_part, weights=per_part,
                           minlength=len(texts)).astype(np.int64)
    flat = split.explode().drop_nulls().alias("word")
    return per_text, flat


def llm_split_series(texts: pl.Series, pattern: NamedPattern) -> pl.Series:
    """`llm_pieces` as one list of pieces per text (a null text: an empty list)."""
    per_text, flat = llm_pieces(texts, pattern)
    bounds = np.zeros(len(per_text) + 1, dtype=np.int64)
    np.cumsum(per_text, out=bounds[1:])
    return lists_at(flat, bounds).alias(texts.name)


def llm_split_expr(col: pl.Expr, pattern: NamedPattern) -> pl.Expr:
    """`llm_split_series` as an expression (NumPy and one regex call per batch of texts)."""
    return col.map_batches(lambda s: llm_split_series(s, pattern),
                           return_dtype=pl.List(pl.String))
