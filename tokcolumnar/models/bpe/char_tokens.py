"""The characters a byte-level BPE may start from as one token (`CharTokens`): the merge loop
then skips the rounds that join the bytes of each such character."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class ByteMerger(Protocol):
    """What `CharTokens` asks of the model (`model.BPEModel`): the token id of each byte, and
    the merge loop over runs of symbols."""

    def byte_ids(self) -> np.ndarray | None: ...

    def merge_symbols(self, lengths: np.ndarray, ids: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class CharTokens:
    """Which multi-byte characters a byte-level BPE may start from as one token: the pieces'
    bytes of such a character become its token before the merge loop, which then skips the
    rounds that join the bytes of every character (two of a CJK character's three bytes).

    Exact when the merge table is well formed (`merges_well_formed`), for a character c whose
    bytes alone merge into one token T, if every merge whose right part is a proper prefix of
    c's bytes, or whose left part a proper suffix, has a rank above `made[T]` (the highest rank
    producing T). In a well-formed table the ranks a word merges in never decrease (a merge of
    rank r creates only pairs of higher rank), so inside any word the pair c's own merges are
    at (rank <= made[T]) always comes before a merge joining a part of c with a neighbour
    (whose left or right part is then such a prefix or suffix: rank > made[T]): c becomes T
    exactly as alone, before anything crosses its edges; the other merges below made[T] do
    not touch c, and every merge with T has a rank above made[T]. So starting from T gives
    the same merges. `tests/models/test_bpe_bytes.py` checks the ids against HF.

    `token[cp]`: T for such a character, -1 for another (or a one-byte one), -2 not yet
    looked at (characters are looked at the first time a batch holds them)."""

    token: np.ndarray  # int32 per code point
    made: np.ndarray  # per token id, the highest rank producing it (-1: none)
    min_as_left: np.ndarray  # per token id, the lowest rank of a merge with it on the left
    min_as_right: np.ndarray  # ... on the right (NO_PAIR when none)
    short_keys: np.ndarray  # sorted packed byte strings (1-3 bytes) that are tokens
    short_ids: np.ndarray  # their token ids

    @staticmethod
    def pack(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """The byte strings `data[start:start+length]` (length 1-3) as int64 keys."""
        key = length.astype(np.int64) << 24
        for j in range(3):
            inside = j < length
            key[inside] |= data[(start + j)[inside]].astype(np.int64) << (16 - 8 * j)
        return key

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The token id of each packed byte string, -1 when it is no token."""
        at = np.minimum(np.searchsorted(self.short_keys, keys), len(self.short_keys) - 1)
        return np.where(self.short_keys[at] == keys, self.short_ids[at], -1) if len(
            self.short_keys) else np.full(len(keys), -1, dtype=np.int64)

    def tokens_of(self, bpe: ByteMerger, code: np.ndarray) -> np.ndarray:
        """`token` of each code point, looking at the characters not seen before (a race
        only writes the same values twice)."""
        found = self.token[code]
        new = np.unique(code[found == -2])
        if len(new):
            self.token[new] = self._look_at(bpe, new)
            found = self.token[code]
        return found

    def _look_at(self, bpe: ByteMerger, new: np.ndarray) -> np.ndarray:
        """`token` of the code points `new` (see the class's docstring)."""
        data = np.frombuffer("".join(map(chr, new.tolist())).encode("utf-8", "surrogatepass"),
                             dtype=np.uint8)
        length = np.where(new < 0x80, 1, np.where(new < 0x800, 2, np.where(new < 0x10000, 3, 4)))
        start = np.zeros(len(new), dtype=np.int64)
        np.cumsum(length[:-1], out=start[1:])
        byte_ids = bpe.byte_ids()
        assert byte_ids is not None
        word_of, ids = bpe.merge_symbols(length.astype(np.int64), byte_ids[data])
        alone = np.bincount(word_of, minlength=len(new)) == 1
        token = np.full(len(new), -1, dtype=np.int64)
        token[word_of[alone[word_of]]] = ids[alone[word_of]]
        ok = (token >= 0) & (length > 1)
        limit = np.where(ok, self.made[np.maximum(token, 0)], -1)
        # every proper prefix that is a token: merges with it on the right above the limit;
        # every proper suffix that is a token: merges with it on the left above the limit
        for n in range(1, 4):
            # (where there is no such part, a one-byte string stands in and is ignored)
            has = ok & (length > n)
            prefix = self.lookup(self.pack(data, start, np.where(has, n, 1)))
            bad = has & (prefix >= 0) & (self.min_as_right[np.maximum(prefix, 0)] <= limit)
            suffix = self.lookup(self.pack(data, np.where(has, start + length - n, start),
                                           np.where(has, n, 1)))
            bad |= has & (suffix >= 0) & (self.min_as_left[np.maximum(suffix, 0)] <= limit)
            ok &= ~bad
        return np.where(ok, token, -1)
