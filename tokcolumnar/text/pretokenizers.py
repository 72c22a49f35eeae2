"""Pre-tokenizers: string -> list of words, written as Polars expressions (regex extraction),
so a whole chunk of sequences is split in one columnar call. Each serialises to HF JSON and gives
exactly the pieces of HF's `pre_tokenize_str` (tokenizers 0.23), with the notes below.

How the HF behaviours are emulated without look-around (Polars uses the Rust regex crate):

* ByteLevel: GPT-2's `\\s+(?!\\S)` only matters for a whitespace run of two or more characters
  followed by a non-space, which HF cuts before the run's last character. We insert a marker
  (U+FDD0) there with one `replace_all`, and leave the marker out of every class of the pattern,
  so no piece matches it or crosses it; then `\\s+(?!\\S)|\\s+` is plain `\\s+`. A text that already
  contains the marker is first escaped (U+FDD1 U+FDD1 for U+FDD1, U+FDD1 U+FDD2 for U+FDD0): the
  escape characters fall in the same class as the marker (`[^\\s\\p{L}\\p{N}]`), so the pieces are
  the same, and each piece is unescaped afterwards. Then every UTF-8 byte is mapped to its GPT-2
  character (`bytelevel.byte_map_expr`).
* Split with a user regex: the matches are bracketed with a marker character that does not occur
  in the chunk (the first of U+FDD3..U+FDEF, U+E000..U+F8FF absent from it, found in one regex
  scan; a chunk holding all 6,429 of them raises), then the string is split on it. Each
  behaviour (removed, isolated, merged_with_previous, merged_with_next, contiguous) and `invert`
  are placements of the markers.
* Character classes: `\\p{L}`, `\\p{N}`, `\\s` of Polars' regex crate and of HF's Oniguruma agree on
  every code point (checked over all of Unicode by the tests). HF's Bert/Punctuation
  pre-tokenizers test punctuation with the `unicode_categories` crate, whose tables are older;
  `HF_PUNCTUATION` below is that exact set (re-checked against HF by the tests). HF's Digits
  uses Rust's `char::is_numeric`, which in HF's build knows Unicode 17: `NUMERIC_CLASS` adds the
  13 numbers Unicode 17 assigned to Polars' (Unicode 16) `\\p{N}`.
  So all of these agree with HF on every code point, and the property tests exclude nothing.

Known differences from HF:
* Split: a pattern HF runs with Oniguruma is translated to Rust regex syntax
  (`normalizers.onig_to_rust`); patterns with look-around, atomic groups or backreferences are
  rejected with an error, except GPT-2's pattern, recognised and run as above, and the LLM
  patterns of `patterns.py` (cl100k, o200k, qwen2, isolated only), run by `llm_split`; the
  Sequence of such a Split and `ByteLevel(use_regex=False)` is `PatternByteLevel`. For patterns that
  can match the empty string, only `isolated` and `removed` are exact.
* Metaspace(prepend_scheme="first") inside a Sequence prepends to a piece when it is the first
  piece and the sequence starts with it; HF asks whether the piece starts at original offset 0,
  which differs only when an earlier step removed or rewrote the start of the sequence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, component_type
from .backtracking import compile_onig
from .backtracking import split_expr as backtracking_split_expr
from .bytelevel import byte_map_expr
from .gpt2_split import gpt2_pieces
from .llm_split import llm_pieces, llm_split_expr
from .patterns import CL100K_TIKTOKEN_POSSESSIVE, NamedPattern, named_pattern, recognise
from .regex import check_regex, escape_regex, onig_to_rust, pattern_from_hf
from .unicode_tables import class_body, ranges

# HF `Whitespace`: `\w+|[^\w\s]+` with the Rust regex crate's Unicode classes; Polars uses the
# same crate, so the classes agree.
WHITESPACE_PATTERN = r"\w+|[^\w\s]+"

# HF's GPT-2 pattern (ByteLevel), as HF writes it.
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Punctuation for BertPreTokenizer / Punctuation: `is_ascii_punctuation` or general category P*
# in HF's (older) `unicode_categories` tables.
HF_PUNCTUATION = ranges(
    (0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E), 0xA1, 0xA7, 0xAB, (0xB6, 0xB7), 0xBB,
    0xBF, 0x37E, 0x387, (0x55A, 0x55F), (0x589, 0x58A), 0x5BE, 0x5C0, 0x5C3, 0x5C6,
    (0x5F3, 0x5F4), (0x609, 0x60A), (0x60C, 0x60D), 0x61B, (0x61E, 0x61F), (0x66A, 0x66D), 0x6D4,
    (0x700, 0x70D), (0x7F7, 0x7F9), (0x830, 0x83E), 0x85E, (0x964, 0x965), 0x970, 0xAF0, 0xDF4,
    0xE4F, (0xE5A, 0xE5B), (0xF04, 0xF12), 0xF14, (0xF3A, 0xF3D), 0xF85, (0xFD0, 0xFD4),
    (0xFD9, 0xFDA), (0x104A, 0x104F), 0x10FB, (0x1360, 0x1368), 0x1400, (0x166D, 0x166E),
    (0x169B, 0x169C), (0x16EB, 0x16ED), (0x1735, 0x1736), (0x17D4, 0x17D6), (0x17D8, 0x17DA),
    (0x1800, 0x180A), (0x1944, 0x1945), (0x1A1E, 0x1A1F), (0x1AA0, 0x1AA6), (0x1AA8, 0x1AAD),
    (0x1B5A, 0x1B60), (0x1BFC, 0x1BFF), (0x1C3B, 0x1C3F), (0x1C7E, 0x1C7F), (0x1CC0, 0x1CC7),
    0x1CD3, (0x2010, 0x2027), (0x2030, 0x2043), (0x2045, 0x2051), (0x2053, 0x205E),
    (0x207D, 0x207E), (0x208D, 0x208E), (0x2308, 0x230B), (0x2329, 0x232A), (0x2768, 0x2775),
    (0x27C5, 0x27C6), (0x27E6, 0x27EF), (0x2983, 0x2998), (0x29D8, 0x29DB), (0x29FC, 0x29FD),
    (0x2CF9, 0x2CFC), (0x2CFE, 0x2CFF), 0x2D70, (0x2E00, 0x2E2E), (0x2E30, 0x2E42),
    (0x3001, 0x3003), (0x3008, 0x3011), (0x3014, 0x301F), 0x3030, 0x303D, 0x30A0, 0x30FB,
    (0xA4FE, 0xA4FF), (0xA60D, 0xA60F), 0xA673, 0xA67E, (0xA6F2, 0xA6F7), (0xA874, 0xA877),
    (0xA8CE, 0xA8CF), (0xA8F8, 0xA8FA), 0xA8FC, (0xA92E, 0xA92F), 0xA95F, (0xA9C1, 0xA9CD),
    (0xA9DE, 0xA9DF), (0xAA5C, 0xAA5F), (0xAADE, 0xAADF), (0xAAF0, 0xAAF1), 0xABEB,
    (0xFD3E, 0xFD3F), (0xFE10, 0xFE19), (0xFE30, 0xFE52), (0xFE54, 0xFE61), 0xFE63, 0xFE68,
    (0xFE6A, 0xFE6B), (0xFF01, 0xFF03), (0xFF05, 0xFF0A), (0xFF0C, 0xFF0F), (0xFF1A, 0xFF1B),
    (0xFF1F, 0xFF20), (0xFF3B, 0xFF3D), 0xFF3F, 0xFF5B, 0xFF5D, (0xFF5F, 0xFF65),
    (0x10100, 0x10102), 0x1039F, 0x103D0, 0x1056F, 0x10857, 0x1091F, 0x1093F, (0x10A50, 0x10A58),
    0x10A7F, (0x10AF0, 0x10AF6), (0x10B39, 0x10B3F), (0x10B99, 0x10B9C), (0x11047, 0x1104D),
    (0x110BB, 0x110BC), (0x110BE, 0x110C1), (0x11140, 0x11143), (0x11174, 0x11175),
    (0x111C5, 0x111C9), 0x111CD, 0x111DB, (0x111DD, 0x111DF), (0x11238, 0x1123D), 0x112A9,
    0x114C6, (0x115C1, 0x115D7), (0x11641, 0x11643), (0x1173C, 0x1173E), (0x12470, 0x12474),
    (0x16A6E, 0x16A6F), 0x16AF5, (0x16B37, 0x16B3B), 0x16B44, 0x1BC9F, (0x1DA87, 0x1DA8B),
)
# `char::is_numeric` (HF's Digits) in HF's Rust, which knows Unicode 17: `\p{N}` of Polars'
# regex crate (Unicode 16) plus the numbers Unicode 17 added (U+11DE0..U+11DE9, U+16FF4..U+16FF6).
NUMERIC_CLASS = r"[\p{N}\x{11DE0}-\x{11DE9}\x{16FF4}-\x{16FF6}]"

_PUNCT = class_body(HF_PUNCTUATION)
BERT_PATTERN = f"[{_PUNCT}]|[^\\s{_PUNCT}]+"

_MARK = "\ufdd0"
_ESC = "\ufdd1"
_ESC_MARK = "\ufdd2"
# The GPT-2 pattern once the marker is in place (see the module docstring).
_GPT2_SPLIT = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}\x{FDD0}]+|\s+")
# Split's marker candidates: the other noncharacters of U+FDD0..U+FDEF, then the BMP private use
# area; the first one absent from a chunk is used.
_SPLIT_MARKERS = pl.Series([chr(c) for c in [*range(0xFDD3, 0xFDF0), *range(0xE000, 0xF900)]],
                           dtype=pl.String)
_SPLIT_MARKERS_RE = r"[\x{FDD3}-\x{FDEF}\x{E000}-\x{F8FF}]"

BEHAVIORS = ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous")
_HF_BEHAVIOR = {"removed": "Removed", "isolated": "Isolated",
                "merged_with_previous": "MergedWithPrevious", "merged_with_next": "MergedWithNext",
                "contiguous": "Contiguous"}
_BEHAVIOR_FROM_HF = {v: k for k, v in _HF_BEHAVIOR.items()}


# Where the corpus reader may cut a long line without changing a pre-tokenizer's words: each
# pre-tokenizer names its kind of cut (`PreTokenizer.line_cut`); the rule of each kind, and why
# it is exact, are the reader's (`corpus.line_cuts`).
AFTER_WHITESPACE = "after-whitespace"  # Whitespace, WhitespaceSplit, Bert
AFTER_SPACE_OR_CR = "after-space-or-cr"  # subword-nmt's split (keeps tabs inside words)
AFTER_WHITESPACE_OR_CJK = "after-whitespace-or-cjk"  # ... or after CJK punctuation
BEFORE_SPACE_AFTER_ASCII = "before-space-after-ascii"  # ByteLevel with add_prefix_space
BYTE_LEVEL_CUT = "byte-level"  # ByteLevel: the above, or after CJK punctuation
BEFORE_SPACE = "before-space"  # Metaspace (split)
LINE_CUT_KINDS = (AFTER_WHITESPACE, AFTER_SPACE_OR_CR, AFTER_WHITESPACE_OR_CJK,
                  BEFORE_SPACE_AFTER_ASCII, BYTE_LEVEL_CUT, BEFORE_SPACE)


def whitespace_chunks(col: pl.Expr) -> pl.Expr:
    """`col` cut at every ASCII space and line feed (both removed): the chunks of a
    pre-tokenizer none of whose pieces holds either character (`PreTokenizer.chunk_expr`).
    Each piece is a run of characters between two such cuts, so the pieces of the text are
    the chunks' pieces in order; other whitespace (tabs, CR, U+3000...) stays inside the
    chunks, where the pre-tokenizer's own pattern treats it as in the whole text. Literal
    replace and split: no regex runs over the text."""
    return col.str.replace_all("\n", " ", literal=True).str.split(" ")


def _behavior(b: str) -> str:
    key = _BEHAVIOR_FROM_HF.get(b, b).lower()
    if key not in BEHAVIORS:
        raise TokcolumnarValueError(f"unknown split behavior {b!r} "
                                    f"(choose from {', '.join(BEHAVIORS)})")
    return key


def _non_empty(lst: pl.Expr) -> pl.Expr:
    return lst.list.eval(pl.element().filter(pl.element().str.len_bytes() > 0))


def _whole(col: pl.Expr) -> pl.Expr:
    """The string itself as the only piece ([] for an empty string)."""
    return col.str.extract_all(r"(?s).+")


def gpt2_split_expr(col: pl.Expr) -> pl.Expr:
    """Split with the GPT-2 pattern. Pieces come out escaped (see `gpt2_unescape`)."""
    s = col.str.replace_many([_ESC, _MARK], [_ESC + _ESC, _ESC + _ESC_MARK])
    s = s.str.replace_all(r"(\s+)(\s\S)", "${1}" + _MARK + "${2}")
    return s.str.extract_all(_GPT2_SPLIT)


def gpt2_unescape(piece: pl.Expr) -> pl.Expr:
    return piece.str.replace_many([_ESC + _ESC, _ESC + _ESC_MARK], [_ESC, _MARK])


def split_class(col: pl.Expr, cls: str, behavior: str) -> pl.Expr:
    """HF `split` on a one-character class `cls` (a bracketed class or `\\p{..}`), whose
    complement is `ncls`: each character of the class is one match."""
    ncls = "[^" + cls[1:] if cls.startswith("[") else "\\P" + cls[2:]
    pattern = {"removed": f"{ncls}+", "isolated": f"{cls}|{ncls}+",
               "merged_with_previous": f"{ncls}*{cls}|{ncls}+",
               "merged_with_next": f"{cls}{ncls}*|{ncls}+", "contiguous": f"{cls}+|{ncls}+"}
    return col.str.extract_all(pattern[behavior])


def _pick_marker(col: pl.Expr) -> pl.Expr:
    """A scalar expression: the first character of `_SPLIT_MARKERS` that does not occur in `col`
    (one regex scan of the chunk, which normally finds none of them)."""
    present = col.str.extract_all(_SPLIT_MARKERS_RE).explode().drop_nulls().unique().implode()
    pool = pl.lit(_SPLIT_MARKERS)
    marker = pool.filter(pool.is_in(present).not_()).first()
    # Raise (as a failed conversion naming the problem) when every candidate occurs.
    guard = (pl.when(marker.is_null())
             .then(pl.lit("tokcolumnar: Split cannot run: this chunk contains every marker "
                          "candidate (U+FDD3..U+FDEF and U+E000..U+F8FF)"))
             .otherwise(pl.lit("0")).str.to_integer(strict=True))
    return pl.concat_str([marker, guard.cast(pl.String).str.slice(0, 0)])


def split_pattern(col: pl.Expr, regex: str, behavior: str, invert: bool,
                  literal: str | None = None) -> pl.Expr:
    """HF `NormalizedString::split(pattern, behavior)` (with `Invert` when `invert`) for a Rust
    regex; `literal` is the matched text when the pattern is a literal string."""
    if behavior == "removed" and invert:
        return _non_empty(col.str.extract_all(regex))
    m = _pick_marker(col)
    match = pl.lit(literal) if literal is not None else pl.lit("${0}")
    if behavior == "removed":
        value = m
    elif behavior in ("isolated", "contiguous"):
        value = pl.concat_str([m, match, m])
    elif (behavior == "merged_with_previous") != invert:
        value = pl.concat_str([match, m])
    else:
        value = pl.concat_str([m, match])
    if literal is not None:
        s = col.str.replace_all(literal, value, literal=True)
    else:
        s = col.str.replace_all(regex, value)
    if behavior == "contiguous":  # adjacent matches form one piece
        s = s.str.replace_all(pl.concat_str([m, m]), pl.lit(""), literal=True)
    return _non_empty(s.str.split(m))


class PreTokenizer:
    """Base class. `expr(col)` maps a string expression to a list[str] expression of words.

    `line_sensitive` is False when splitting a chunk of many lines at once gives the same words
    as splitting line by line (true for any pre-tokenizer that drops whitespace); the corpus
    reader then skips the per-line split.

    `split_expr(col)` and `word_expr(word)` are the same work in two steps, for callers that
    count words: `expr(col) == split_expr(col).list.eval(word_expr(pl.element()))`, and
    `word_expr` is one-to-one, so counting the pieces of `split_expr` and applying `word_expr`
    to the distinct pieces only gives the same counts much faster (ByteLevel's byte mapping).

    `line_cut()` says where the corpus reader may cut a long line without changing its words
    (one of `LINE_CUT_KINDS`, whose rules are `corpus.line_cuts`'), or None when it may not
    (lines are then read whole, up to a bound).

    `chunk_expr(col)` (with `chunk_prefix()`) cuts a text into chunks whose pieces are the
    text's, for counters that run `split_expr` on the distinct chunks only (see
    docs/architecture.md, "Counting"); None when the pre-tokenizer has no such cut."""

    hf_type: ClassVar[str] = ""
    line_sensitive: ClassVar[bool] = True
    registry: ClassVar[dict[str, type[PreTokenizer]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hf_type:
            PreTokenizer.registry[cls.hf_type] = cls

    def expr(self, col: pl.Expr) -> pl.Expr:
        raise NotImplementedError

    def line_cut(self) -> str | None:
        return None

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        return self.expr(col)

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        """The text cut into *chunks* (a list[str] expression) such that the pieces of
        `split_expr` of the text are those of each chunk, chunk after chunk; None when the
        pre-tokenizer has no such cut. A counter then splits each distinct chunk once
        (`corpus.counting.count_chunk`): most chunks repeat, and a literal cut is much
        cheaper than the regex."""
        return None

    def chunk_prefix(self) -> str:
        """What every chunk of `chunk_expr` but a row's first stands for before its text (the
        space a cut removed and the next piece begins with): "" when nothing."""
        return ""

    def word_expr(self, word: pl.Expr) -> pl.Expr:
        return word

    def encode_split_expr(self, col: pl.Expr) -> pl.Expr:
        """The pieces the encoder looks up in its word cache (which applies `word_expr`):
        `split_expr`, unless a piece needs more than a split to become words (a segmenter)."""
        return self.split_expr(col)

    def encode_split_flat(self, texts: pl.Series) -> tuple[np.ndarray, pl.Series] | None:
        """`encode_split_expr` of every text, flat: the number of pieces of each text (a null
        has none) and all the pieces in order, when the pre-tokenizer has a kernel faster than
        the expression; None otherwise (the caller runs the expression)."""
        return None

    def pieces_expr(self, pieces: pl.Expr, original: pl.Expr) -> pl.Expr:
        """Apply to each piece of a list[str] expression (inside a Sequence) and flatten."""
        return pieces.list.eval(self.expr(pl.element()).explode().drop_nulls())

    # -- offsets (see tokcolumnar/encode/offsets.py) -------------------------------------------
    def dropped_chars(self) -> str | None:
        """For offsets: a regex class of the characters the split drops, when the pieces of
        `encode_split_expr` (through `piece_text_expr`) are the other characters of the text in
        order, each piece a substring; "" when it drops nothing; None when the pieces are not
        substrings of the text (offsets are then not available)."""
        return None

    def prefix_expr(self, col: pl.Expr) -> pl.Expr | None:
        """For offsets: whether one character was put before the text (a boolean expression),
        None when never."""
        return None

    def piece_text_expr(self, piece: pl.Expr) -> pl.Expr:
        """For offsets: a piece of `encode_split_expr` as the text it covers."""
        return piece

    def maps_bytes(self) -> bool:
        """Whether the model sees each UTF-8 byte of a piece as one character (ByteLevel)."""
        return False

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def fields(cls, d: dict[str, Any]) -> HFObject:
        """`d` with typed field access, named in errors as `pre_tokenizer <type>`."""
        return HFObject(d, f"pre_tokenizer {cls.hf_type}")

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        cls.fields(d)
        return cls()

    def apply(self, texts: list[str]) -> list[list[str]]:
        """Pre-tokenize plain Python strings (used by the encoder and by tests)."""
        return pl.Series("t", texts, dtype=pl.String).to_frame().select(
            self.expr(pl.col("t"))).to_series().to_list()


@dataclass
class Whitespace(PreTokenizer):
    hf_type: ClassVar[str] = "Whitespace"
    line_sensitive: ClassVar[bool] = False

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        return whitespace_chunks(col)

    def line_cut(self) -> str | None:
        return AFTER_WHITESPACE_OR_CJK

    def dropped_chars(self) -> str | None:
        return r"\s"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(WHITESPACE_PATTERN)


@dataclass
class WhitespaceSplit(PreTokenizer):
    hf_type: ClassVar[str] = "WhitespaceSplit"
    line_sensitive: ClassVar[bool] = False

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        return whitespace_chunks(col)

    def line_cut(self) -> str | None:
        return AFTER_WHITESPACE

    def dropped_chars(self) -> str | None:
        return r"\s"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(r"\S+")


@dataclass
class BertPreTokenizer(PreTokenizer):
    """HF `BertPreTokenizer`: split on whitespace, each punctuation character on its own."""

    hf_type: ClassVar[str] = "BertPreTokenizer"
    line_sensitive: ClassVar[bool] = False

    def line_cut(self) -> str | None:
        return AFTER_WHITESPACE_OR_CJK

    def dropped_chars(self) -> str | None:
        return r"\s"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(BERT_PATTERN)


@dataclass
class ByteLevel(PreTokenizer):
    """HF `ByteLevel`: GPT-2 regex split (`use_regex`), then every UTF-8 byte as its GPT-2
    character. `add_prefix_space` puts a space before a non-empty sequence that does not
    start with one. `trim_offsets` only matters to HF's offsets; it is kept for the JSON."""

    hf_type: ClassVar[str] = "ByteLevel"
    add_prefix_space: bool = False
    trim_offsets: bool = True
    use_regex: bool = True

    def _prefixed(self, col: pl.Expr) -> pl.Expr:
        if not self.add_prefix_space:
            return col
        return (pl.when((col.str.len_bytes() > 0) & col.str.starts_with(" ").not_())
                .then(pl.lit(" ") + col).otherwise(col))

    def line_cut(self) -> str | None:
        if not self.use_regex:
            return None
        return BEFORE_SPACE_AFTER_ASCII if self.add_prefix_space else BYTE_LEVEL_CUT

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        col = self._prefixed(col)
        return gpt2_split_expr(col) if self.use_regex else _whole(col)

    def encode_split_flat(self, texts: pl.Series) -> tuple[np.ndarray, pl.Series] | None:
        """The GPT-2 pieces by `gpt2_split.gpt2_pieces` (2-8x faster than `extract_all`,
        which builds a string per piece). A batch holding the escape characters of
        `gpt2_split_expr` takes the expression: the word cache's keys are its escaped pieces,
        so both ways must give the same strings."""
        if not self.use_regex:
            return None
        if self.add_prefix_space:
            texts = texts.to_frame("text").select(self._prefixed(pl.col("text"))).to_series()
        return gpt2_pieces(texts, refuse=(ord(_MARK), ord(_ESC_MARK)))

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        """Each line cut before every ASCII space (which the next chunk stands for, see
        `chunk_prefix`); a line with whitespace right before a space stays whole. Exact: no
        GPT-2 piece holds a non-space followed by a space, so where the character before the
        space is not whitespace a piece ends there, and the piece after starts at the space;
        the pattern has no look-behind, and the `\\s+(?!\\S)` marker goes inside a run of two
        or more whitespace characters, which starts at that space at the earliest. Where a
        whitespace character precedes the space, HF may put the space into the run before
        (`\\s+(?!\\S)`), so such lines (few) are one chunk."""
        if not self.use_regex:
            return None
        line = self._prefixed(col)
        return (pl.when(line.str.contains(r"\s ")).then(pl.concat_list(line))
                .otherwise(line.str.split(" ")))

    def chunk_prefix(self) -> str:
        return " "

    def word_expr(self, word: pl.Expr) -> pl.Expr:
        return byte_map_expr(self.text_word_expr(word))

    def text_word_expr(self, word: pl.Expr) -> pl.Expr:
        """The word as text, before its UTF-8 bytes become characters (`word_expr`): a model
        that reads the bytes themselves (`BPEModel.encode_byte_words`) starts from it."""
        return gpt2_unescape(word) if self.use_regex else word

    def expr(self, col: pl.Expr) -> pl.Expr:
        return self.split_expr(col).list.eval(self.word_expr(pl.element()))

    def dropped_chars(self) -> str | None:
        return ""

    def prefix_expr(self, col: pl.Expr) -> pl.Expr | None:
        if not self.add_prefix_space:
            return None
        return (col.str.len_bytes() > 0) & col.str.starts_with(" ").not_()

    def piece_text_expr(self, piece: pl.Expr) -> pl.Expr:
        return gpt2_unescape(piece) if self.use_regex else piece

    def maps_bytes(self) -> bool:
        return True

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "add_prefix_space": self.add_prefix_space,
                "trim_offsets": self.trim_offsets, "use_regex": self.use_regex}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        f = cls.fields(d)
        return cls(f.bool("add_prefix_space", True), f.bool("trim_offsets", True),
                   f.bool("use_regex", True))


