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
runs once over all the parts."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..buffers import lists_at, string_parts, strings_from_parts, utf8_chars
from .gpt2_split import WHITE, char_classes
from .patterns import NamedPattern

LF, CR = 0x0A, 0x0D


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


def llm_pieces(texts: pl.Series, pattern: NamedPattern) -> tuple[np.ndarray, pl.Series]:
    """The pieces of each text (a String Series; null: none) under `pattern`: the number of
    pieces of each text, and all the pieces in order as one String Series."""
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
