"""Regex patterns for Polars: HF compiles user patterns (Split, Replace) with Oniguruma, Polars
with the Rust `regex` crate. `onig_to_rust` translates the one to the other (or refuses what Rust
cannot do), `escape_regex` quotes a literal, `pattern_from_hf` reads HF's pattern objects."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..errors import TokcolumnarValueError

# HF compiles user patterns (Split, Replace) with Oniguruma; Polars with the Rust `regex` crate.
# Their `\s`, `\d`, `.`, `\p{..}` sets agree on every code point; their `\w` differs: Oniguruma
# leaves out U+200C/U+200D, and its `\w` outside brackets (not `[\w]`) also matches ² ³ ¹ ¼ ½ ¾.
# `^`/`$` are line anchors in Oniguruma, and Rust has no look-around.
ONIG_WORD_CLASS = r"[\w\xB2\xB3\xB9\xBC-\xBE--\x{200C}\x{200D}]"
ONIG_NOT_WORD_CLASS = r"[^\w\xB2\xB3\xB9\xBC-\xBE--\x{200C}\x{200D}]"
ONIG_WORD_IN_CLASS = r"[\w--\x{200C}\x{200D}]"
ONIG_NOT_WORD_IN_CLASS = r"[\W\x{200C}\x{200D}]"
_RUST_META = set("\\.+*?()|[]{}^$#&-~")


def escape_regex(text: str) -> str:
    """Escape a literal for the Rust regex crate (`regex::escape`)."""
    return "".join("\\" + c if c in _RUST_META else c for c in text)


def onig_to_rust(pattern: str) -> str:
    """Translate an HF (Oniguruma) pattern to the Rust regex crate's syntax, or raise
    `TokcolumnarError` when it uses what Rust regex cannot do (look-around, atomic groups,
    backreferences)."""
    out: list[str] = []
    i, depth = 0, 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "w":
                out.append(ONIG_WORD_IN_CLASS if depth else ONIG_WORD_CLASS)
            elif e == "W":
                out.append(ONIG_NOT_WORD_IN_CLASS if depth else ONIG_NOT_WORD_CLASS)
            elif e == "h" and depth == 0:
                out.append("[0-9a-fA-F]")
            elif e == "H" and depth == 0:
                out.append("[^0-9a-fA-F]")
            elif e.isdigit() and e != "0" and depth == 0 or e in "kKGgRXZ" and depth == 0:
                raise TokcolumnarValueError(f"regex {pattern!r}: \\{e} is not supported by Polars' "
                                            "regex engine")
            else:
                out.append(c + e)
            i += 2
            continue
        if c == "[":
            depth += 1
            out.append(c)
            if i + 1 < n and pattern[i + 1] == "^":
                out.append("^")
                i += 1
            if i + 1 < n and pattern[i + 1] == "]":  # a literal ']' first in a class
                out.append(r"\]")
                i += 1
        elif c == "]" and depth > 0:
            depth -= 1
            out.append(c)
        elif depth == 0 and c == "(" and pattern.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?>"),
                                                           i):
            raise TokcolumnarValueError(f"regex {pattern!r}: look-around and atomic groups are not "
                                        "supported by Polars' regex engine")
        elif depth == 0 and c == "^":
            out.append("(?m:^)")
        elif depth == 0 and c == "$":
            out.append("(?m:$)")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def check_regex(pattern: str) -> str:
    """Compile `pattern` once with Polars, turning a bad pattern into `TokcolumnarError`."""
    try:
        pl.select(pl.lit("").str.contains(pattern))
    except Exception as exc:  # polars raises ComputeError with the regex crate's message
        raise TokcolumnarValueError(f"invalid regex {pattern!r}: {exc}") from None
    return pattern


def pattern_from_hf(d: Any) -> tuple[str, bool]:
    """HF's `{"String": s}` / `{"Regex": r}` pattern object -> (text, is_regex)."""
    if isinstance(d, str):
        return d, False
    if isinstance(d, dict) and len(d) == 1:
        kind, value = next(iter(d.items()))
        if kind in ("String", "Regex") and isinstance(value, str):
            return value, kind == "Regex"
    raise TokcolumnarValueError(f"unsupported pattern in tokenizer.json: {d!r}")