@dataclass
class Metaspace(PreTokenizer):
    """HF `Metaspace`: ' ' -> `replacement`; prepend it (`always`; `first`: only to the first
    piece; `never`) unless already there; with `split`, cut before each replacement."""

    hf_type: ClassVar[str] = "Metaspace"
    replacement: str = "▁"
    prepend_scheme: str = "always"
    split: bool = True

    def __post_init__(self) -> None:
        if len(self.replacement) != 1:
            raise TokcolumnarValueError("Metaspace: the replacement must be one character")
        if self.prepend_scheme not in ("always", "first", "never"):
            raise TokcolumnarValueError(f"Metaspace: unknown prepend_scheme "
                                        f"{self.prepend_scheme!r} (choose from always, first, "
                                        "never)")

    def line_cut(self) -> str | None:
        return BEFORE_SPACE if self.split else None

    def _one(self, col: pl.Expr, prepend: pl.Expr | bool) -> pl.Expr:
        r = self.replacement
        s = col.str.replace_all(" ", r, literal=True)
        if prepend is not False:
            cond = (s.str.len_bytes() > 0) & s.str.starts_with(r).not_()
            if prepend is not True:
                cond = cond & prepend
            s = pl.when(cond).then(pl.lit(r) + s).otherwise(s)
        if not self.split:
            return _whole(s)
        e = escape_regex(r)
        return s.str.extract_all(f"{e}[^{e}]*|[^{e}]+")

    def expr(self, col: pl.Expr) -> pl.Expr:
        return self._one(col, self.prepend_scheme != "never")

    def pieces_expr(self, pieces: pl.Expr, original: pl.Expr) -> pl.Expr:
        if self.prepend_scheme != "first":
            return super().pieces_expr(pieces, original)
        first = pieces.list.first()
        head = self._one(first, original.str.starts_with(first))
        tail = pieces.list.slice(1).list.eval(self._one(pl.element(), False).explode()
                                              .drop_nulls())
        return pl.concat_list(head.fill_null([]), tail)

    def dropped_chars(self) -> str | None:
        return ""  # spaces become the replacement, one for one

    def prefix_expr(self, col: pl.Expr) -> pl.Expr | None:
        if self.prepend_scheme == "never":
            return None
        r = self.replacement
        return (col.str.len_bytes() > 0) & col.str.replace_all(" ", r, literal=True) \
            .str.starts_with(r).not_()

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "replacement": self.replacement,
                "prepend_scheme": self.prepend_scheme, "split": self.split}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        f = cls.fields(d)
        scheme = f.str("prepend_scheme", None, nullable=True)
        if scheme is None:  # tokenizer.json files written before prepend_scheme existed
            scheme = "always" if f.bool("add_prefix_space", True) else "never"
        return cls(f.str("replacement", "▁"), scheme.lower(), f.bool("split", True))


