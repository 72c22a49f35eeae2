"""Extending a Unigram base (`--extend DIR` on a `--model unigram` output; docs/extend.md,
"Unigram bases").

A Unigram vocabulary is not built by merges that a loop could continue: training is top-down
(seed pieces, EM, pruning), so there is no "state after the base" to resume. An extension does
what SentencePiece users do by hand to grow a released model (Chinese-LLaMA's merge of a
Chinese SentencePiece model into Llama's): the new corpus is trained as a Unigram model of its
own — SentencePiece's algorithm, the base's normalization and options, `--vocab-size N` — and
its pieces that the base lacks are appended after the base's ids until the vocabulary has N
entries: first its single characters (so that every character the new model covers stays
spellable without `<unk>` or byte fallback), then the other pieces by their score in the new
model (ties by piece). The base's pieces, ids and scores are kept as they are; the new pieces
keep the scores the new model gave them, so Viterbi compares log-probabilities of two models
(as the hand-made merges do). Training the new model to N pieces always gives enough new
ones: at most the base's K pieces can be shared, and N - K are needed.

`vocab.parquet` gets an `origin` column ("base", "extend")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ..errors import TokcolumnarError, TokcolumnarValueError
from .unigram import UnigramResult

#: The `origin` of each vocabulary entry of an extension (as the merges' in `training.extend`).
BASE_ORIGIN, NEW_ORIGIN = "base", "extend"


def read_unigram_base(path: str | Path) -> pl.DataFrame:
    """A Unigram base's vocabulary (id, token, kind, score), ids 0..K-1 in order."""
    try:
        vocab = pl.read_parquet(Path(path) / "vocab.parquet",
                                columns=["id", "token", "kind", "score"])
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:
        raise TokcolumnarError(f"--extend {path}: its vocab.parquet is not a Unigram run's "
                               f"({type(e).__name__})") from None
    vocab = vocab.sort("id")
    if vocab.get_column("id").to_list() != list(range(vocab.height)):
        raise TokcolumnarError(f"--extend {path}: its vocab.parquet ids are not "
                               f"0..{vocab.height - 1}")
    return vocab


def extended_vocab(base: pl.DataFrame, trained: UnigramResult, vocab_size: int,
                   base_path: str) -> pl.DataFrame:
    """The base's vocabulary, then the trained pieces it lacks (single characters first, then
    by score, ties by piece) up to `vocab_size` entries, with `origin`."""
    need = vocab_size - base.height
    new = pl.DataFrame({"token": pl.Series(trained.pieces, dtype=pl.String),
                        "score": pl.Series(trained.scores.astype(np.float64))})
    new = (new.join(base.select("token"), on="token", how="anti")
           .with_columns((pl.col("token").str.len_chars() > 1).alias("_long"))
           .sort(["_long", "score", "token"], descending=[False, True, False])
           .drop("_long"))
    if new.height < need:
        raise TokcolumnarValueError(
            f"--vocab-size {vocab_size}: the new corpus gives {new.height:,} pieces that the "
            f"base ({base_path}, {base.height:,} entries) lacks; give --vocab-size "
            f"{base.height + new.height:,} or less")
    new = new.head(need)
    added = pl.DataFrame({
        "id": pl.Series(np.arange(base.height, vocab_size), dtype=pl.UInt32),
        "token": new.get_column("token"),
        "kind": pl.Series(["piece"] * new.height, dtype=pl.String),
        "score": new.get_column("score")})
    return pl.concat([
        base.with_columns(pl.col("id").cast(pl.UInt32), pl.lit(BASE_ORIGIN).alias("origin")),
        added.with_columns(pl.lit(NEW_ORIGIN).alias("origin"))])
