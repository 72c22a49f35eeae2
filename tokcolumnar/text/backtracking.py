"""HF regexes with look-around (`Split`, `--pattern REGEX`) run by Python's own backtracking
engine, `re`, once per distinct text (docs/patterns.md, "Custom regexes").

Polars' engine (the Rust `regex` crate) has no look-around, so `regex.onig_to_rust` refuses it;
the named LLM patterns get around that with an exact cut (`llm_split`), which does not hold for
every regex. For the others, `re` runs the pattern: a backtracking engine with leftmost-first
alternation, greedy and lazy quantifiers, look-ahead, fixed-width look-behind, and (Python
3.11+) atomic groups and possessive quantifiers, as HF's Oniguruma has them. What differs
between the two syntaxes is translated (`onig_to_python`):

* the classes `\\p{..}`, `\\P{..}`, `\\s`, `\\d`, `\\w`, `\\h` and their negations become explicit
  code point ranges, taken from Polars' engine over all of Unicode — the classes the rest of
  tokcolumnar uses, which agree with Oniguruma's on every code point (`regex.py`: `\\w` needs
  Oniguruma's exceptions, which `onig_to_rust` writes);
* `^` and `$` are line anchors in Oniguruma (`(?m:^)`, `(?m:$)`), `\\z` is Python's `\\Z` and
  Oniguruma's `\\Z` (the end, or before a final line feed) is `(?=\\n?\\Z)`;
* `\\x{HHHH}` is `\\U0000HHHH`.

What cannot be translated exactly is refused in one line: back-references and subroutine calls
(`\\1`, `\\k<..>`, `\\g<..>`), `\\b`/`\\B`, `\\R`, `\\X`, `\\K`, `\\G`, nested classes and set
operations (`[a[b]]`, `&&`, `[:alpha:]`), `X{n,m}+` (a repetition of a repetition to Oniguruma,
a possessive quantifier to Python), case-insensitive matching that may meet a multi-character
case folding (`(?i:ß)` matches `SS` in Oniguruma, not in Python), and atomic groups or
possessive quantifiers on Python 3.10.

The regex runs once per distinct text of a batch (`re.finditer` in C; the Python work is per
distinct text, not per line), and the pieces follow HF's `NormalizedString::split`: the
matches and the stretches between them (flipped with `invert`), combined by the behavior, empty
pieces dropped. Tests: tests/text/test_backtracking.py against HF's `Split` on Hypothesis texts
and the corpora."""

from __future__ import annotations

import functools
import re
import sys
from typing import Any

import numpy as np
import polars as pl

from ..errors import TokcolumnarValueError
from .regex import onig_to_rust

#: The escapes that stand for a class of characters (translated to explicit ranges).
CLASS_ESCAPES = "sSdDwWhH"
#: Escapes refused: no exact translation to Python's `re`.
REFUSED_ESCAPES = {"b": "\\b", "B": "\\B", "R": "\\R", "X": "\\X", "K": "\\K", "G": "\\G",
                   "k": "a back-reference", "g": "a subroutine call", "y": "\\y", "Y": "\\Y"}
ATOMIC_SINCE = (3, 11)


@functools.lru_cache(maxsize=1)
def _all_chars() -> tuple[pl.Series, np.ndarray]:
    """Every code point but the surrogates, as one-character strings (in code point order)."""
    codes = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)])
    return pl.Series("c", [chr(c) for c in codes.tolist()]), codes


@functools.lru_cache(maxsize=256)
def class_ranges(rust_class: str) -> tuple[tuple[int, int], ...]:
    """The code point ranges a Rust-regex class (`\\p{L}`, `[\\w--\\x{200C}]`...) matches, as
    Polars' engine says over all of Unicode."""
    chars, codes = _all_chars()
    hit = codes[chars.str.contains(f"^(?:{rust_class})$").to_numpy()]
    if hit.size == 0:
        return ()
    breaks = np.flatnonzero(np.diff(hit) != 1)
    starts = np.append(hit[0], hit[breaks + 1])
    ends = np.append(hit[breaks], hit[-1])
    return tuple(zip(starts.tolist(), ends.tolist()))