@dataclass
class SentencePieceSplit(Metaspace):
    """The words `--preset llama2` trains on: a line (one trailing `\\n` dropped, as
    SentencePiece's `getline`) through Llama 2's normalizers — `Prepend("▁")` on every
    non-empty text, even one that starts with a space or a `▁` (HF's Metaspace would not
    prepend there), and `Replace(" ", "▁")` — then a word before each `▁` (SentencePiece's
    `SplitIntoWords`, whitespace-only pieces not allowed). Not a tokenizer.json component:
    Llama 2's file has these normalizers and no pre-tokenizer (`export.build_tokenizer`);
    since no trained piece holds a `▁` past its first character, no merge crosses the cut."""

    hf_type: ClassVar[str] = ""  # (not registered: read from no tokenizer.json)

    def line_cut(self) -> str | None:
        return None  # the `▁` in front is per line: a line is never cut

    def expr(self, col: pl.Expr) -> pl.Expr:
        r = self.replacement
        s = col.str.strip_suffix("\n").str.replace_all(" ", r, literal=True)
        s = pl.when(s.str.len_bytes() > 0).then(pl.lit(r) + s).otherwise(s)
        e = escape_regex(r)
        return s.str.extract_all(f"{e}[^{e}]*")

    def pieces_expr(self, pieces: pl.Expr, original: pl.Expr) -> pl.Expr:
        return PreTokenizer.pieces_expr(self, pieces, original)

    def prefix_expr(self, col: pl.Expr) -> pl.Expr | None:
        return col.str.len_bytes() > 0

    def to_hf(self) -> dict[str, Any] | None:  # type: ignore[override]
        return None


