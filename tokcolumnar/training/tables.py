"""The result tables of a training run (docs/architecture.md, "Tables"): `words` with each
word's final segmentation, `merges` in rank order, `vocab` by id. Both engines return a
`TrainTables`; the Polars engine builds it here from the merge loop's record and the final
layout (`result_tables`). When the loop kept its state on disk, or a run with a work directory
ends with more than one slice of final tokens, the words table is written to a Parquet file a
slice of words at a time (`WordsFile`) instead of built whole: every word's tokens at once were
the run's peak (100 MB of byte-level Chinese: ~1.5 GB on disk; in memory the export of the whole
table peaked ~190 MiB above the loop's end)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from .. import ondisk
from ..buffers import lists_at
from ..config import TrainConfig
from ..corpus.counts_file import counts_metadata
from ..memory import keep_most_frequent
from ..outputs import PARQUET_MARKER
from .bpe import MergeRecord
from .symbols import Initial

#: A words table written to a file (`words_file`) takes this many final tokens at a time (a
#: slice's token lists: ~20 bytes a token).
WORDS_FILE_TOKENS = 1 << 22
#: The file a run in memory writes its words table to, in its work directory (`result_tables`;
#: the counted words there are `words.parquet`).
RESULT_WORDS = "result_words.parquet"


@dataclass
class WordsFile:
    """A words table in a Parquet file (`words_file`), read when asked (`load`); `height` and
    `occurrences` (its words and the sum of their counts) are known without reading it.
    `owned`: the file is the run's own, in its work directory (the export may move it)."""

    path: Path
    height: int
    occurrences: int
    owned: bool = True

    def load(self) -> pl.DataFrame:
        return pl.read_parquet(self.path)


class CountedWords:
    """A run's words table, which the Polars engine drops while its merge loop runs and reads
    back for the result tables (`release`, `table`), when the work directory holds a copy
    (`saved`, written in the background: `wait` joins that write). The loop needs only its
    layout: 100 MB of byte-level Chinese ~220 MB less at the loop's peak, 5 GB of text with
    Chinese clauses ~1.3 GB. `max_words`: the copy is the counted table, --max-words is
    applied again to it (`keep_most_frequent` keeps the same rows in the same order)."""

    def __init__(self, words: pl.DataFrame, saved: Path | None = None,
                 wait: Callable[[], None] | None = None, max_words: int | None = None) -> None:
        self._table: pl.DataFrame | None = words
        self.saved, self.wait, self.max_words = saved, wait, max_words

    def table(self) -> pl.DataFrame:
        """The words table (read back from the saved copy when it was released)."""
        if self._table is None:
            assert self.saved is not None
            self._table = keep_most_frequent(pl.read_parquet(self.saved), self.max_words)
        return self._table

    def release(self) -> None:
        """Drop the table, once its saved copy is written (kept when there is none)."""
        if self.saved is None:
            return
        if self.wait is not None:
            self.wait()
        self._table = None


@dataclass
class TrainTables:
    """`words`: word, count, first_seen, tokens, ids (or the file holding them); `merges`:
    rank, left, right, token, left_id, right_id, id, count, score, words (+ left_count,
    right_count for likelihood WordPiece); `vocab`: id, token, kind, rank."""

    words: pl.DataFrame | WordsFile
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


def words_file(words: pl.DataFrame, offsets: np.ndarray, ids: np.ndarray, tokens: list[str],
               path: Path, metadata: dict[str, str]) -> WordsFile:
    """`words_table` written to `path` (with our marker and `metadata`, as the export writes a
    words table) a slice of `WORDS_FILE_TOKENS` final tokens at a time: the memory it takes is
    one slice's lists, not every word's."""
    import pyarrow.parquet as pq  # (only here: a run in memory does not import pyarrow)

    bounds = [0]
    while bounds[-1] < words.height:  # the words of each slice: whole words, >= 1 each
        at = int(np.searchsorted(offsets, offsets[bounds[-1]] + WORDS_FILE_TOKENS, "right"))
        bounds.append(min(max(at - 1, bounds[-1] + 1), words.height))
    schema_metadata = {PARQUET_MARKER: json.dumps({"kind": "words"}), **metadata}
    writer = None
    try:
        for lo, hi in zip(bounds, bounds[1:]):
            part = words_table(words.slice(lo, hi - lo), offsets[lo:hi + 1] - offsets[lo],
                               ids[offsets[lo]:offsets[hi]], tokens).to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, part.schema.with_metadata(schema_metadata),
                                          compression="zstd")
            writer.write_table(part)
            del part
        if writer is None:  # no words: the empty table
            words_table(words, offsets, ids, tokens).write_parquet(path, metadata=schema_metadata)
    except BaseException:
        if writer is not None:
            writer.close()
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    if writer is not None:
        writer.close()
    occurrences = int(words.get_column("count").sum()) if words.height else 0
    return WordsFile(path, words.height, occurrences)


def result_tables(words: pl.DataFrame, initial: Initial, merges: pl.DataFrame,
                  cfg: TrainConfig, work: Path | None = None) -> TrainTables:
    """The tables of a Polars engine run once its loop has ended: the final segmentation
    read off the layout, which is then dropped (~5 bytes per position) before the tables'
    strings are built, so that the run's peak stays the loop's. With the loop's state on disk
    (`ondisk`), the words table goes to a file in the work directory (`words_file`); so it does
    from a run in memory with a work directory (`work`) when its final tokens fill more than
    one slice (a small table is built whole: no pyarrow import, which costs a small run
    ~0.2 s)."""
    offsets, ids = initial.layout.segmentation(initial.n_words)
    del initial.layout
    tokens = initial.vocab.tokens
    store = ondisk.current()
    path = (store.directory / "words.parquet" if store is not None
            else work / RESULT_WORDS if work is not None and ids.size > WORDS_FILE_TOKENS
            else None)
    table = (words_table(words, offsets, ids, tokens) if path is None else
             words_file(words, offsets, ids, tokens, path, counts_metadata(cfg)))
    return TrainTables(table, merges, vocab_table(initial, merges))
