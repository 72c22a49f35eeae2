"""`encode --stats`: what the encoded dataset looks like, computed columnarly batch by batch
(each batch reduced to totals and a table of sequence lengths with their counts, in the
encoding workers; the totals merged in the main thread), so memory stays bounded.

Definitions (README "Encoding datasets"): tokens are the ids written for the rows (with the
post-processor's special tokens unless --no-special-tokens; with --pack, the documents' ids
before their separators); bytes and characters are those of the encoded texts (line endings
stripped unless --keep-newlines); words are `text.words.WORD_RE` words (the same as
`tokcolumnar report`'s fertility); the unknown rate is the share of tokens that are the
model's unknown token (0 without one). Percentiles are nearest-rank: p50 is the smallest
length at least half of the rows have at most."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..text.words import WORD_RE
from ..tokenizer import Tokenizer


@dataclass
class BatchStats:
    """One batch reduced: totals and (n_tokens, rows) counts."""

    rows: int
    tokens: int
    words: int
    bytes: int
    chars: int
    unknown: int
    lengths: pl.DataFrame


def batch_stats(texts: pl.Series, ids: pl.Series, unk: int | None) -> BatchStats:
    """The totals of one batch of texts and their ids (Polars expressions, no Python loop over
    rows)."""
    lengths = ids.list.len().cast(pl.UInt32)
    # every count of a batch is one Polars aggregate over its columns (the ids flattened:
    # an empty row's null is not counted)
    unknown = int((ids.explode() == unk).sum()) if unk is not None else 0
    return BatchStats(
        rows=len(texts), tokens=int(lengths.cast(pl.Int64).sum()),
        words=int(texts.str.count_matches(WORD_RE).cast(pl.Int64).sum()),
        bytes=int(texts.str.len_bytes().cast(pl.Int64).sum()),
        chars=int(texts.str.len_chars().cast(pl.Int64).sum()), unknown=unknown,
        lengths=lengths.rename("n_tokens").value_counts(name="rows").cast(
            {"rows": pl.UInt64}))


@dataclass
class EncodeStats:
    """The statistics of one encode run, merged from its batches (`add`)."""

    unk: int | None = None
    unk_token: str | None = None
    rows: int = 0
    tokens: int = 0
    words: int = 0
    bytes: int = 0
    chars: int = 0
    unknown: int = 0
    lengths: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(
        schema={"n_tokens": pl.UInt32, "rows": pl.UInt64}))

    def use_tokenizer(self, tok: Tokenizer) -> None:
        """Count the unknown token of `tok`."""
        self.unk = tok.unknown_id()
        self.unk_token = tok.id_to_token(self.unk) if self.unk is not None else None

    def add(self, b: BatchStats) -> None:
        self.rows += b.rows
        self.tokens += b.tokens
        self.words += b.words
        self.bytes += b.bytes
        self.chars += b.chars
        self.unknown += b.unknown
        # distinct lengths only: this table stays small whatever the number of rows
        self.lengths = pl.concat([self.lengths, b.lengths]).group_by("n_tokens").agg(
            pl.col("rows").sum()).sort("n_tokens")

    def percentile(self, q: float) -> int:
        """Nearest rank: the smallest length that at least q% of the rows do not exceed."""
        counts = self.lengths.get_column("rows").to_numpy()
        rank = max(1, math.ceil(q / 100 * self.rows))
        at = int(np.searchsorted(np.cumsum(counts), rank))
        return int(self.lengths.get_column("n_tokens")[at])

    def histogram(self) -> pl.DataFrame:
        """Rows per power-of-two bin of lengths: (low, high, rows) for [low, high)."""
        n = self.lengths.get_column("n_tokens").cast(pl.Int64)
        # bin k holds [2^(k-1), 2^k), bin 0 the empty rows
        bin_of = pl.Series(np.where(n.to_numpy() > 0,
                                    np.floor(np.log2(np.maximum(n.to_numpy(), 1))) + 1, 0)
                           ).cast(pl.Int64)
        df = pl.DataFrame({"bin": bin_of, "rows": self.lengths.get_column("rows")}).group_by(
            "bin").agg(pl.col("rows").sum()).sort("bin")
        return df.select(
            pl.when(pl.col("bin") == 0).then(0).otherwise(2 ** (pl.col("bin") - 1)).alias("low"),
            (2 ** pl.col("bin")).alias("high"), "rows")

    def table(self) -> pl.DataFrame:
        """One row: the totals, the ratios, the length summary and the exact distribution of
        lengths (`length_counts`: list of {n_tokens, rows})."""
        def ratio(a: int, b: int) -> float | None:
            return a / b if b else None

        n = self.lengths.get_column("n_tokens").cast(pl.Int64)
        counts = self.lengths.get_column("rows").cast(pl.Int64)
        return pl.DataFrame({
            "rows": [self.rows], "tokens": [self.tokens], "words": [self.words],
            "bytes": [self.bytes], "chars": [self.chars], "unknown_tokens": [self.unknown],
            "unk_token": pl.Series([self.unk_token], dtype=pl.String),
            "tokens_per_word": [ratio(self.tokens, self.words)],
            "bytes_per_token": [ratio(self.bytes, self.tokens)],
            "chars_per_token": [ratio(self.chars, self.tokens)],
            "unknown_rate": [ratio(self.unknown, self.tokens) or 0.0],
            "min": [int(n.min())], "mean": [float((n * counts).sum()) / self.rows],  # type: ignore[arg-type]
            "p50": [self.percentile(50)], "p95": [self.percentile(95)],
            "max": [int(n.max())],  # type: ignore[arg-type]
            "length_counts": [self.lengths.to_struct().to_list()],
        }, schema_overrides={"length_counts": pl.List(pl.Struct(
            {"n_tokens": pl.UInt32, "rows": pl.UInt64}))})

    def summary(self) -> list[str]:
        """A few lines for the terminal."""
        t = self.table().row(0, named=True)

        def f(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"

        bins = self.histogram()
        return [
            f"stats: {self.rows:,} rows, {self.tokens:,} tokens; tokens/word "
            f"{f(t['tokens_per_word'])}, bytes/token {f(t['bytes_per_token'])}, chars/token "
            f"{f(t['chars_per_token'])}, unknown {100 * t['unknown_rate']:.3f}%"
            + (f" ({self.unk_token})" if self.unk_token else " (no unknown token)"),
            f"stats: tokens per row min {t['min']:,}, mean {t['mean']:.1f}, p50 {t['p50']:,}, "
            f"p95 {t['p95']:,}, max {t['max']:,}",
            "stats: rows by tokens " + ", ".join(
                ("0" if lo == 0 else f"{lo}-{hi - 1}" if hi - 1 > lo else f"{lo}") + f": {r:,}"
                for lo, hi, r in bins.iter_rows()),
        ]