@dataclass
class Digits(PreTokenizer):
    """HF `Digits`: numbers (`char::is_numeric`, see `NUMERIC_CLASS`) apart from the rest;
    each digit on its own with `individual_digits`, else runs of digits together."""

    hf_type: ClassVar[str] = "Digits"
    individual_digits: bool = False

    def expr(self, col: pl.Expr) -> pl.Expr:
        return split_class(col, NUMERIC_CLASS,
                           "isolated" if self.individual_digits else "contiguous")

    def dropped_chars(self) -> str | None:
        return ""

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "individual_digits": self.individual_digits}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        return cls(cls.fields(d).bool("individual_digits", False))


@dataclass
class Punctuation(PreTokenizer):
    """HF `Punctuation`: split on each punctuation character with `behavior`."""

    hf_type: ClassVar[str] = "Punctuation"
    behavior: str = "isolated"

    def __post_init__(self) -> None:
        self.behavior = _behavior(self.behavior)

    def expr(self, col: pl.Expr) -> pl.Expr:
        return split_class(col, f"[{_PUNCT}]", self.behavior)

    def dropped_chars(self) -> str | None:
        return f"[{_PUNCT}]" if self.behavior == "removed" else ""

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "behavior": _HF_BEHAVIOR[self.behavior]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        return cls(cls.fields(d).str("behavior", "Isolated"))


