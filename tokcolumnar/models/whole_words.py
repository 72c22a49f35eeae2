"""HF's BPE option `ignore_merges`: a word that is itself a token of the vocabulary is that
token, whatever its merges would make of it (HF `BPE::tokenize`, which looks the word up before
merging; tiktoken does the same with every piece). Llama 3's released tokenizer.json sets it,
as transformers' `TikTokenConverter` does.

The option is read off the model's JSON before the BPE model is built (`split_option`) and
applied around the word cache's model step (`whole_words_first`): the distinct new words of a
batch that are tokens take their ids from the vocabulary, the others go through the model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from ..buffers import list_parts, lists_from_offsets


def split_option(model: Any) -> tuple[Any, bool]:
    """A BPE model's JSON without `ignore_merges` (which our BPE model does not take) and the
    option's value; any other model's JSON as is (and False)."""
    if (isinstance(model, dict) and model.get("type", "BPE") == "BPE"
            and model.get("ignore_merges") is True):
        return {**model, "ignore_merges": False}, True
    return model, False


Encode = Callable[[pl.Series], tuple[pl.Series, np.ndarray]]


def whole_words_first(vocab: dict[str, int], token_of: Callable[[pl.Expr], pl.Expr],
                      encode: Encode) -> Encode:
    """`encode` (words -> (ids lists, which words the cache keeps)) with HF's ignore_merges:
    a word whose token (`token_of`: its vocabulary form, e.g. byte-level characters) is in
    `vocab` is that one id; the other words go through `encode`."""
    keys = pl.Series("t", list(vocab), dtype=pl.String)
    ids = pl.Series("i", list(vocab.values()), dtype=pl.UInt32)

    def run(words: pl.Series) -> tuple[pl.Series, np.ndarray]:
        tokens = words.to_frame("w").select(token_of(pl.col("w")).alias("t"))
        found = tokens.join(pl.DataFrame({"t": keys, "i": ids}), on="t", how="left",
                            maintain_order="left").get_column("i")
        whole = found.is_not_null().to_numpy()
        if not whole.any():
            return encode(words)
        rest = np.flatnonzero(~whole)
        lengths = np.ones(len(words), dtype=np.int64)
        kept = np.ones(len(words), dtype=bool)
        if len(rest):
            encoded, rest_kept = encode(words.gather(rest))
            rest_off, rest_val = list_parts(encoded)
            lengths[rest] = np.diff(rest_off)
            kept[rest] = rest_kept
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.empty(int(offsets[-1]), dtype=np.uint32)
        values[offsets[:-1][whole]] = found.filter(pl.Series(whole)).to_numpy()
        if len(rest):
            # each remaining word's ids at its place: its run's start + index in the run
            starts = np.repeat(offsets[:-1][rest], np.diff(rest_off))
            within = np.arange(len(rest_val)) - np.repeat(rest_off[:-1], np.diff(rest_off))
            values[starts + within] = rest_val
        return lists_from_offsets("ids", offsets, pl.Series("ids", values)), kept

    return run
