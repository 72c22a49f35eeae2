"""Normalizers: string -> string, written as Polars expressions so that they run columnar over a
whole chunk of sequences. Each one also serialises to (and loads from) HF `tokenizer.json`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .errors import TokcolumnarError


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

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        return cls()

    def apply(self, texts: list[str]) -> list[str]:
        """Normalise plain Python strings (used by the encoder and by tests)."""
        return pl.Series("t", texts, dtype=pl.String).to_frame().select(
            self.expr(pl.col("t"))).to_series().to_list()


@dataclass
class Lowercase(Normalizer):
    hf_type: ClassVar[str] = "Lowercase"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.to_lowercase()


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

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFD")


@dataclass
class NFKD(Normalizer):
    hf_type: ClassVar[str] = "NFKD"

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.normalize("NFKD")


@dataclass
class Sequence(Normalizer):
    hf_type: ClassVar[str] = "Sequence"
    normalizers: list[Normalizer] = field(default_factory=list)

    def expr(self, col: pl.Expr) -> pl.Expr:
        for n in self.normalizers:
            col = n.expr(col)
        return col

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Sequence", "normalizers": [n.to_hf() for n in self.normalizers]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Normalizer:
        return cls([normalizer_from_hf(x) for x in d["normalizers"]])


def normalizer_from_hf(d: dict[str, Any] | None) -> Normalizer | None:
    """Build a normalizer from its `tokenizer.json` object (None stays None)."""
    if d is None:
        return None
    cls = Normalizer.registry.get(d.get("type", ""))
    if cls is None:
        raise TokcolumnarError(f"unsupported normalizer in tokenizer.json: {d.get('type')!r}")
    return cls.from_hf_dict(d)


NORMALIZER_NAMES = ("none", "nfc", "nfkc", "nfd", "nfkd")


def build_normalizer(name: str | None, lowercase: bool = False) -> Normalizer | None:
    """The normalizer for a CLI name (`--normalizer`) plus the `--lowercase` flag."""
    parts: list[Normalizer] = []
    simple = {"nfc": NFC, "nfkc": NFKC, "nfd": NFD, "nfkd": NFKD}
    name = (name or "none").lower()
    if name in simple:
        parts.append(simple[name]())
    elif name == "bert":
        from .bert_normalizer import BertNormalizer  # provided by the hf-compat stage

        parts.append(BertNormalizer(lowercase=lowercase))
        lowercase = False
    elif name != "none":
        raise TokcolumnarError(f"unknown normalizer {name!r} (choose from none, nfc, nfkc, "
                               "nfd, nfkd, bert)")
    if lowercase:
        parts.append(Lowercase())
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Sequence(parts)