@dataclass
class Split(PreTokenizer):
    """HF `Split(pattern, behavior, invert)`: `pattern` is a literal string, or with
    `regex=True` an HF regex (translated to Polars' engine, see the module docstring)."""

    hf_type: ClassVar[str] = "Split"
    pattern: str = " "
    behavior: str = "isolated"
    invert: bool = False
    regex: bool = False

    def __post_init__(self) -> None:
        self.behavior = _behavior(self.behavior)
        if not self.pattern:
            raise TokcolumnarValueError("Split: empty pattern")
        self._gpt2 = self.regex and self.pattern == GPT2_PATTERN
        self._python: re.Pattern[str] | None = None
        # an LLM pattern (cl100k, o200k, qwen2): split by `llm_split` (isolated only)
        named = recognise(self.pattern) if self.regex and not self._gpt2 else None
        self._llm = named
        if named is not None:
            if self.behavior != "isolated" or self.invert:
                raise TokcolumnarValueError(f"Split with the {named.name} pattern: only "
                                            "behavior=isolated, invert=False is supported")
            self._rust = ""
        elif self._gpt2:
            if self.behavior != "isolated" or self.invert:
                raise TokcolumnarValueError("Split with the GPT-2 pattern: only behavior=isolated, "
                                            "invert=False is supported")
            self._rust = ""
        elif self.regex and self.pattern == CL100K_TIKTOKEN_POSSESSIVE:
            raise TokcolumnarValueError(
                "Split: tiktoken 0.7+'s possessive rewrite of cl100k_base's pattern is not "
                "supported (HF and tiktoken split it differently: `{1,3}+` and `$` mean other "
                "things to Oniguruma); the original string (Llama 3's, --pattern cl100k) is")
        elif self.regex:
            try:
                self._rust = check_regex(onig_to_rust(self.pattern))
            except TokcolumnarValueError as e:
                if "look-around" not in str(e):
                    raise
                # look-around or an atomic group: Python's backtracking engine, once per
                # distinct text (`backtracking`)
                self._python = compile_onig(self.pattern)
                self._rust = ""
        else:
            self._rust = escape_regex(self.pattern)

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        if self._gpt2:
            return gpt2_split_expr(col)
        if self._llm is not None:
            return llm_split_expr(col, self._llm)
        if self._python is not None:
            return backtracking_split_expr(col, self._python, self.behavior, self.invert)
        return split_pattern(col, self._rust, self.behavior, self.invert,
                             None if self.regex else self.pattern)

    def word_expr(self, word: pl.Expr) -> pl.Expr:
        return gpt2_unescape(word) if self._gpt2 else word

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self._gpt2:
            return self.split_expr(col).list.eval(self.word_expr(pl.element()))
        return self.split_expr(col)

    def dropped_chars(self) -> str | None:
        if self._gpt2 or self._llm is not None or self.behavior != "removed":
            return ""  # every character is in a piece
        if self.regex and self.invert and self.pattern == SUBWORD_NMT_HF_PATTERN:
            return SubwordNmtSplit().dropped_chars()
        if not self.regex and not self.invert and len(self.pattern) == 1:
            return escape_regex(self.pattern)
        return None

    def piece_text_expr(self, piece: pl.Expr) -> pl.Expr:
        return gpt2_unescape(piece) if self._gpt2 else piece

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type,
                "pattern": {"Regex" if self.regex else "String": self.pattern},
                "behavior": _HF_BEHAVIOR[self.behavior], "invert": self.invert}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        f = cls.fields(d)
        pattern, is_regex = pattern_from_hf(f.raw("pattern"))
        return cls(pattern, f.str("behavior", "Isolated"), f.bool("invert", False), is_regex)


