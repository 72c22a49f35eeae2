"""Alphabet, token ids and initial symbols: the `words` table -> a vocabulary and a flat
symbol layout ready for the merge loop.

Ids (DESIGN.md §3): special tokens in the given order; then the alphabet sorted by code point;
then the end-of-word token, then prefixed/suffixed variants (`##a`, `a</w>`) sorted by string.
Characters outside a limited alphabet are dropped from words, as HF does."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .errors import TokcolumnarError

SEP = -1  # word boundary in the flat layout
REMOVED = -2  # right half of a merged pair


@dataclass
class Vocab:
    """Token strings by id, with kind, creation rank and base length (prefix/suffix excluded)."""

    tokens: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    base_len: list[int] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)

    def add(self, token: str, kind: str, base_len: int) -> int:
        found = self.ids.get(token)
        if found is not None:
            return found
        self.ids[token] = len(self.tokens)
        self.tokens.append(token)
        self.kinds.append(kind)
        self.base_len.append(base_len)
        return len(self.tokens) - 1

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Layout:
    """All words in one flat array: `[SEP] w0 symbols [SEP] w1 symbols ... [SEP]`.

    `nxt`/`prv` link the live symbols of each word; `wcount` and `word_of` give each position's
    word count and word index. A pair is named by the position of its left symbol."""

    sym: np.ndarray
    nxt: np.ndarray
    prv: np.ndarray
    wcount: np.ndarray
    word_of: np.ndarray

    @classmethod
    def from_symbols(cls, lengths: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> Layout:
        n_words = len(lengths)
        starts = np.zeros(n_words, dtype=np.int64)
        if n_words:
            starts[1:] = np.cumsum(lengths[:-1] + 1)
        size = int(lengths.sum()) + n_words + 1
        sym = np.full(size, SEP, dtype=np.int64)
        word_index = np.repeat(np.arange(n_words, dtype=np.int64), lengths)
        offsets = np.arange(len(ids), dtype=np.int64) - np.repeat(
            np.cumsum(lengths) - lengths, lengths)
        positions = starts[word_index] + 1 + offsets
        sym[positions] = ids
        idx = np.arange(size, dtype=np.int64)
        nxt = np.minimum(idx + 1, size - 1).astype(np.int64)
        prv = np.maximum(idx - 1, 0).astype(np.int64)
        word_of = np.full(size, -1, dtype=np.int64)
        word_of[positions] = word_index
        wcount = np.zeros(size, dtype=np.int64)
        wcount[positions] = counts[word_index]
        return cls(sym, nxt, prv, wcount, word_of)

    def segmentation(self, n_words: int) -> tuple[np.ndarray, np.ndarray]:
        """Final symbols: (offsets per word, flat ids) in word order."""
        live = np.flatnonzero(self.sym >= 0)
        words = self.word_of[live]
        lengths = np.bincount(words, minlength=n_words)
        offsets = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, self.sym[live].astype(np.int64)


@dataclass
class Initial:
    vocab: Vocab
    layout: Layout
    n_words: int


def char_counts(words: pl.DataFrame) -> pl.DataFrame:
    """Characters with their weighted counts (char, count)."""
    return (words.lazy().select(pl.col("word").str.split("").alias("char"), "count")
            .explode("char").group_by("char").agg(pl.col("count").sum()).collect())


def select_alphabet(chars: pl.DataFrame, limit: int | None,
                    initial: list[str]) -> list[str]:
    """Keep every character, or the `limit` most frequent (initial alphabet first, ties by code
    point); return them sorted by code point."""
    df = chars.with_columns(pl.col("count").cast(pl.Float64))
    if initial:
        extra = pl.DataFrame({"char": list(dict.fromkeys(initial)),
                              "count": [float("inf")] * len(set(initial))})
        df = pl.concat([df.filter(~pl.col("char").is_in(extra["char"].implode())), extra])
    kept = df.get_column("char").to_list()
    if limit is not None and len(kept) > limit:
        df = df.with_columns(pl.col("char").map_elements(ord, return_dtype=pl.Int64).alias("cp"))
        kept = df.sort(["count", "cp"], descending=[True, False]).head(limit)[
            "char"].to_list()
    return sorted(kept, key=ord)


def build_initial(words: pl.DataFrame, special_tokens: list[str], limit_alphabet: int | None,
                  initial_alphabet: list[str], prefix: str | None, suffix: str | None,
                  eow_token: str | None, variant_order: list[str] | None = None) -> Initial:
    """Assign ids and lay out every word's initial symbols (prefix/suffix variants included).

    `variant_order` puts the listed variants first, in that order (HF assigns variant ids in
    hash order; giving its order reproduces its tie-breaks)."""
    vocab = Vocab()
    for t in special_tokens:
        vocab.add(t, "special", len(t))
    for c in select_alphabet(char_counts(words), limit_alphabet, initial_alphabet):
        vocab.add(c, "alphabet", 1)
    if eow_token is not None:
        vocab.add(eow_token, "special" if eow_token in special_tokens else "alphabet", 0)
    known = pl.Series("char", list(vocab.ids), dtype=pl.String).implode()
    exploded = (words.lazy().select(pl.int_range(pl.len(), dtype=pl.Int64).alias("w"),
                                    pl.col("word").str.split("").alias("char"))
                .with_columns(pl.col("char").list.len().alias("n"))
                .explode("char")
                .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("w").alias("i"))
                .filter(pl.col("char").is_in(known)))
    tok = pl.col("char")
    if prefix is not None:
        tok = pl.when(pl.col("i") > 0).then(pl.lit(prefix) + tok).otherwise(tok)
    if suffix is not None:
        tok = pl.when(pl.col("i") == pl.col("n") - 1).then(tok + pl.lit(suffix)).otherwise(tok)
    exploded = exploded.with_columns(tok.alias("tok")).collect()
    if eow_token is not None:
        ends = pl.DataFrame({"w": np.arange(len(words), dtype=np.int64)}).with_columns(
            pl.lit(None, dtype=pl.String).alias("char"), pl.lit(0, dtype=pl.Int64).alias("n"),
            pl.lit(1 << 40, dtype=pl.Int64).alias("i"), pl.lit(eow_token).alias("tok"))
        exploded = pl.concat([exploded, ends.select(exploded.columns)],
                             how="vertical_relaxed").sort("w", "i")
    variants = sorted(set(exploded.get_column("tok").unique().to_list()) - set(vocab.ids))
    if variant_order:  # ids fixed by a given order (e.g. to mirror another tokenizer's ids)
        rank = {t: i for i, t in enumerate(variant_order)}
        variants.sort(key=lambda v: (rank.get(v, len(rank)), v))
    for v in variants:
        vocab.add(v, "variant", 1)
    mapping = pl.DataFrame({"tok": vocab.tokens, "id": np.arange(len(vocab), dtype=np.int32)})
    ids = exploded.join(mapping, on="tok", how="left", maintain_order="left").get_column("id")
    lengths = np.bincount(exploded.get_column("w").to_numpy(), minlength=len(words))
    counts = words.get_column("count").to_numpy().astype(np.int64)
    layout = Layout.from_symbols(lengths.astype(np.int64), ids.to_numpy(), counts)
    return Initial(vocab, layout, len(words))


def check_vocab_size(vocab_size: int, n_initial: int) -> None:
    if vocab_size < n_initial:
        raise TokcolumnarError(
            f"--vocab-size {vocab_size} is below the initial vocabulary ({n_initial} special "
            "tokens, characters and variants); raise it or use --limit-alphabet")
