"""Word -> ids for the encoder: the distinct pre-tokens of a batch go through the model once,
and a bounded cache keeps the ids of words already seen in earlier batches (in a Zipfian
corpus nearly every word of a later batch is a hit), so the model's cost grows with new
distinct words, not with tokens.

Words are named by a 64-bit hash (Polars' `hash`, vectorised) and grouped by sorting the hashes
with NumPy; every grouping is then checked by comparing the strings themselves, so a hash
collision can cost time (the batch is grouped by a hash join instead) but never change an id.
Ids are gathered through Arrow list offsets with NumPy: no Python object per word or token."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import polars as pl

from ..buffers import compacted, gather_table, list_parts
from .base import Model

DEFAULT_CACHE_WORDS = 1 << 20  # at most this many cached words (~100 MB for English)
HASH_SEED = 0x746F6B63  # fixed: cache keys are compared across batches
MAX_CACHE_CHUNKS = 32  # the cached words' chunks before they are merged into one


def word_hashes(words: pl.Series) -> np.ndarray:
    return words.hash(seed=HASH_SEED).to_numpy()


def group_hashes(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct value of `hashes` (in order of first occurrence) and
    each value's group (int64), by Polars' hashing: twice as fast as `np.unique`'s sort on
    what mostly repeats (an encode batch's English words, the pieces of its Chinese words;
    medium/en's dedupe 0.49 -> 0.27 CPU-s), as fast on the mostly distinct Chinese words."""
    first = pl.Series("h", hashes).arg_unique().to_numpy()
    groups = pl.DataFrame({"h": hashes[first], "g": np.arange(len(first), dtype=np.int64)})
    inverse = pl.DataFrame({"h": hashes}).join(
        groups, on="h", how="left", maintain_order="left").get_column("g").to_numpy()
    return first.astype(np.int64), inverse


def distinct_words(words: pl.Series) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    """The distinct words (in order of first occurrence), their hashes, and each word's index
    among them."""
    hashes = word_hashes(words)
    first, inverse = group_hashes(hashes)
    uniq_hash = hashes[first]
    uniq = words.gather(first)
    # exact: each word must equal the representative of its hash (else a collision)
    if len(words) and not (words == uniq.gather(inverse)).all():
        uniq = words.unique(maintain_order=True)
        inverse = words.to_frame("w").join(
            uniq.to_frame("w").with_row_index("t"), on="w", how="left",
            maintain_order="left").get_column("t").to_numpy().astype(np.int64)
        uniq_hash = word_hashes(uniq)
    return uniq, uniq_hash, inverse.astype(np.int64).reshape(-1)