@dataclass
class WholeSequence(PreTokenizer):
    """No pre-tokenizer: each sequence (line ending included) is one word."""

    hf_type: ClassVar[str] = ""

    def expr(self, col: pl.Expr) -> pl.Expr:
        return _whole(col)

    def dropped_chars(self) -> str | None:
        return ""

    def to_hf(self) -> dict[str, Any] | None:  # type: ignore[override]
        return None


@dataclass
class Sequence(PreTokenizer):
    hf_type: ClassVar[str] = "Sequence"
    pretokenizers: list[PreTokenizer] = field(default_factory=list)

    @property
    def line_sensitive(self) -> bool:  # type: ignore[override]
        return any(p.line_sensitive for p in self.pretokenizers)

    def _run(self, col: pl.Expr, last_split_only: bool) -> pl.Expr:
        if not self.pretokenizers:
            return _whole(col)
        ps = self.pretokenizers
        out = ps[0].split_expr(col) if last_split_only and len(ps) == 1 else ps[0].expr(col)
        for i, p in enumerate(ps[1:], start=1):
            if last_split_only and i == len(ps) - 1:
                out = out.list.eval(p.split_expr(pl.element()).explode().drop_nulls())
            else:
                out = p.pieces_expr(out, col)
        return out

    def expr(self, col: pl.Expr) -> pl.Expr:
        return self._run(col, False)

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        if self.pretokenizers and isinstance(self.pretokenizers[-1], Metaspace):
            return self._run(col, False)  # Metaspace(first) needs pieces_expr
        return self._run(col, True)

    def word_expr(self, word: pl.Expr) -> pl.Expr:
        if not self.pretokenizers or isinstance(self.pretokenizers[-1], Metaspace):
            return word
        return self.pretokenizers[-1].word_expr(word)

    def dropped_chars(self) -> str | None:
        # the union of what each step drops, when every step keeps substrings (a byte-level
        # step only last: its mapping then happens in `word_expr`)
        parts = [p.dropped_chars() for p in self.pretokenizers]
        if any(d is None for d in parts) or any(
                isinstance(p, ByteLevel) or p.prefix_expr(pl.lit("")) is not None
                for p in self.pretokenizers[:-1]):
            return None
        if self.pretokenizers and self.pretokenizers[-1].prefix_expr(pl.lit("")) is not None:
            return None
        kept = [d for d in parts if d]
        return "|".join(kept) if kept else ""

    def piece_text_expr(self, piece: pl.Expr) -> pl.Expr:
        return self.pretokenizers[-1].piece_text_expr(piece) if self.pretokenizers else piece

    def maps_bytes(self) -> bool:
        return bool(self.pretokenizers) and self.pretokenizers[-1].maps_bytes()

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "pretokenizers": [p.to_hf() for p in self.pretokenizers]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        steps = [pretokenizer_from_hf(x) for x in cls.fields(d).list("pretokenizers")]
        return pattern_byte_level(steps) or cls(steps)


