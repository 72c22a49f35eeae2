"""The encode side of a model: `Model.encode_words(words) -> list[u32] per word`, run on the
distinct words of a batch, and the shared pieces of the models (a words' characters exploded,
the HF `vocab` reader; list columns from flat arrays are in `tokcolumnar.buffers`)."""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from ..hfjson import HFObject, is_json_int, json_kind

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
    ids = vocab.values()
    # the usual vocabulary, checked by C loops (~1 ms for 30k tokens, where the loop below
    # takes 5-10): JSON integers only, in range, each once; anything else goes through the
    # loop, which names the first offending token
    if (set(map(type, ids)) == {int} and min(ids) >= 0 and max(ids) <= U32_MAX
            and len(set(ids)) == len(vocab)):
        top = max(ids)
        if top >= len(vocab) + MAX_ID_GAP:
            raise obj.error(f"vocab: ids go up to {top} for {len(vocab)} tokens (too sparse)")
        return dict(vocab)
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
