"""The subword-nmt pre-tokenizer: words as `subword-nmt learn-bpe` reads them.

subword-nmt reads lines with `codecs` (which also breaks lines at \\v, \\f, \\x1c-\\x1e, \\x85,
U+2028 and U+2029, keeping the break character at the end of the line), strips `\\r\\n ` from
both ends of each line and splits on the ASCII space only: a tab or an ideographic space stays
inside a word. One regex reproduces that for a whole chunk at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from .pretokenizers import AFTER_SPACE_OR_CR, LineCut, PreTokenizer

_BREAKS = "\\x0b\\x0c\\x1c\\x1d\\x1e\\x85\\u2028\\u2029"
SUBWORD_NMT_PATTERN = f"[^ \\r\\n{_BREAKS}]*[{_BREAKS}]|[^ \\r\\n{_BREAKS}]+"


@dataclass
class SubwordNmtSplit(PreTokenizer):
    """Split on ASCII spaces (and subword-nmt's line ends) only."""

    hf_type: ClassVar[str] = ""
    line_sensitive: ClassVar[bool] = False

    def expr(self, col: pl.Expr) -> pl.Expr:
        return col.str.extract_all(SUBWORD_NMT_PATTERN)

    def line_cut(self) -> LineCut | None:
        return AFTER_SPACE_OR_CR

    def to_hf(self) -> dict[str, Any]:
        # the closest HF pre-tokenizer: split on " ", dropping it
        return {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed",
                "invert": False}