# subword-nmt reads lines with `codecs` (which also breaks lines at \v, \f, \x1c-\x1e, \x85,
# U+2028 and U+2029, keeping the break character at the end of the line), strips `\r\n ` from
# both ends of each line and splits on the ASCII space only: a tab or an ideographic space stays
# inside a word. One regex reproduces that for a whole chunk at once.
_BREAKS = "\\x0b\\x0c\\x1c\\x1d\\x1e\\x85\\u2028\\u2029"
SUBWORD_NMT_PATTERN = f"[^ \\r\\n{_BREAKS}]*[{_BREAKS}]|[^ \\r\\n{_BREAKS}]+"
# The same pattern for HF's Oniguruma regex, with the characters themselves (not escapes): HF's
# `Split(pattern, "Removed", invert=True)` keeps exactly its matches, the words above.
_BREAK_CHARS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
SUBWORD_NMT_HF_PATTERN = f"[^ \r\n{_BREAK_CHARS}]*[{_BREAK_CHARS}]|[^ \r\n{_BREAK_CHARS}]+"


@dataclass
class SubwordNmtSplit(PreTokenizer):
    """Words as `subword-nmt learn-bpe` reads them: split on ASCII spaces (and subword-nmt's
    line ends) only."""

    hf_type: ClassVar[str] = ""
    line_sensitive: ClassVar[bool] = False

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(SUBWORD_NMT_PATTERN)

    def dropped_chars(self) -> str | None:
        return r"[ \r\n]"

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        return whitespace_chunks(col)

    def line_cut(self) -> str | None:
        return AFTER_SPACE_OR_CR

    def to_hf(self) -> dict[str, Any]:
        # HF keeps the pattern's matches (invert): the same words, line-break characters
        # included (checked against HF and `subword-nmt apply-bpe` in tests/test_export.py)
        return {"type": "Split", "pattern": {"Regex": SUBWORD_NMT_HF_PATTERN},
                "behavior": "Removed", "invert": True}


