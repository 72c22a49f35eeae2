"""Pre-tokenizers: string -> list of words, written as Polars expressions (regex extraction),
so a whole chunk of sequences is split in one columnar call. Each serialises to HF JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .errors import TokcolumnarError

# HF `Whitespace`: `\w+|[^\w\s]+` with the Rust regex crate's Unicode classes; Polars uses the
# same crate, so the classes agree.
WHITESPACE_PATTERN = r"\w+|[^\w\s]+"


class PreTokenizer:
    """Base class. `expr(col)` maps a string expression to a list[str] expression of words.

    `line_sensitive` is False when splitting a chunk of many lines at once gives the same words
    as splitting line by line (true for any pre-tokenizer that drops whitespace); the corpus
    reader then skips the per-line split."""

    hf_type: ClassVar[str] = ""
    line_sensitive: ClassVar[bool] = True
    registry: ClassVar[dict[str, type[PreTokenizer]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hf_type:
            PreTokenizer.registry[cls.hf_type] = cls

    def expr(self, col: pl.Expr) -> pl.Expr:
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        return cls()

    def apply(self, texts: list[str]) -> list[list[str]]:
        """Pre-tokenize plain Python strings (used by the encoder and by tests)."""
        return pl.Series("t", texts, dtype=pl.String).to_frame().select(
            self.expr(pl.col("t"))).to_series().to_list()


@dataclass
class Whitespace(PreTokenizer):
    hf_type: ClassVar[str] = "Whitespace"
    line_sensitive: ClassVar[bool] = False

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(WHITESPACE_PATTERN)


@dataclass
class WhitespaceSplit(PreTokenizer):
    hf_type: ClassVar[str] = "WhitespaceSplit"
    line_sensitive: ClassVar[bool] = False

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(r"\S+")


@dataclass
class WholeSequence(PreTokenizer):
    """No pre-tokenizer: each sequence (line ending included) is one word."""

    hf_type: ClassVar[str] = ""

    def expr(self, col: pl.Expr) -> pl.Expr:
        return pl.concat_list(col).list.eval(pl.element().filter(pl.element().str.len_bytes() > 0))

    def to_hf(self) -> dict[str, Any] | None:  # type: ignore[override]
        return None


@dataclass
class Sequence(PreTokenizer):
    hf_type: ClassVar[str] = "Sequence"
    pretokenizers: list[PreTokenizer] = field(default_factory=list)

    @property
    def line_sensitive(self) -> bool:  # type: ignore[override]
        return any(p.line_sensitive for p in self.pretokenizers)

    def expr(self, col: pl.Expr) -> pl.Expr:
        out = self.pretokenizers[0].expr(col)
        for p in self.pretokenizers[1:]:
            out = out.list.eval(p.expr(pl.element())).list.eval(pl.element().explode())
        return out

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "pretokenizers": [p.to_hf() for p in self.pretokenizers]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> PreTokenizer:
        return cls([pretokenizer_from_hf(x) for x in d["pretokenizers"]])


def pretokenizer_from_hf(d: dict[str, Any] | None) -> PreTokenizer:
    """Build a pre-tokenizer from its `tokenizer.json` object (None -> whole sequence)."""
    if d is None:
        return WholeSequence()
    cls = PreTokenizer.registry.get(d.get("type", ""))
    if cls is None:
        raise TokcolumnarError(f"unsupported pre_tokenizer in tokenizer.json: {d.get('type')!r}")
    return cls.from_hf_dict(d)


def build_pretokenizer(name: str) -> PreTokenizer:
    """The pre-tokenizer for a CLI name (`--pre-tokenizer`)."""
    name = name.lower()
    if name == "whitespace":
        return Whitespace()
    if name == "whitespace-split":
        return WhitespaceSplit()
    if name == "none":
        return WholeSequence()
    if name in ("byte-level", "bert", "metaspace", "digits"):
        from . import hf_pretokenizers  # provided by the hf-compat stage

        return hf_pretokenizers.build(name)
    raise TokcolumnarError(f"unknown pre-tokenizer {name!r} (choose from whitespace, "
                           "whitespace-split, bert, byte-level, metaspace, digits, none)")
