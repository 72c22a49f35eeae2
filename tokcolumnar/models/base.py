"""The encode side of a model: `Model.encode_words(words) -> list[u32] per word`, run on the
distinct words of a batch, and the shared pieces of the models (id lists from flat arrays, a
words' characters exploded, the HF `vocab` reader)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import polars as pl

from ..hfjson import HFObject, is_json_int, json_kind

if TYPE_CHECKING:
    import pyarrow as pa

U32_MAX = (1 << 32) - 1  # HF stores ids as u32
MAX_ID_GAP = 1 << 20  # ids beyond (number of tokens + this) would need huge id tables


def explode_chars(words: pl.Series) -> pl.DataFrame:
    """One row per character: word index `w`, character, its index `i` and word length `n`."""
    return (words.to_frame("word").lazy()
            .select(pl.int_range(pl.len(), dtype=pl.Int64).alias("w"),
                    pl.col("word").str.split("").alias("char"))
            .with_columns(pl.col("char").list.len().alias("n"))
            .explode("char")
            .drop_nulls("char")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("w").alias("i"))
            .collect())


class _ArrowArrayCapsule:
    """An Arrow array offered only through the Arrow PyCapsule interface."""

    def __init__(self, array: pa.Array):
        self.array = array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> object:
        return self.array.__arrow_c_array__(requested_schema)


def series_from_arrow(name: str, array: pa.Array) -> pl.Series:
    """`pl.Series(name, array)` for a pyarrow Array, imported through the Arrow PyCapsule
    interface: Polars' pyarrow path imports `pyarrow.compute` first (to recast dictionary
    arrays), 0.1-0.2 s of every `encode` run's start-up that nothing else needed."""
    return pl.Series(name, _ArrowArrayCapsule(array)).alias(name)


def lists_from_offsets(name: str, offsets: np.ndarray, values: pl.Series) -> pl.Series:
    """List `i` is `values[offsets[i]:offsets[i+1]]` (int64 offsets from 0)."""
    import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

    # NumPy reaches Arrow through Polars: pa.array(ndarray) would import pandas (~0.2 CPU-s)
    arr = pa.LargeListArray.from_arrays(pl.Series(offsets).to_arrow(), values.to_arrow())
    return series_from_arrow(name, arr)


def lists_from_flat(n_rows: int, row: np.ndarray, values: pl.Series) -> pl.Series:
    """Group flat values (sorted by row) into one list per row, empty lists for absent rows."""
    lengths = np.bincount(row, minlength=n_rows)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return lists_from_offsets(values.name, offsets, values)


class Model:
    """Base class: `encode_words(words)` -> list[u32] per word; HF JSON (de)serialisation."""

    hf_type: ClassVar[str] = ""
    vocab: dict[str, int]

    def encode_words(self, words: pl.Series) -> pl.Series:
        raise NotImplementedError

    def prepare(self) -> None:
        """Build the tables encoding looks things up in, once, before threads share the model
        (each is otherwise made on first use: by every thread that gets there first)."""

    def to_hf(self) -> dict[str, Any]:
        raise NotImplementedError

    def id_to_token(self) -> list[str]:
        out = [""] * (max(self.vocab.values(), default=-1) + 1)
        for t, i in self.vocab.items():
            out[i] = t
        return out



def vocab_from_hf(obj: HFObject) -> dict[str, int]:
    """A model's `vocab` (token -> id), checked as HF reads it (ids are integers in
    0..2**32-1) and refusing what HF accepts but cannot give sensible ids for: two tokens with
    one id. Gaps between ids are allowed (as in HF), up to a bound that keeps id tables
    small."""
    vocab = obj.obj("vocab")
    owner: dict[int, str] = {}
    for token, i in vocab.items():
        if not is_json_int(i):
            raise obj.error(f"vocab: the id of {token!r} must be an integer, got {json_kind(i)}")
        if not 0 <= i <= U32_MAX:
            raise obj.error(f"vocab: the id of {token!r} is {i}; ids go from 0 to {U32_MAX}")
        first = owner.setdefault(i, token)
        if first != token:
            raise obj.error(f"vocab: id {i} is given to both {first!r} and {token!r}")
    top = max(owner, default=-1)
    if top >= len(vocab) + MAX_ID_GAP:
        raise obj.error(f"vocab: ids go up to {top} for {len(vocab)} tokens (too sparse)")
    return dict(vocab)