def pretokenizer_from_hf(d: Any) -> PreTokenizer:
    """Build a pre-tokenizer from its `tokenizer.json` object (None -> whole sequence); an
    unsupported type or a mistyped field is refused."""
    if d is None:
        return WholeSequence()
    _, kind = component_type(d, "pre_tokenizer")
    cls = PreTokenizer.registry.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported pre_tokenizer in tokenizer.json: {kind!r}")
    return cls.from_hf_dict(d)


PRETOKENIZER_NAMES = ("whitespace", "whitespace-split", "bert", "byte-level", "metaspace",
                      "digits", "none", "subword-nmt")


def build_pretokenizer(name: str) -> PreTokenizer:
    """The pre-tokenizer for a CLI name (`--pre-tokenizer`). `byte-level` is HF's
    `ByteLevel(add_prefix_space=False)` (GPT-2), `metaspace` HF's default `Metaspace()`,
    `digits` HF's `Digits(individual_digits=False)`, `subword-nmt` the words of
    `subword-nmt learn-bpe`."""
    name = name.lower()
    table: dict[str, Any] = {
        "whitespace": Whitespace, "whitespace-split": WhitespaceSplit,
        "bert": BertPreTokenizer, "byte-level": ByteLevel, "metaspace": Metaspace,
        "digits": Digits, "none": WholeSequence, "subword-nmt": SubwordNmtSplit,
    }
    if name not in table:
        raise TokcolumnarValueError(f"unknown pre-tokenizer {name!r} (choose from "
                                    f"{', '.join(PRETOKENIZER_NAMES)})")
    return table[name]()


@dataclass
class PatternByteLevel(ByteLevel):
    """HF's `Sequence[Split(Regex(pattern), "isolated"), ByteLevel(add_prefix_space=False,
    use_regex=False)]` for a named LLM pattern (`patterns.py`: cl100k, o200k, qwen2): the
    pattern's pieces (`llm_split`), then every UTF-8 byte as its GPT-2 character. It is the
    pre-tokenizer of Llama 3's, Qwen2's and the HF ports of GPT-4's / GPT-4o's tokenizer.json,
    and of `--pattern NAME` runs; it serialises to that Sequence and is read back from it."""

    hf_type: ClassVar[str] = ""  # written as a Sequence; not a type of its own
    pattern: NamedPattern = field(default_factory=lambda: named_pattern("cl100k"))

    def __post_init__(self) -> None:
        if self.add_prefix_space or self.use_regex:
            raise TokcolumnarValueError("a pattern's ByteLevel step takes add_prefix_space=False, "
                                        "use_regex=False")
        # a user's regex (no name): HF's Split itself, translated to Polars' engine (exact for
        # a regex without look-around, which the translation refuses), on whole texts
        self._custom = (None if self.pattern.name is not None
                        else Split(self.pattern.regex, "isolated", False, True))

    def line_cut(self) -> str | None:
        # no piece of these patterns holds a non-whitespace character followed by a space
        # (`llm_split`); unlike GPT-2's, a CJK mark before a letter joins the letter's piece
        return BEFORE_SPACE_AFTER_ASCII if self._custom is None else None

    def split_expr(self, col: pl.Expr) -> pl.Expr:
        if self._custom is not None:
            return self._custom.split_expr(col)
        return llm_split_expr(col, self.pattern)

    def encode_split_flat(self, texts: pl.Series) -> tuple[np.ndarray, pl.Series] | None:
        return None if self._custom is not None else llm_pieces(texts, self.pattern)

    def chunk_expr(self, col: pl.Expr) -> pl.Expr | None:
        if self._custom is not None:  # no cut is known to be exact for any regex
            return None
        """Each line cut before every ASCII space, as ByteLevel's (`ByteLevel.chunk_expr`),
        and exact for the same reasons: no piece of these patterns holds a non-whitespace
        character followed by a space (a space only ever starts a piece or stands in a
        whitespace run), none looks behind, and what they look at after a non-whitespace
        character (`[\\r\\n]*`, `[\\r\\n/]*`, a contraction) matches neither a space nor the
        end. Lines with whitespace right before a space stay whole."""
        return (pl.when(col.str.contains(r"\s ")).then(pl.concat_list(col))
                .otherwise(col.str.split(" ")))

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": self.pattern.regex}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": self.trim_offsets,
             "use_regex": False}]}


def pattern_byte_level(steps: list[PreTokenizer]) -> PatternByteLevel | None:
    """The `PatternByteLevel` a Sequence's steps are, when they are exactly a Split with a
    named pattern (isolated, not inverted) then ByteLevel(add_prefix_space=False,
    use_regex=False)."""
    if len(steps) != 2:
        return None
    split, byte_level = steps
    if not (type(split) is Split and split.regex and split.behavior == "isolated"
            and not split.invert and type(byte_level) is ByteLevel
            and not byte_level.add_prefix_space and not byte_level.use_regex):
        return None
    named = recognise(split.pattern)
    if named is None or named.name == "gpt2":
        return None
    return PatternByteLevel(trim_offsets=byte_level.trim_offsets, use_regex=False,
                            pattern=named)