def _python_class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    """The inside of a Python `re` class matching exactly these ranges."""
    def char(c: int) -> str:
        return f"\\U{c:08X}"
    return "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in ranges)


def _refuse(pattern: str, what: str) -> TokcolumnarValueError:
    return TokcolumnarValueError(f"regex {pattern!r}: {what} cannot be run exactly as "
                                 "Oniguruma (HF) runs it")


def _class_escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The Rust-regex class of the class escape at `pattern[i]` (`\\s`, `\\p{L}`, `\\pL`...)
    and the index after it."""
    e = pattern[i + 1]
    if e in "pP":
        if i + 2 < len(pattern) and pattern[i + 2] == "{":
            end = pattern.find("}", i + 3)
            if end < 0:
                raise TokcolumnarValueError(f"invalid regex {pattern!r}: unclosed \\{e}{{")
            name = pattern[i + 3:end]
            nxt = end + 1
        else:
            name, nxt = pattern[i + 2:i + 3], i + 3
        negated = e == "P"
        if name.startswith("^"):  # Oniguruma's \p{^L}: the negation
            name, negated = name[1:], not negated
        return ("\\P" if negated else "\\p") + "{" + name + "}", nxt
    if e in "hH":  # Oniguruma's hexadecimal digit (Ruby syntax)
        return ("[0-9a-fA-F]" if e == "h" else "[^0-9a-fA-F]"), i + 2
    # \s \d \w and negations, with Oniguruma's exceptions (onig_to_rust)
    rust = onig_to_rust(f"[\\{e}]" if in_class else f"\\{e}")
    return rust, i + 2


def _ranges_of(pattern: str, rust_class: str) -> tuple[tuple[int, int], ...]:
    try:
        return class_ranges(rust_class)
    except Exception as exc:  # an unknown property name: Polars' engine says which
        raise TokcolumnarValueError(f"invalid regex {pattern!r}: "
                                    f"{' '.join(str(exc).split())}") from None


@functools.lru_cache(maxsize=1)
def _multi_char_folds() -> tuple[frozenset[str], tuple[str, ...]]:
    """The characters whose case folding is several characters (ß -> ss, ﬁ -> fi...), and
    those foldings: Oniguruma matches them case-insensitively across the lengths, Python's
    `re` does not."""
    chars, folds = set(), set()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        f = c.casefold()
        if len(f) > 1:
            chars.add(c)
            folds.add(f)
    return frozenset(chars), tuple(sorted(folds))


def _check_case_folding(pattern: str) -> None:
    """Refuse case-insensitive matching that may involve a multi-character case folding."""
    if "(?i" not in pattern:
        return
    chars, folds = _multi_char_folds()
    text = pattern.casefold()
    if any(c in chars for c in pattern) or any(f in text for f in folds):
        raise _refuse(pattern, "case-insensitive matching of a character whose case folding is "
                      "several characters (ß and ss, ﬁ and fi...)")


def onig_to_python(pattern: str) -> str:
    """An HF (Oniguruma) regex as Python `re` syntax with the same matches (see the module
    docstring), or `TokcolumnarValueError` naming what has no exact translation."""
    _check_case_folding(pattern)
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    atomic_ok = sys.version_info >= ATOMIC_SINCE
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in CLASS_ESCAPES or e in "pP":
                rust, i = _class_escape(pattern, i, in_class)
                body = _python_class_body(_ranges_of(pattern, rust))
                out.append(body if in_class else f"[{body}]" if body else "(?!)")
                continue
            if e in REFUSED_ESCAPES or (e.isdigit() and e != "0"):
                raise _refuse(pattern, REFUSED_ESCAPES.get(e, "a back-reference"))
            if e == "x" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise TokcolumnarValueError(f"invalid regex {pattern!r}: unclosed \\x{{")
                out.append(f"\\U{int(pattern[i + 3:end], 16):08X}")
                i = end + 1
                continue
            if not in_class and e == "z":
                out.append("\\Z")
            elif not in_class and e == "Z":
                out.append("(?=\\n?\\Z)")
            else:
                out.append(c + e)
            i += 2
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                raise _refuse(pattern, "a nested class or class set operation")
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":  # a literal ']' first in a class
                out.append("\\]")
                i += 1
            continue
        if c == "{":
            close = pattern.find("}", i)
            if close > 0 and re.fullmatch(r"\d*,?\d*", pattern[i + 1:close]) \
                    and close + 1 < n and pattern[close + 1] == "+":
                raise _refuse(pattern, "a repetition followed by + (X{n,m}+)")
        if c in "+*?" and i + 1 < n and pattern[i + 1] == "+" and not atomic_ok:
            raise _refuse(pattern, "a possessive quantifier on Python < 3.11")
        if pattern.startswith("(?>", i) and not atomic_ok:
            raise _refuse(pattern, "an atomic group on Python < 3.11")
        if c == "^":
            out.append("(?m:^)")
        elif c == "$":
            out.append("(?m:$)")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def compile_onig(pattern: str) -> re.Pattern[str]:
    """`onig_to_python(pattern)`, compiled (a bad pattern: `TokcolumnarValueError`)."""
    translated = onig_to_python(pattern)
    try:
        return re.compile(translated)
    except (re.error, OverflowError, RecursionError) as exc:
        raise TokcolumnarValueError(f"invalid regex {pattern!r}: {exc}") from None


def split_text(text: str, regex: re.Pattern[str], behavior: str, invert: bool) -> list[str]:
    """HF's `NormalizedString::split(regex, behavior)` of one text (`invert`: the matches are
    the pieces' separators' complement)."""
    parts: list[tuple[int, int, bool]] = []  # (start, end, is a match), tiling the text
    prev = 0
    for m in regex.finditer(text):
        start, end = m.span()
        if prev != start:
            parts.append((prev, start, invert))
        parts.append((start, end, not invert))
        prev = end
    if prev != len(text):
        parts.append((prev, len(text), invert))
    if behavior == "removed":
        spans = [(a, b) for a, b, match in parts if not match]
    elif behavior == "isolated":
        spans = [(a, b) for a, b, _ in parts]
    elif behavior == "merged_with_next":
        spans = []
        previous_match = False
        for a, b, match in reversed(parts):
            if match and not previous_match and spans:
                spans[-1] = (a, spans[-1][1])
            else:
                spans.append((a, b))
            previous_match = match
        spans.reverse()
    else:  # merged_with_previous, contiguous
        spans = []
        previous_match = False
        for a, b, match in parts:
            joins = (match and not previous_match) if behavior == "merged_with_previous" \
                else match == previous_match
            if joins and spans:
                spans[-1] = (spans[-1][0], b)
            else:
                spans.append((a, b))
            previous_match = match
    return [text[a:b] for a, b in spans if b > a]


def split_series(texts: pl.Series, regex: re.Pattern[str], behavior: str,
                 invert: bool) -> pl.Series:
    """`split_text` of every text of a String Series (null stays null), run once per distinct
    text."""
    frame = texts.rename("text").to_frame()
    distinct = frame.get_column("text").drop_nulls().unique(maintain_order=True)
    pieces = pl.Series("pieces", [split_text(t, regex, behavior, invert) for t in distinct],
                       dtype=pl.List(pl.String))
    table = pl.DataFrame([distinct, pieces])
    joined = frame.join(table, on="text", how="left", maintain_order="left",
                        nulls_equal=False)
    return joined.get_column("pieces").alias(texts.name)


def split_expr(col: pl.Expr, regex: re.Pattern[str], behavior: str, invert: bool) -> pl.Expr:
    """`split_series` as an expression."""
    def run(s: Any) -> pl.Series:
        return split_series(s, regex, behavior, invert)
    return col.map_batches(run, return_dtype=pl.List(pl.String))
