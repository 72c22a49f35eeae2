"""Normalizers: string -> string, written as Polars expressions so that they run columnar over a
whole chunk of sequences. Each one also serialises to (and loads from) HF `tokenizer.json`.

Exactness against HF `tokenizers` (0.23): every normalizer here gives the same string as HF's on
every input, with these documented exceptions, all due to HF's older Unicode tables:

* HF's BertNormalizer and StripAccents decide "control", "non-spacing mark" and "combining mark"
  with tables from older Unicode versions (crates `unicode_categories` and
  `unicode-normalization-alignments`). We do not use Polars' (newer) `\\p{..}` classes for these:
  the exact code point sets HF uses are embedded below (`HF_CLEAN_REMOVED`,
  `HF_NONSPACING_MARK`, `HF_COMBINING_MARK`), generated from HF itself and re-checked against it
  over all of Unicode by `tests/test_normalizers.py`. So these agree exactly.
* NFD/NFKD/NFC/NFKC: Polars uses the `unicode-normalization` crate (Unicode 16); HF uses
  `unicode-normalization-alignments`, whose tables are older (about Unicode 12). Characters that
  were assigned, or given a decomposition, a combining class or a composition, after that
  version normalise differently: HF leaves them as they are where we decompose them (e.g.
  U+32FF SQUARE ERA NAME REIWA, U+A7F2..U+A7F4, U+10781..U+107BA), HF does not reorder the newer
  combining marks (e.g. U+1ABF.., U+1DF6..U+1DFA, U+10D69..) and does not compose Unicode-16
  pairs (Todhri, Tulu-Tigalari, Gurung Khema, Kirat Rai starters). They are exactly the 358
  code points of `UNICODE_NORMALIZATION_DIFFS` below (found by comparing HF and Polars on every
  code point alone and next to marks of each combining class; the tests check that each of them
  does differ and that nothing else does), and the property tests leave exactly these out. This
  also affects BertNormalizer's accent stripping, which runs NFD.
* Lowercase: HF lowercases character by character (`char::to_lowercase`), so a final capital
  sigma becomes `σ`; Polars' `to_lowercase` applies the final-sigma rule (`ς`). We map `Σ` to `σ`
  first, which gives HF's result.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import string_parts, strings_from_parts, utf8_chars
from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, component_type
from .charsmap import charsmap_table, nmt_nfkc_bytes
from .regex import check_regex, onig_to_rust, pattern_from_hf
from .unicode_tables import (
    HF_CHINESE_CHARS,
    HF_CLEAN_REMOVED,
    HF_COMBINING_MARK,
    HF_NONSPACING_MARK,
    class_body,
)

_CLEAN_REMOVED_RE = f"[{class_body(HF_CLEAN_REMOVED)}]"
_NONSPACING_MARK_RE = f"[{class_body(HF_NONSPACING_MARK)}]"
_COMBINING_MARK_RE = f"[{class_body(HF_COMBINING_MARK)}]"
_CHINESE_CHAR_RE = f"[{class_body(HF_CHINESE_CHARS)}]"


_CHINESE_SORTED = sorted(HF_CHINESE_CHARS)
_CHINESE_LOW = np.array([low for low, _ in _CHINESE_SORTED], dtype=np.int32)
_CHINESE_HIGH = np.array([high for _, high in _CHINESE_SORTED], dtype=np.int32)


def pad_chinese_chars(texts: pl.Series) -> pl.Series:
    """BertNormalizer's `handle_chinese_chars` (a space before and after every character of
    `HF_CHINESE_CHARS`), on the texts' UTF-8 bytes with NumPy: the regex replacement, one
    capture per character, took 0.55 CPU-s on medium/zh.txt in 1 MiB batches, this 0.23
    (the same strings on every line of the medium files). Nulls stay null."""
    if texts.null_count():
        padded = pad_chinese_chars(texts.fill_null(""))
        return pl.select(pl.when(texts.is_not_null()).then(padded)).to_series().alias(
            texts.name)
    if not texts.str.contains(_CHINESE_CHAR_RE).any():
        # nothing to pad (most batches of most languages): no byte work, and pyarrow stays
        # unloaded for a training run (tests/test_train_imports.py)
        return texts
    offsets, data = string_parts(texts.cast(pl.String))
    offsets = offsets - offsets[0]
    code, starts = utf8_chars(data)
    if starts is None:  # all ASCII
        return texts
    # in one of the (disjoint, sorted) ranges: the last range starting at or before it
    slot = np.searchsorted(_CHINESE_LOW, code, side="right") - 1
    chinese = np.flatnonzero((slot >= 0) & (code <= _CHINESE_HIGH[np.maximum(slot, 0)]))
    if not len(chinese):
        return texts
    # a space before each such character and one after it (two where one ends as the next
    # starts, as the regex gives); a row moves right by 2 per such character before it
    begins, ends = starts[chinese], starts[chinese + 1]
    out = np.insert(data, np.stack([begins, ends], axis=1).ravel(), 0x20)
    new_offsets = offsets + 2 * np.searchsorted(begins, offsets, side="left")
    return strings_from_parts(texts.name, new_offsets, out)


def hf_lowercase(col: pl.Expr) -> pl.Expr:
    """HF `Lowercase`: `char::to_lowercase` on each character (no final-sigma rule)."""
    return col.str.replace_all("Σ", "σ", literal=True).str.to_lowercase()


class Normalizer:
    """Base class: `expr(col)` maps a string expression to the normalised string expression."""

    hf_type: ClassVar[str] = ""
    registry: ClassVar[dict[str, type[Normalizer]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hf_type:
            Normalizer.registry[cls.hf_type] = cls

    def expr(self, col: pl.Expr) -> pl.Expr:
        raise NotImplementedError

    def char_local(self) -> bool:
        """Whether each character is normalised on its own (the text's normalization is the
        concatenation of its characters' ones, up to the canonical reordering of combining
        marks): what offsets need to map normalized positions back (encode/offsets.py)."""
        return False

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def fields(cls, d: dict[str, Any]) -> HFObject:
        """`d` with typed field access, named in errors as `normalizer <type>`."""
        return HFObject(d, f"normalizer {cls.hf_type}")

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        cls.fields(d)
        return cls()

    def apply(self, texts: list[str]) -> list[str]:
        """Normalise plain Python strings (used by the encoder and by tests)."""
        return pl.Series("t", texts, dtype=pl.String).to_frame().select(
            self.expr(pl.col("t"))).to_series().to_list()


@dataclass
class Lowercase(Normalizer):
    hf_type: ClassVar[str] = "Lowercase"

    def char_local(self) -> bool:
        return True

    def expr(self, col: pl.Expr) -> pl.Expr:
        return hf_lowercase(col)


@dataclass
class NFC(Normalizer):
    hf_type: ClassVar[str] = "NFC"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFC")


@dataclass
class NFKC(Normalizer):
    hf_type: ClassVar[str] = "NFKC"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFKC")


@dataclass
class NFD(Normalizer):
    hf_type: ClassVar[str] = "NFD"

    def char_local(self) -> bool:
        return True

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFD")


@dataclass
class NFKD(Normalizer):
    hf_type: ClassVar[str] = "NFKD"

    def char_local(self) -> bool:
        return True

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFKD")


@dataclass
class StripAccents(Normalizer):
    """HF `StripAccents`: delete combining marks (it does not decompose first: put NFD/NFKD
    before it, as HF does)."""

    hf_type: ClassVar[str] = "StripAccents"

    def char_local(self) -> bool:
        return True

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.replace_all(_COMBINING_MARK_RE, "")


@dataclass
class BertNormalizer(Normalizer):
    """HF `BertNormalizer`: clean text (delete NUL, U+FFFD and control characters, map every
    whitespace to ' '), pad CJK ideographs with spaces, strip accents (NFD, then delete
    non-spacing marks; defaults to the value of `lowercase`), lowercase."""

    hf_type: ClassVar[str] = "BertNormalizer"
    clean_text: bool = True
    handle_chinese_chars: bool = True
    strip_accents: bool | None = None
    lowercase: bool = True

    def char_local(self) -> bool:
        return True

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.clean_text:
            col = col.str.replace_all(_CLEAN_REMOVED_RE, "").str.replace_all(r"\s", " ")
        if self.handle_chinese_chars:
            col = col.map_batches(pad_chinese_chars, return_dtype=pl.String,
                                  is_elementwise=True)
        strip = self.lowercase if self.strip_accents is None else self.strip_accents
        if strip:
            col = col.str.normalize("NFD").str.replace_all(_NONSPACING_MARK_RE, "")
        if self.lowercase:
            col = hf_lowercase(col)
        return col

    def without_chinese_padding(self) -> BertNormalizer:
        """The same steps but the CJK padding: for `encode.charsplit`, which makes every
        ideograph a word of its own without it."""
        return replace(self, handle_chinese_chars=False)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "clean_text": self.clean_text,
                "handle_chinese_chars": self.handle_chinese_chars,
                "strip_accents": self.strip_accents, "lowercase": self.lowercase}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        return cls(clean_text=f.bool("clean_text", True),
                   handle_chinese_chars=f.bool("handle_chinese_chars", True),
                   strip_accents=f.bool("strip_accents", None, nullable=True),
                   lowercase=f.bool("lowercase", True))


@dataclass
class Replace(Normalizer):
    """HF `Replace`: every occurrence of `pattern` becomes `content`. The pattern is a literal
    string, or with `regex=True` an HF (Oniguruma) regex; `content` is always literal (HF 0.23
    does not expand `$1` in it)."""

    hf_type: ClassVar[str] = "Replace"
    pattern: str = ""
    content: str = ""
    regex: bool = False

    def __post_init__(self) -> None:
        if self.regex:
            self._rust = check_regex(onig_to_rust(self.pattern))
        elif not self.pattern:
            raise TokcolumnarValueError("Replace: empty pattern")

    def char_local(self) -> bool:
        return not self.regex and len(self.pattern) == 1

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.regex:
            return col.str.replace_all(self._rust, self.content.replace("$", "$$"))
        return col.str.replace_all(self.pattern, self.content, literal=True)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type,
                "pattern": {"Regex" if self.regex else "String": self.pattern},
                "content": self.content}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        pattern, is_regex = pattern_from_hf(f.raw("pattern"))
        return cls(pattern, f.str("content"), is_regex)


@dataclass
class Strip(Normalizer):
    """HF `Strip`: trim whitespace (`char::is_whitespace`) on the left and/or right."""

    hf_type: ClassVar[str] = "Strip"
    left: bool = True
    right: bool = True

    def expr(self, col: pl.Expr) -> pl.Expr:
        if self.left and self.right:
            return col.str.strip_chars()
        if self.left:
            return col.str.strip_chars_start()
        if self.right:
            return col.str.strip_chars_end()
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "strip_left": self.left, "strip_right": self.right}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        return cls(f.bool("strip_left", True), f.bool("strip_right", True))


@dataclass
class Prepend(Normalizer):
    """HF `Prepend`: put `prepend` before every non-empty sequence."""

    hf_type: ClassVar[str] = "Prepend"
    prepend: str = "▁"

    def expr(self, col: pl.Expr) -> pl.Expr:
        # a replacement at the start, not `lit + col`: the result keeps the column's name
        # (a `when` is named after its `then`: `lit + col` would be a new column "literal",
        # and the encoder's `with_columns` would leave the text as it was)
        at_start = col.str.replace(r"\A", self.prepend.replace("$", "$$"))
        return pl.when(col.str.len_bytes() > 0).then(at_start).otherwise(col)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "prepend": self.prepend}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        return cls(cls.fields(d).str("prepend"))


@dataclass
class Sequence(Normalizer):
    hf_type: ClassVar[str] = "Sequence"
    normalizers: list[Normalizer] = field(default_factory=list)

    def char_local(self) -> bool:
        return all(n.char_local() for n in self.normalizers)

    def expr(self, col: pl.Expr) -> pl.Expr:
        for n in self.normalizers:
            col = n.expr(col)
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "normalizers": [n.to_hf() for n in self.normalizers]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        parts = cls.fields(d).list("normalizers")
        return cls([n for n in (normalizer_from_hf(x) for x in parts) if n is not None])


@dataclass(eq=False)
class Precompiled(Normalizer):
    """HF `Precompiled` / SentencePiece's compiled normalization rule (`nmt_nfkc` ...): the
    char map's longest source string starting at each position is replaced, left to right,
    as SentencePiece's normalizer does (`text.charsmap`). The map is the bytes of
    `precompiled_charsmap` (base64 in tokenizer.json)."""

    hf_type: ClassVar[str] = "Precompiled"
    charsmap: bytes = b""

    def __post_init__(self) -> None:
        self._sources, self._targets = charsmap_table(self.charsmap)

    def for_characters(self, chars: set[str]) -> Precompiled:
        """The same rule for texts made of `chars` only: the sources that start with another
        character can never match there. Polars builds its automaton from every source on
        each `replace_many` (~0.45 CPU-s for `nmt_nfkc`'s 225,276; 5 MB of English meets
        ~2,000 of them); the result is the same, the replacements not being rescanned."""
        out = replace(self)  # (the table is decoded again only if not cached)
        kept = [i for i, source in enumerate(self._sources) if source[0] in chars]
        out._sources = [self._sources[i] for i in kept]
        out._targets = [self._targets[i] for i in kept]
        return out

    def expr(self, col: pl.Expr) -> pl.Expr:
        if not self._sources:
            return col
        # leftmost-first with the longest sources first = SentencePiece's longest match
        return col.str.replace_many(self._sources, self._targets, leftmost=True)

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type,
                "precompiled_charsmap": base64.b64encode(self.charsmap).decode("ascii")}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        f = cls.fields(d)
        raw = f.raw("precompiled_charsmap")
        if raw is None:  # no rule (identity)
            return cls(b"")
        if not isinstance(raw, str):
            raise TokcolumnarValueError("normalizer Precompiled: precompiled_charsmap must be "
                                        "a base64 string")
        try:
            return cls(base64.b64decode(raw, validate=True))
        except binascii.Error:
            raise TokcolumnarValueError("normalizer Precompiled: precompiled_charsmap is not "
                                        "base64") from None


def for_characters(normalizer: Normalizer | None, chars: set[str]) -> Normalizer | None:
    """`normalizer` for texts made of `chars` only (`Precompiled.for_characters`; the other
    normalizers as they are)."""
    if isinstance(normalizer, Precompiled):
        return normalizer.for_characters(chars)
    if isinstance(normalizer, Sequence):
        return Sequence([for_characters(n, chars) or n for n in normalizer.normalizers])
    return normalizer


def normalizer_from_hf(d: Any) -> Normalizer | None:
    """Build a normalizer from its `tokenizer.json` object (None stays None); an unsupported
    type or a mistyped field is refused."""
    if d is None:
        return None
    _, kind = component_type(d, "normalizer")
    cls = Normalizer.registry.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported normalizer in tokenizer.json: {kind!r}")
    return cls.from_hf_dict(d)


NORMALIZER_NAMES = ("none", "nfc", "nfkc", "nfd", "nfkd", "bert", "nmt_nfkc")


def build_normalizer(name: str | None, lowercase: bool = False) -> Normalizer | None:
    """The normalizer for a CLI name (`--normalizer`) plus the `--lowercase` flag.

    `bert` is HF's `BertNormalizer(lowercase=lowercase)` (which also strips accents when it
    lowercases, as HF's default does); `nmt_nfkc` is SentencePiece's default rule (a
    `Precompiled` char map); the others are followed by `Lowercase` when asked."""
    parts: list[Normalizer] = []
    simple = {"nfc": NFC, "nfkc": NFKC, "nfd": NFD, "nfkd": NFKD}
    name = (name or "none").lower()
    if name in simple:
        parts.append(simple[name]())
    elif name == "bert":
        parts.append(BertNormalizer(lowercase=lowercase))
        lowercase = False
    elif name == "nmt_nfkc":  # SentencePiece's default rule, its compiled char map
        parts.append(Precompiled(nmt_nfkc_bytes()))
    elif name != "none":
        raise TokcolumnarValueError(f"unknown normalizer {name!r} (choose from "
                                    f"{', '.join(NORMALIZER_NAMES)})")
    if lowercase:
        parts.append(Lowercase())
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Sequence(parts)
