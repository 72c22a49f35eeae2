"""Generates sql/01_text_functions.sql: the Unicode classes and lowercase tables that make
DuckDB's RE2 regexes and lower() split and lowercase exactly as the Rust code behind Polars and
HF tokenizers (`python -m tokcolumnar.engines.duckdb_text --regenerate`)."""

from __future__ import annotations

import polars as pl

from .duckdb_sql import SQL_DIR


def _rust_ranges(pattern: str) -> list[tuple[int, int]]:
    """Code point ranges matching `pattern` (a one-character regex) in the Rust regex crate,
    which Polars (and HF tokenizers) use."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    df = pl.DataFrame({"cp": cps, "c": [chr(c) for c in cps]})
    return _ranges(df.filter(pl.col("c").str.contains(f"^(?:{pattern})$")).get_column(
        "cp").to_list())


def _re2_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)


def _sigma_classes() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The characters Rust's to_lowercase treats as cased / case-ignorable when it decides
    whether a capital sigma ends a word (its tables, measured through Polars: they are not the
    regex crate's \\p{Cased} / \\p{Case_Ignorable}, which follow a newer Unicode version)."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    df = pl.DataFrame({"cp": cps, "c": [chr(c) for c in cps]}).with_columns(
        after_letter=(pl.lit("\u0391") + pl.col("c") + pl.lit("\u03a3")).str.to_lowercase()
        .str.ends_with("\u03c2"),
        after_space=(pl.lit(" ") + pl.col("c") + pl.lit("\u03a3")).str.to_lowercase()
        .str.ends_with("\u03c2"))
    cased = df.filter(pl.col("after_space")).get_column("cp").to_list()
    ignorable = df.filter(pl.col("after_letter") & ~pl.col("after_space")).get_column(
        "cp").to_list()
    return _ranges(cased), _ranges(ignorable)


def _ranges(cps: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in cps:
        if out and c == out[-1][1] + 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _lowercase_fixes() -> tuple[str, str, list[tuple[str, str]]]:
    """Characters whose Rust `to_lowercase` differs from DuckDB's lower(): 1:1 ones for
    translate(), longer ones for replace()."""
    import duckdb

    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c != 0x3A3]
    con = duckdb.connect()
    con.register("tc_chars", pl.DataFrame({"c": [chr(c) for c in cps]}))
    got = con.sql("SELECT c, lower(c) AS d FROM tc_chars").pl().with_columns(
        pl.col("c").str.to_lowercase().alias("r"))
    diff = got.filter(pl.col("d") != pl.col("r"))
    src, dst, multi = [], [], []
    for c, r in zip(diff.get_column("c").to_list(), diff.get_column("r").to_list()):
        if len(r) == 1:
            src.append(c)
            dst.append(r)
        else:
            multi.append((c, r))
    return "".join(src), "".join(dst), multi


def text_functions_sql() -> str:
    """The text of sql/01_text_functions.sql (regenerate it with
    `python -m tokcolumnar.engines.duckdb_text --regenerate`)."""
    w = _re2_class(_rust_ranges(r"\w"))
    s = _re2_class(_rust_ranges(r"\s"))
    cased, ci = (_re2_class(r) for r in _sigma_classes())
    src, dst, multi = _lowercase_fixes()
    breaks = r"\x{0B}\x{0C}\x{1C}\x{1D}\x{1E}\x{85}\x{2028}\x{2029}"
    nmt = rf"[^ \x{{0D}}\x{{0A}}{breaks}]*[{breaks}]|[^ \x{{0D}}\x{{0A}}{breaks}]+"
    lower = "t"
    for c, r in multi:
        lower = f"replace({lower}, {_sql_str(c)}, {_sql_str(r)})"
    lower = f"translate({lower}, {_sql_str(src)}, {_sql_str(dst)})"
    sigma = f"([{cased}][{ci}]*)\u03a3([{ci}]*)($|[^{cased}{ci}])"
    lower = f"lower(regexp_replace({lower}, {_sql_str(sigma)}, '\\1\u03c2\\2\\3', 'g'))"
    return f"""-- Stage 1: text functions for the counting stage (GENERATED: do not edit by hand;
-- regenerate with `python -m tokcolumnar.engines.duckdb_text --regenerate`).
--
-- In:  nothing. Out: three macros used by stage 3.
--   tc_pretokenize(text, kind) -> VARCHAR[]  the words of a text:
--     'whitespace'        HF Whitespace, `\\w+|[^\\w\\s]+`
--     'whitespace-split'  HF WhitespaceSplit, `\\S+`
--     'subword-nmt'       subword-nmt's split: ASCII spaces only (and its line ends)
--     'none'              the whole text as one word (nothing for '')
--   tc_lowercase(text) -> VARCHAR            Rust's str::to_lowercase
--   tc_normalize(text, normalizer, lowercase) -> VARCHAR   ('none' | 'nfc', then lowercase)
--
-- Why generated: DuckDB's regexes are RE2, where \\w and \\s are ASCII only and \\p{{L}} etc.
-- follow an older Unicode version than the Rust regex crate behind Polars and HF tokenizers.
-- The classes below are the exact code point sets of Rust's \\w (Alphabetic, M, Nd, Pc,
-- Join_Control) and \\s (White_Space), listed as ranges, so both engines split identically.
-- Likewise lower() (utf8proc) differs from Rust's to_lowercase on {len(src) + len(multi)}
-- code points (newer characters, U+0130) and has no final-sigma rule: the translate / replace
-- tables and the regexp_replace below (Σ -> ς when a cased letter precedes it and none
-- follows, case-ignorable characters skipped, with the cased / case-ignorable sets Rust's
-- to_lowercase itself uses, measured) close both gaps.

CREATE OR REPLACE MACRO tc_pretokenize(t, kind) AS
    CASE kind
        WHEN 'whitespace' THEN regexp_extract_all(t, '[{w}]+|[^{w}{s}]+')
        WHEN 'whitespace-split' THEN regexp_extract_all(t, '[^{s}]+')
        WHEN 'subword-nmt' THEN regexp_extract_all(t, '{nmt}')
        WHEN 'none' THEN CASE WHEN t = '' THEN []::VARCHAR[] ELSE [t] END
    END;

CREATE OR REPLACE MACRO tc_lowercase(t) AS
    {lower};

CREATE OR REPLACE MACRO tc_normalize(t, normalizer, lowercase) AS
    CASE WHEN lowercase
         THEN tc_lowercase(CASE WHEN normalizer = 'nfc' THEN nfc_normalize(t) ELSE t END)
         ELSE CASE WHEN normalizer = 'nfc' THEN nfc_normalize(t) ELSE t END
    END;
"""


if __name__ == "__main__":  # pragma: no cover
    import sys

    if "--regenerate" in sys.argv:
        (SQL_DIR / "01_text_functions.sql").write_text(text_functions_sql(), encoding="utf-8")
        print(f"wrote {SQL_DIR / '01_text_functions.sql'}")
