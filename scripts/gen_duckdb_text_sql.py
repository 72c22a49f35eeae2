"""Generates sql/01_text_functions.sql (the Unicode classes and lowercase tables that make
DuckDB's RE2 regexes and lower() split and lowercase exactly as the Rust code behind Polars and
HF tokenizers) and sql/01b_unicode_tables.sql (the Unicode normalization tables: decompositions,
combining classes, compositions), all measured through Polars
(`python scripts/gen_duckdb_text_sql.py --regenerate`). A build-time tool: the package reads
the generated files, never this script; `tests/duckdb/test_text.py` checks that the files in
`sql/` are what it generates."""

from __future__ import annotations

import functools
import unicodedata

import polars as pl

from tokcolumnar.duckdb.runner import SQL_DIR
from tokcolumnar.text.pretokenizers import HF_PUNCTUATION, NUMERIC_CLASS
from tokcolumnar.text.unicode_tables import (
    HF_CHINESE_CHARS,
    HF_CLEAN_REMOVED,
    HF_NONSPACING_MARK,
)


@functools.lru_cache(maxsize=1)
def _chars() -> pl.DataFrame:
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return pl.DataFrame({"cp": cps, "c": [chr(c) for c in cps]})


def _rust_ranges(pattern: str) -> list[tuple[int, int]]:
    """Code point ranges matching `pattern` (a one-character regex) in the Rust regex crate,
    which Polars (and HF tokenizers) use."""
    df = _chars()
    return _ranges(df.filter(pl.col("c").str.contains(f"^(?:{pattern})$")).get_column(
        "cp").to_list())


