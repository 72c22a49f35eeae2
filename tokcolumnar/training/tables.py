"""The result tables of a training run (docs/architecture.md, "Tables"): `words` with each
word's final segmentation, `merges` in rank order, `vocab` by id. Both engines return a
`TrainTables`; the Polars engine builds it here from the merge loop's record and the final
layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..buffers import lists_at
from .bpe import MergeRecord
from .symbols import Initial


@dataclass
class TrainTables:
    """`words`: word, count, first_seen, tokens, ids; `merges`: rank, left, right, token,
    left_id, right_id, id, count, score, words (+ left_count, right_count for likelihood
    WordPiece); `vocab`: id, token, kind, rank."""

    words: pl.DataFrame
    merges: pl.DataFrame
    vocab: pl.DataFrame


def merges_table(record: MergeRecord, tokens: list[str],
                 scores: Sequence[float] | None = None) -> pl.DataFrame:
    """The merges in rank order, with the strings of their tokens."""
    token_of = np.array(tokens, dtype=object)
    left = np.asarray(record.left, dtype=np.int64)
    right = np.asarray(record.right, dtype=np.int64)
    new = np.asarray(record.new, dtype=np.int64)
    return pl.DataFrame({
        "rank": pl.Series(np.arange(len(left)), dtype=pl.UInt32),
        "left": pl.Series(token_of[left].tolist(), dtype=pl.String),
        "right": pl.Series(token_of[right].tolist(), dtype=pl.String),
        "token": pl.Series(token_of[new].tolist(), dtype=pl.String),
        "left_id": pl.Series(left, dtype=pl.UInt32),
        "right_id": pl.Series(right, dtype=pl.UInt32),
        "id": pl.Series(new, dtype=pl.UInt32),
        "count": pl.Series(np.asarray(record.count, dtype=np.uint64)),
        "score": pl.Series(np.asarray(scores, dtype=np.float64) if scores is not None
                           else [None] * len(left), dtype=pl.Float64),
        "words": pl.Series(np.asarray(record.words, dtype=np.uint64)),
    })


def vocab_table(initial: Initial, merges: pl.DataFrame) -> pl.DataFrame:
    """Every token by id, with its kind and the rank of the merge that first made it."""
    vocab = initial.vocab
    first_rank = merges.group_by("id").agg(pl.col("rank").min())
    return pl.DataFrame({
        "id": pl.Series(np.arange(len(vocab)), dtype=pl.UInt32),
        "token": pl.Series(vocab.tokens, dtype=pl.String),
        "kind": pl.Series(vocab.kinds, dtype=pl.String),
    }).join(first_rank, on="id", how="left").sort("id")


def words_table(words: pl.DataFrame, offsets: np.ndarray, ids: np.ndarray,
                tokens: list[str]) -> pl.DataFrame:
    """`words` with each word's final tokens and ids, from the final segmentation (`offsets`
    per word into the flat `ids`). Polars builds the lists (`lists_at`): no pyarrow import on
    a training run (~0.2 CPU-s and ~35 MiB of start-up for a run that has no other use for
    it), no group-by. The token lists are gathered from the vocabulary by the id lists, so
    no flat column of token strings (16 bytes a value) is held beside them: medium/en with
    `--preset bert` (462k final tokens), the step's peak +23 -> +15 MiB."""
    id_lists = lists_at(pl.Series(ids, dtype=pl.UInt32), offsets).alias("ids")
    vocabulary = pl.Series(tokens, dtype=pl.String).implode()
    token_lists = id_lists.to_frame().select(
        pl.lit(vocabulary).list.gather(pl.col("ids")).alias("tokens")).to_series()
    return words.with_columns(token_lists, id_lists)