class WordCache:
    """word (a raw pre-token, before `word_expr`) -> ids, for one model; at most `max_words`
    entries, filled first come first kept (the frequent words of a corpus come early).

    Storage: `keys` (sorted hashes) with `slots` (entry numbers); entry k's ids are
    `values[offsets[k]:offsets[k+1]]` and its word `words[k]` (checked on every hit)."""

    def __init__(self, model: Model, word_expr: Callable[[pl.Expr], pl.Expr],
                 max_words: int = DEFAULT_CACHE_WORDS, key_dtype: pl.DataType = pl.String,
                 encode_kept: Callable[[pl.Series], tuple[pl.Series, np.ndarray]] | None = None):
        self.model = model
        self.word_expr = word_expr
        # the new words (after `word_expr`) -> ids: the model's `encode_words`, or with
        # `encode_kept` -> (ids, which words to keep in the cache): words a model encodes as
        # pieces it caches itself are not kept twice
        self.encode_kept = encode_kept
        self.max_words = max_words
        self.keys = np.zeros(0, dtype=np.uint64)
        self.slots = np.zeros(0, dtype=np.int64)
        self.words = pl.Series("word", [], dtype=key_dtype)  # strings, or symbol lists
        self.offsets = np.zeros(1, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.uint32)
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.words)

    def lookup(self, words: pl.Series, hashes: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of each of the distinct `words` as (offsets, flat values): entry i is
        `values[offsets[i]:offsets[i+1]]`. `hashes`: the words' hashes if known.

        Batches encoded in parallel share the cache: the lock is held to find the cached
        words and to add new ones, not while the model encodes the new words (the cache's
        arrays are replaced, never changed in place, so a snapshot stays valid)."""
        if hashes is None:
            hashes = word_hashes(words)
        with self.lock:
            entry = self._find(words, hashes)
            offsets, values, n_cached = self.offsets, self.values, len(self.words)
        miss = np.flatnonzero(entry < 0)
        if not len(miss):
            return gather_table(offsets, values, entry)
        # the new words: mapped (e.g. to byte characters) and through the model once
        new_words = words.gather(miss)
        mapped = new_words.to_frame("word").select(self.word_expr(pl.col("word"))).to_series()
        kept = None
        if self.encode_kept is not None:
            encoded, kept = self.encode_kept(mapped)
            new_off, new_val = list_parts(encoded)
        else:
            new_off, new_val = list_parts(self.model.encode_words(mapped))
        # the entries of this batch: the snapshot's, then the new words' after them
        entry[miss] = n_cached + np.arange(len(miss))
        table = gather_table(np.concatenate([offsets, offsets[-1] + new_off[1:]]),
                             np.concatenate([values, new_val]), entry)
        if kept is not None and not kept.all():  # only the kept words are added
            at = np.flatnonzero(kept)
            new_words, miss = new_words.gather(at), miss[at]
            new_off, new_val = gather_table(new_off, new_val, at)
        with self.lock:
            room = min(self.max_words - len(self.words), len(miss))
            if room > 0:
                self._add(new_words[:room], hashes[miss[:room]], new_off[:room + 1], new_val)
        return table

    def _find(self, words: pl.Series, hashes: np.ndarray) -> np.ndarray:
        """Each word's cache entry, -1 when not cached."""
        entry = np.full(len(words), -1, dtype=np.int64)
        if len(self.keys):
            # cached: the hash is in the sorted keys and the stored word is the same string
            pos = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
            hit = np.flatnonzero(self.keys[pos] == hashes)
            if len(hit):
                cand = self.slots[pos[hit]]
                same = (self.words.gather(cand) == words.gather(hit)).to_numpy()
                entry[hit[same]] = cand[same]
        return entry

    def _add(self, words: pl.Series, hashes: np.ndarray, new_off: np.ndarray,
             new_val: np.ndarray) -> None:
        """Add `words` after the cached ones; their ids: the runs `new_off` (from 0) of
        `new_val`."""
        first = len(self.words)
        # a hash already cached (a collision, or a word another batch added meanwhile) is
        # not added twice
        pos = np.searchsorted(self.keys, hashes)
        fresh = np.ones(len(hashes), dtype=bool)
        if len(self.keys):  # the sorted keys already give each hash's place: no set lookup
            fresh = self.keys[np.minimum(pos, len(self.keys) - 1)] != hashes
        at = np.argsort(hashes[fresh], kind="stable")
        self.keys = np.insert(self.keys, pos[fresh][at], hashes[fresh][at])
        self.slots = np.insert(self.slots, pos[fresh][at],
                               first + np.flatnonzero(fresh)[at])
        # appended as a chunk of its own: rechunking copied the whole cache for every batch
        # (5% of the time on medium/zh.txt); merged only once the chunks are many, as a
        # gather looks up each index's chunk
        if words.dtype in (pl.String, pl.Binary):  # not pinning the batch's buffers
            words = compacted(words)
        self.words = pl.concat([self.words, words.rename("word")], rechunk=False)
        if self.words.n_chunks() > MAX_CACHE_CHUNKS:
            self.words = self.words.rechunk()
        self.offsets = np.concatenate([self.offsets, self.offsets[-1] + new_off[1:]])
        self.values = np.concatenate([self.values, new_val[:new_off[-1]]])


