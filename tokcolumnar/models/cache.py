"""Word -> ids for the encoder: the distinct pre-tokens of a batch go through the model once,
and a bounded cache keeps the ids of words already seen in earlier batches (in a Zipfian
corpus nearly every word of a later batch is a hit), so the model's cost grows with new
distinct words, not with tokens. Ids are gathered through Arrow list offsets with NumPy: no
Python object per word or token."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pyarrow as pa

from .base import Model

DEFAULT_CACHE_WORDS = 1 << 20  # about 60 MB for byte-level English words


def list_parts(ids: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A list[u32] Series as (offsets int64 of len n+1, flat u32 values), without copies of the
    values where Arrow allows."""
    arr = ids.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_list(pa.uint32()))
    offsets = arr.offsets.to_numpy().astype(np.int64)
    values = arr.values.to_numpy(zero_copy_only=False)
    return offsets - offsets[0], values[offsets[0]:offsets[-1]] if len(values) else values


def gather_runs(offsets: np.ndarray, values: np.ndarray, index: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the runs `values[offsets[i]:offsets[i+1]]` for i in `index`: returns the
    run lengths and the flat values (one NumPy gather, no loop)."""
    starts = offsets[index]
    lengths = offsets[index + 1] - starts
    total = int(lengths.sum())
    # each output position = its run's start + its index within the run
    out_start = np.zeros(len(index), dtype=np.int64)
    np.cumsum(lengths[:-1], out=out_start[1:])
    shift = np.repeat(starts - out_start, lengths)
    shift += np.arange(total, dtype=np.int64)
    return lengths, values[shift]


class WordCache:
    """word (a raw pre-token, before `word_expr`) -> ids, for one model; at most `max_words`
    entries, filled first come first kept (the frequent words of a corpus come early)."""

    def __init__(self, model: Model, word_expr: Callable[[pl.Expr], pl.Expr],
                 max_words: int = DEFAULT_CACHE_WORDS):
        self.model = model
        self.word_expr = word_expr
        self.max_words = max_words
        self.table = pl.DataFrame(schema={"word": pl.String, "ids": pl.List(pl.UInt32)})

    def lookup(self, words: pl.Series) -> pl.Series:
        """ids (list[u32]) of each of the distinct `words`, in their order."""
        frame = words.rename("word").to_frame().with_row_index("i")
        if self.table.height:
            frame = frame.join(self.table, on="word", how="left", maintain_order="left")
        else:
            frame = frame.with_columns(pl.lit(None, dtype=pl.List(pl.UInt32)).alias("ids"))
        missing = frame.get_column("ids").is_null()
        if not missing.any():
            return frame.get_column("ids")
        # the words not cached: mapped (e.g. to byte characters) and through the model
        new = frame.filter(missing).select("i", "word")
        mapped = new.select(self.word_expr(pl.col("word"))).to_series()
        new = new.with_columns(self.model.encode_words(mapped).cast(pl.List(pl.UInt32))
                               .alias("ids"))
        room = self.max_words - self.table.height
        if room > 0:
            self.table = pl.concat([self.table, new.select("word", "ids").head(room)])
        if new.height == frame.height:
            return new.get_column("ids")
        return (pl.concat([frame.filter(~missing).select("i", "ids"), new.select("i", "ids")])
                .sort("i").get_column("ids"))
