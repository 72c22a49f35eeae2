"""The SQL twin of a Unigram model's segmentation (sql/13_unigram_viterbi.sql): every distinct
word segmented by SentencePiece's Viterbi in DuckDB, to cross-check the `words` table the
Polars trainer wrote (`tokcolumnar crosscheck --model unigram`; docs/unigram.md, "The SQL
twin"). The seeds, the EM iterations and the pruning rounds have theirs in `unigram_seeds` and
`unigram_rounds`.

Example (a vocabulary where "▁ab" beats "▁a" + "b")::

    >>> import polars as pl
    >>> vocab = pl.DataFrame({"id": [0, 1, 2, 3, 4], "token": ["<unk>", "▁a", "b", "▁ab", "▁"],
    ...                       "kind": ["special", "piece", "piece", "piece", "piece"],
    ...                       "score": [0.0, -1.0, -2.0, -2.5, -3.0]})
    >>> segment_words(pl.Series(["▁ab", "▁ba"]), vocab).to_list()
    [[3], [4, 2, 0]]
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..models.unigram import UNK_PENALTY
from .engine import scripts


def segment_words(words: pl.Series, vocab: pl.DataFrame, unk_token: str = "<unk>"
                  ) -> pl.Series:
    """The piece ids of each of `words` (distinct), by the SQL Viterbi over `vocab` (a
    vocab.parquet of a Unigram run: `kind` 'piece' are the pieces, 'byte' the byte-fallback
    pieces)."""
    pieces = vocab.filter(pl.col("kind") == "piece")
    scores = pieces.get_column("score").to_numpy()
    unk_score = float(scores.min() - UNK_PENALTY) if len(scores) else -UNK_PENALTY
    unk_id = int(vocab.filter(pl.col("token") == unk_token).get_column("id")[0])
    byte_pieces = vocab.filter(pl.col("kind") == "byte").select(
        pl.col("token").alias("piece"), pl.col("id").cast(pl.Int32))
    tc_uwords = pl.DataFrame({"w": np.arange(len(words), dtype=np.int64), "word": words})
    tc_pieces = pieces.select(pl.col("id").cast(pl.Int32), pl.col("token").alias("piece"),
                              pl.col("score").cast(pl.Float64))
    longest = int(tc_pieces.get_column("piece").str.len_chars().max() or 1)
    word_max = int(words.str.len_chars().max() or 0)
    with scripts() as sql:
        con = sql.con
        con.register("tc_uwords", tc_uwords)
        con.register("tc_pieces", tc_pieces)
        con.register("tc_byte_pieces", byte_pieces)
        sql.run("unigram_viterbi", "lattice", max_len=longest, unk_id=unk_id,
                unk_score=unk_score)
        sql.run("unigram_viterbi", "first")
        # one statement per character position: the nodes ending there start earlier
        for k in range(1, word_max + 1):
            sql.run("unigram_viterbi", "step", k=k)
        sql.run("unigram_viterbi", "segmentation", unk_id=unk_id,
                byte_fallback=bool(len(byte_pieces)))
        found = con.sql("SELECT w, ids FROM tc_segmentation").pl()
    # in word order (every word has a path: each character has a node)
    return (tc_uwords.select("w").join(found, on="w", how="left", maintain_order="left")
            .get_column("ids").cast(pl.List(pl.Int64)))


def first_segmentation_difference(words: pl.DataFrame, vocab: pl.DataFrame) -> str | None:
    """Compare a Unigram run's `words` table (its `ids` column) with the SQL Viterbi over its
    `vocab`: the first word segmented differently, or None."""
    frame = words.select("word", pl.col("ids").cast(pl.List(pl.Int64))).with_columns(
        segment_words(words.get_column("word"), vocab).alias("sql"))
    bad = frame.filter(pl.col("ids") != pl.col("sql"))
    if not bad.height:
        return None
    word, ids, sql_ids = bad.row(0)
    return (f"{bad.height:,} of {frame.height:,} words differ; the first, {word!r}: words "
            f"table {ids}, SQL Viterbi {sql_ids}")