def _re2_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)


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
    `python scripts/gen_duckdb_text_sql.py --regenerate`)."""
    w = _re2_class(_rust_ranges(r"\w"))
    s = _re2_class(_rust_ranges(r"\s"))
    letter = _re2_class(_rust_ranges(r"\p{L}"))
    number = _re2_class(_rust_ranges(r"\p{N}"))
    punct = _re2_class(HF_PUNCTUATION)
    digits = _re2_class(_rust_ranges(NUMERIC_CLASS))
    src, dst, multi = _lowercase_fixes()
    breaks = r"\x{0B}\x{0C}\x{1C}\x{1D}\x{1E}\x{85}\x{2028}\x{2029}"
    nmt = rf"[^ \x{{0D}}\x{{0A}}{breaks}]*[{breaks}]|[^ \x{{0D}}\x{{0A}}{breaks}]+"
    lower = "replace(t, 'Σ', 'σ')"
    for c, r in multi:
        lower = f"replace({lower}, {_sql_str(c)}, {_sql_str(r)})"
    lower = f"lower(translate({lower}, {_sql_str(src)}, {_sql_str(dst)}))"
    gpt2 = (r"'s|'t|'re|'ve|'m|'ll|'d| ?[" + letter + r"]+| ?[" + number + r"]+| ?[^"
            + s + letter + number + r"\x{FDD0}]+|[" + s + "]+")
    nd = normalization_data()
    dec = nd["decomp"]
    canon = dec.filter(pl.col("nfd") != pl.col("c")).get_column("c").to_list()
    compat = dec.filter(pl.col("nfkd") != pl.col("nfd")).get_column("c").to_list()
    hangul = rf"\x{{{HANGUL[0]:X}}}-\x{{{HANGUL[1]:X}}}"
    ns = _class_of(nd["ccc"])
    newer = _class_of(nd["newer"])
    return f"""-- Stage 1: text functions for the counting stage (GENERATED: do not edit by hand;
-- regenerate with `python scripts/gen_duckdb_text_sql.py --regenerate`).
--
-- In:  nothing. Out: macros used by stage 3.
--   tc_pretokenize(text, kind) -> VARCHAR[]  the words of a text:
--     'whitespace'        HF Whitespace, `\\w+|[^\\w\\s]+`
--     'whitespace-split'  HF WhitespaceSplit, `\\S+`
--     'subword-nmt'       subword-nmt's split: ASCII spaces only (and its line ends)
--     'bert'              HF BertPreTokenizer: whitespace, each punctuation character alone
--     'byte-level'        HF ByteLevel's GPT-2 regex split (pieces still escaped, and before
--                         the byte mapping: tc_byte_level_word maps each distinct piece)
--     'metaspace'         HF Metaspace() (replacement U+2581, prepend_scheme always, split)
--     'digits'            HF Digits(individual_digits=False)
--     'none'              the whole text as one word (nothing for '')
--   tc_byte_level_word(piece) -> VARCHAR     unescape, then every UTF-8 byte as its GPT-2 char
--   tc_lowercase(text) -> VARCHAR            HF Lowercase (char::to_lowercase per character)
--   tc_bert_clean(text, clean, chinese)      BertNormalizer's clean_text / handle_chinese_chars
--   tc_strip_nonspacing(text)                BertNormalizer's accent stripping after NFD
--   tc_has_decomposable(text, form), tc_has_nonstarter_pair(text), tc_has_newer(text),
--   tc_hangul_nfd(char): the tests the normalization steps of stage 3 select rows with.
--
-- Why generated: DuckDB's regexes are RE2, where \\w and \\s are ASCII only and \\p{{L}} etc.
-- follow an older Unicode version than the Rust regex crate behind Polars and HF tokenizers.
-- The classes below are the exact code point sets of Rust's \\w (Alphabetic, M, Nd, Pc,
-- Join_Control), \\s (White_Space), \\p{{L}}, \\p{{N}} (and Digits' char::is_numeric), listed
-- as ranges, so both engines split identically; the BERT punctuation, control and mark
-- classes are HF's tables (tokcolumnar/text/unicode_tables.py, pretokenizers.py), as in the Polars
-- engine.
-- Likewise lower() (utf8proc) differs from Rust's char::to_lowercase on {len(src) + len(multi)}
-- code points (newer characters, U+0130): the translate / replace tables close the gap; a
-- capital sigma becomes σ first, as HF's Lowercase (and the Polars engine) does.
--
-- GPT-2's `\\s+(?!\\S)` has no RE2 form; it is emulated as the Polars engine does
-- (tokcolumnar/text/pretokenizers.py): U+FDD0 is inserted before the last character of a
-- whitespace run that a non-space follows, and left out of every class, after escaping any
-- U+FDD0 / U+FDD1 already in the text (U+FDD1 U+FDD1 / U+FDD1 U+FDD2).

CREATE OR REPLACE MACRO tc_pretokenize(t, kind) AS
    CASE kind
        WHEN 'whitespace' THEN regexp_extract_all(t, '[{w}]+|[^{w}{s}]+')
        WHEN 'whitespace-split' THEN regexp_extract_all(t, '[^{s}]+')
        WHEN 'subword-nmt' THEN regexp_extract_all(t, '{nmt}')
        WHEN 'bert' THEN regexp_extract_all(t, '[{punct}]|[^{s}{punct}]+')
        WHEN 'byte-level' THEN regexp_extract_all(
            regexp_replace(replace(replace(t, chr(64977), chr(64977) || chr(64977)),
                                   chr(64976), chr(64977) || chr(64978)),
                           '([{s}]+)([{s}][^{s}])', '\\1' || chr(64976) || '\\2', 'g'),
            {_sql_str(gpt2)})
        WHEN 'metaspace' THEN regexp_extract_all(
            CASE WHEN t = '' OR starts_with(replace(t, ' ', '▁'), '▁') THEN replace(t, ' ', '▁')
                 ELSE '▁' || replace(t, ' ', '▁') END, '▁[^▁]*|[^▁]+')
        WHEN 'digits' THEN regexp_extract_all(t, '[{digits}]+|[^{digits}]+')
        WHEN 'none' THEN CASE WHEN t = '' THEN []::VARCHAR[] ELSE [t] END
    END;

-- A GPT-2 byte character per UTF-8 byte: bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for
-- themselves, the others are U+0100.. in byte order (tokcolumnar/text/bytelevel.py).
CREATE OR REPLACE MACRO tc_byte_char(b) AS
    chr(CASE WHEN b <= 32 THEN 256 + b
             WHEN b BETWEEN 127 AND 160 THEN b + 162
             WHEN b = 173 THEN 323
             ELSE b END);

CREATE OR REPLACE MACRO tc_byte_level_word(p) AS
    array_to_string(list_transform(
        regexp_extract_all(hex(CASE WHEN strpos(p, chr(64977)) = 0 THEN p
                                    ELSE array_to_string(list_transform(
                                        regexp_extract_all(p, '\\x{{FDD1}}.|[^\\x{{FDD1}}]+'),
                                        lambda x: CASE x
                                            WHEN chr(64977) || chr(64977) THEN chr(64977)
                                            WHEN chr(64977) || chr(64978) THEN chr(64976)
                                            ELSE x END), '') END), '..'),
        lambda h: tc_byte_char(('0x' || h)::INTEGER)), '');

CREATE OR REPLACE MACRO tc_lowercase(t) AS
    {lower};

CREATE OR REPLACE MACRO tc_bert_cleaned(t) AS
    regexp_replace(regexp_replace(t, '[{_re2_class(HF_CLEAN_REMOVED)}]', '', 'g'),
                   '[{s}]', ' ', 'g');

CREATE OR REPLACE MACRO tc_bert_clean(t, clean, chinese) AS
    CASE WHEN chinese
         THEN regexp_replace(CASE WHEN clean THEN tc_bert_cleaned(t) ELSE t END,
                             '([{_re2_class(HF_CHINESE_CHARS)}])', ' \\1 ', 'g')
         WHEN clean THEN tc_bert_cleaned(t)
         ELSE t
    END;

CREATE OR REPLACE MACRO tc_strip_nonspacing(t) AS
    regexp_replace(t, '[{_re2_class(HF_NONSPACING_MARK)}]', '', 'g');

-- Rows that need a normalization step: a character with a canonical ('nfd'), any ('nfkd') or
-- a compatibility-only ('compat': NFKD differs from NFD) decomposition; two non-starters in a
-- row (canonical reordering); a character DuckDB's nfc_normalize may not know (newer Unicode).
CREATE OR REPLACE MACRO tc_has_decomposable(t, form) AS
    CASE form
        WHEN 'nfd' THEN regexp_matches(t, '[{_class_of(canon)}{hangul}]')
        WHEN 'nfkd' THEN regexp_matches(t, '[{_class_of(canon + compat)}{hangul}]')
        WHEN 'compat' THEN regexp_matches(t, '[{_class_of(compat)}]')
    END;

CREATE OR REPLACE MACRO tc_has_nonstarter_pair(t) AS
    regexp_matches(t, '[{ns}][{ns}]');

CREATE OR REPLACE MACRO tc_has_newer(t) AS
    regexp_matches(t, '[{newer}]');

CREATE OR REPLACE MACRO tc_hangul_nfd(ch) AS
    CASE WHEN unicode(ch) BETWEEN {HANGUL[0]} AND {HANGUL[1]}
         THEN chr(4352 + (unicode(ch) - {HANGUL[0]}) // 588)
              || chr(4449 + ((unicode(ch) - {HANGUL[0]}) % 588) // 28)
              || CASE WHEN (unicode(ch) - {HANGUL[0]}) % 28 = 0 THEN ''
                      ELSE chr(4519 + (unicode(ch) - {HANGUL[0]}) % 28) END
         ELSE ch
    END;
"""


# --- Unicode normalization (sql/01b_unicode_tables.sql) ---------------------------------------
HANGUL = (0xAC00, 0xD7A3)  # syllables: decomposed / composed arithmetically in SQL, not listed


@functools.lru_cache(maxsize=1)
def normalization_data() -> dict:
    """Everything NFC/NFD/NFKC/NFKD need, measured through Polars (the `unicode-normalization`
    crate): full decompositions, canonical combining classes, primary compositions, and the
    characters DuckDB's own nfc_normalize (utf8proc, older Unicode) may treat differently."""
    df = _chars().with_columns(nfd=pl.col("c").str.normalize("NFD"),
                               nfkd=pl.col("c").str.normalize("NFKD"),
                               nfc=pl.col("c").str.normalize("NFC"))
    hangul = pl.col("cp").is_between(*HANGUL)
    decomp = df.filter(((pl.col("nfd") != pl.col("c")) | (pl.col("nfkd") != pl.col("c")))
                       & ~hangul)
    # Canonical combining classes of the characters that do not decompose, by probing Polars'
    # canonical reordering: a non-starter swaps with U+0334 (ccc 1) after it or U+0345 (ccc 240)
    # before it; then its class is found against one reference mark of each class.
    atomic = df.filter(pl.col("nfd") == pl.col("c"))
    probe = atomic.filter(
        ((pl.lit("a") + pl.col("c") + pl.lit("\u0334")).str.normalize("NFD")
         == pl.lit("a\u0334") + pl.col("c"))
        | ((pl.lit("a\u0345") + pl.col("c")).str.normalize("NFD")
           == pl.lit("a") + pl.col("c") + pl.lit("\u0345")))
    refs: dict[int, str] = {}
    for cp in range(0x300, 0x20000):
        k = unicodedata.combining(chr(cp))
        if k and k not in refs and unicodedata.normalize("NFD", chr(cp)) == chr(cp):
            refs[k] = chr(cp)
    ccc: dict[str, int] = {}
    for c in probe.get_column("c").to_list():
        after = pl.Series([f"a{c}{r}" for r in refs.values()]).str.normalize("NFD").to_list()
        before = pl.Series([f"a{r}{c}" for r in refs.values()]).str.normalize("NFD").to_list()
        equal = [k for (k, r), x, y in zip(refs.items(), after, before)
                 if x == f"a{c}{r}" and y == f"a{r}{c}"]
        if len(equal) != 1:
            raise RuntimeError(f"cannot measure the combining class of U+{ord(c):04X}")
        ccc[c] = equal[0]
    # Primary compositions (a, b) -> c: b the last character of NFD(c), a the composition of
    # the rest, verified (NFC(a b) == c, NFD(a) b == NFD(c)) and, for the characters Python's
    # Unicode database knows, equal to its canonical decomposition mapping.
    cands = df.filter((pl.col("nfc") == pl.col("c")) & (pl.col("nfd").str.len_chars() >= 2)
                      & ~hangul)
    cs, ds = cands.get_column("c").to_list(), cands.get_column("nfd").to_list()
    firsts = pl.Series([d[:-1] for d in ds]).str.normalize("NFC").to_list()
    pairs = [(a, d[-1]) for a, d in zip(firsts, ds)]
    nfc = pl.Series([a + b for a, b in pairs]).str.normalize("NFC").to_list()
    nfd_a = pl.Series([a for a, _ in pairs]).str.normalize("NFD").to_list()
    rows: list[tuple[str, str, str]] = []
    for c, d, (a, b), got, da in zip(cs, ds, pairs, nfc, nfd_a):
        if len(a) != 1 or got != c or da + b != d:
            continue  # not a primary composite (e.g. a composition exclusion)
        known = unicodedata.decomposition(c)
        if known and not known.startswith("<") and known != f"{ord(a):04X} {ord(b):04X}":
            raise RuntimeError(f"composition of U+{ord(c):04X}: measured {a!r} {b!r}, "
                               f"Unicode database {known}")
        rows.append((a, b, c))
    # Characters with a normalization property that Python's (older) Unicode database does not
    # assign: DuckDB's utf8proc may not know them either, so rows holding one are normalized
    # with the tables above only (the measured differences must be among them).
    props = (set(decomp.get_column("c").to_list()) | set(ccc)
             | {x for r in rows for x in r})
    newer = sorted(c for c in props if unicodedata.category(c) == "Cn")
    return {"decomp": decomp.select("c", "nfd", "nfkd"), "ccc": ccc, "compose": rows,
            "newer": newer, "unidata": unicodedata.unidata_version}


def _hex(s: str) -> str:
    return ".".join(f"{ord(ch):X}" for ch in s)


def _class_of(chars) -> str:
    return _re2_class(_ranges(sorted({ord(c) for c in chars})))


def unicode_tables_sql() -> str:
    """The text of sql/01b_unicode_tables.sql."""
    d = normalization_data()
    dec = d["decomp"]
    entries = []
    for c, nfd, nfkd in dec.iter_rows():
        entries.append(f"{_hex(c)}={_hex(nfd) if nfd != c else ''}="
                       f"{_hex(nfkd) if nfkd != nfd else ''}")
    ccc = ";".join(f"{_hex(c)}={k:X}" for c, k in sorted(d["ccc"].items()))
    comp = ";".join(f"{_hex(a)}={_hex(b)}={_hex(c)}" for a, b, c in d["compose"])
    body = ";".join(entries)
    return f"""-- Stage 1b: Unicode normalization tables (GENERATED: do not edit by hand; regenerate
-- with `python scripts/gen_duckdb_text_sql.py --regenerate`).
--
-- In: nothing. Out: three tables read by the normalization steps of stage 3.
--   tc_uni_decomp(c, nfd, compat)  {dec.height:,} characters: nfd = the full canonical
--       decomposition (NULL when the character is its own), compat = the full compatibility
--       decomposition where it differs from nfd (else NULL). Hangul syllables are not listed:
--       stage 3 decomposes them arithmetically.
--   tc_uni_ccc(c, ccc)             the canonical combining class of the {len(d["ccc"]):,}
--       non-starters (every other character has class 0).
--   tc_uni_compose(a, b, c)        the {len(d["compose"]):,} primary compositions a + b -> c
--       (Hangul arithmetic apart).
--
-- All three are measured through Polars (Rust's `unicode-normalization` crate, the normalizer
-- of the Polars engine), not taken from DuckDB, whose nfc_normalize (utf8proc) follows an older
-- Unicode version. Code points are written in hex ('.' between the characters of a string).
-- The reference marks of each combining class and the set of characters newer than DuckDB's
-- tables come from Python's unicodedata (generated with Unicode {d["unidata"]}).

CREATE OR REPLACE MACRO tc_hex_chars(h) AS
    CASE WHEN h = '' THEN NULL
         ELSE array_to_string(list_transform(string_split(h, '.'),
                                             lambda x: chr(('0x' || x)::INTEGER)), '')
    END;

CREATE OR REPLACE TABLE tc_uni_decomp AS
SELECT tc_hex_chars(f[1]) AS c, tc_hex_chars(f[2]) AS nfd, tc_hex_chars(f[3]) AS compat
FROM (SELECT string_split(unnest(string_split('{body}', ';')), '=') AS f);

CREATE OR REPLACE TABLE tc_uni_ccc AS
SELECT tc_hex_chars(f[1]) AS c, ('0x' || f[2])::INTEGER AS ccc
FROM (SELECT string_split(unnest(string_split('{ccc}', ';')), '=') AS f);

CREATE OR REPLACE TABLE tc_uni_compose AS
SELECT tc_hex_chars(f[1]) AS a, tc_hex_chars(f[2]) AS b, tc_hex_chars(f[3]) AS c
FROM (SELECT string_split(unnest(string_split('{comp}', ';')), '=') AS f);
"""


if __name__ == "__main__":  # pragma: no cover
    import sys

    if "--regenerate" in sys.argv:
        for name, text in (("01_text_functions.sql", text_functions_sql()),
                           ("01b_unicode_tables.sql", unicode_tables_sql())):
            (SQL_DIR / name).write_text(text, encoding="utf-8")
            print(f"wrote {SQL_DIR / name}")
