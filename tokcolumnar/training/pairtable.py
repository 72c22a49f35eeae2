"""Pair counts in NumPy arrays: an open-addressing hash table from a pair key
(`left_id << 32 | right_id`, `passes.pair_key`) to its count (docs/architecture.md, "Memory").

A Python dict of pair counts costs ~100 bytes per pair (its hash slots, plus an int object for
each key past 2**30 and for each count past 256); this table costs 16 bytes per slot (an int64
key and an int64 count) at a load of at most `MAX_LOAD`, ~25-45 bytes per pair, and 8 in its
*narrow* form: with every id below 2**16 - 1 (a vocabulary of up to 65,534 tokens) a key is
stored as `left << 16 | right` in a uint32 (every key is stored plus one: 0 is a free slot,
so a new table is zeros, `EMPTY`), and counts are int32 until one reaches 2**31
(then the counts widen to int64, once). 100 MB of Chinese at 30k: ~270 MB less. Linear probing
with a Fibonacci hash of the key mapped onto any number of slots (`_home`), so a rebuilt table
is sized to its pairs, not rounded up to a power of two (up to 2x the slots: 100 MB of Chinese,
~70 MB); a whole array of keys is looked up or inserted in a few NumPy rounds (each round
advances every unresolved key by one slot), so a pass's changes cost a handful of array calls,
not one dict operation each.

Keys are never removed one by one: a pair whose count falls to 0 keeps its slot (it reads as
0, as an absent key does), and when the used slots pass `MAX_LOAD` the table is rebuilt with the
pairs whose count is not 0, in a capacity where they fill at most `REBUILD_LOAD`."""

from __future__ import annotations

import numpy as np

from .. import ondisk

#: A free slot's stored key: a key is stored plus one (`PairCounts._stored`), so a new table
#: is zeros, its pages untouched until a key lands in them (`ondisk.zeros`).
EMPTY = 0
#: The narrow form's keys hold ids up to this.
NARROW_ID_MAX = (1 << 16) - 2
#: Narrow counts widen to int64 from this count.
NARROW_COUNT_MAX = (1 << 31) - 1
#: Fibonacci hashing: the top bits of key * 2**64 / golden ratio pick the slot.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M64 = (1 << 64) - 1
#: Rebuild past this share of used slots (linear probing stays at a few probes per key).
MAX_LOAD = 0.7
#: After a rebuild the live pairs fill at most this share of the slots.
REBUILD_LOAD = 0.45
#: The fewest slots a table has.
MIN_SLOTS = 1 << 10
#: Keys left unresolved after the array rounds are probed one by one below this many.
SCALAR_MAX = 32
#: A rebuild (and `from_arrays`) inserts this many keys at a time: `_slots`' temporaries are
#: ~50 bytes per key (slot, pending index, probe, held key, masks), which for every pair of a
#: large table at once were the merge loop's peak (100 MB of Chinese: ~0.5 GB); 2^16 keys:
#: ~3 MB.
INSERT_CHUNK = 1 << 16


def narrow_key(key: int) -> int:
    """A pair key (`left << 32 | right`) with both ids below 2**16 in the narrow form,
    `left << 16 | right` (the right id is below 2**16, so the shift by 16 of the key is
    `left << 16` exactly); an int, or an int64 array key by key."""
    return (key >> 16) | (key & 0xFFFF)


def wide_key(key: int) -> int:
    """The pair key of `narrow_key`'s narrow form (an int, or an int64 array key by key)."""
    return ((key >> 16) << 32) | (key & 0xFFFF)


def narrow_keys(keys: np.ndarray) -> np.ndarray:
    """`narrow_key` of int64 pair keys, as uint32."""
    return narrow_key(keys).astype(np.uint32)


def wide_keys(narrow: np.ndarray) -> np.ndarray:
    """`wide_key` of `narrow_keys`' uint32 keys, as int64."""
    return wide_key(narrow.astype(np.int64))


def _slots_for(n: int, load: float) -> int:
    """The slots holding `n` keys at `load` (a multiple of 1,024, at least `MIN_SLOTS`)."""
    return max(MIN_SLOTS, -(-int(n / load) // 1024) * 1024)


class PairCounts:
    """Pair key -> count (int64). `add` folds summed changes in, `get_many`/`get` read counts
    (0 for a key never added), `set` writes one. `narrow`: the 8-byte slots (see the module
    docstring); the caller vouches that no id exceeds `NARROW_ID_MAX`."""

    def __init__(self, expected: int = 0, narrow: bool = False) -> None:
        self.narrow = narrow
        self.count_dtype = np.int32 if narrow else np.int64
        self._allocate(_slots_for(expected, REBUILD_LOAD))

    def _allocate(self, size: int) -> None:
        self.size = size  # slots (below 2**32: `_home`)
        # (in files of the work directory when the loop runs on disk: `ondisk`); zeros, so
        # that a rebuild's new table takes pages as its keys land, not all at once
        self.keys = ondisk.zeros(size, np.uint32 if self.narrow else np.int64)
        self.counts = ondisk.zeros(size, self.count_dtype)
        self.used = 0  # slots holding a key (live or at count 0)

    def __len__(self) -> int:
        """The pairs with a count other than 0."""
        return int(np.count_nonzero(self.counts))

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.counts.nbytes

    def _stored(self, keys: np.ndarray) -> np.ndarray:
        """Pair keys (int64) as the table stores them: plus one (0 is a free slot, `EMPTY`),
        in the narrow form (`narrow_keys`, whose largest key, 0xFFFEFFFE, leaves room) or
        not."""
        keys = np.asarray(keys, dtype=np.int64)
        if self.narrow:
            stored = narrow_keys(keys)
            stored += np.uint32(1)
            return stored
        return keys + 1

    def _home(self, keys: np.ndarray) -> np.ndarray:
        """Each stored key's first slot (int64): the top 32 bits of its Fibonacci hash, scaled
        to the table's size (`hash32 * size >> 32`, Lemire's multiply-shift range reduction:
        no power-of-two size needed)."""
        wide = keys.astype(np.uint64) if self.narrow else keys.view(np.uint64)
        home = wide * GOLDEN
        home >>= np.uint64(32)
        home *= np.uint64(self.size)
        home >>= np.uint64(32)
        return home.astype(np.int64)

    def _slots(self, keys: np.ndarray, insert: bool) -> np.ndarray:
        """The slot of each of `keys` (distinct, stored form: `_stored`): -1 for a missing key,
        or, with `insert`, a new slot claimed for it. Array rounds while many keys are
        unresolved; the last few (the long probe chains) one by one in Python, cheaper than
        more rounds."""
        table, size, empty = self.keys, self.size, EMPTY
        slots = np.full(keys.size, -1, dtype=np.int64)
        pending = np.arange(keys.size)  # indexes into `keys` not resolved yet
        probe = self._home(keys)
        want = keys
        while pending.size > SCALAR_MAX:
            held = table[probe]
            found = held == want
            slots[pending[found]] = probe[found]
            free = held == empty
            done = found | free
            if insert and free.any():
                # claim the free slots; where several keys claim one slot the last write
                # wins and the others probe on past it (it is no longer free)
                at, key = probe[free], want[free]
                table[at] = key
                won = table[at] == key
                slots[pending[free][won]] = at[won]
                self.used += int(np.count_nonzero(won))
                done[np.flatnonzero(free)[~won]] = False
            rest = ~done
            pending, want = pending[rest], want[rest]
            probe = probe[rest] + 1
            probe[probe == size] = 0
        # the stragglers: a Python probe each
        for i, key, slot in zip(pending.tolist(), want.tolist(), probe.tolist()):
            while True:
                held = table.item(slot)
                if held == key:
                    break
                if held == empty:
                    if insert:
                        table[slot] = key
                        self.used += 1
                    else:
                        slot = -1
                    break
                slot = slot + 1 if slot + 1 < size else 0
            slots[i] = slot
        return slots

    def get_many(self, keys: np.ndarray) -> np.ndarray:
        """The count of each key (int64 array; keys distinct)."""
        slots = self._slots(self._stored(keys), insert=False)
        return np.where(slots >= 0, self.counts[slots], 0).astype(np.int64, copy=False)

    def get(self, key: int) -> int:
        """One key's count (a Python loop: cheaper than array calls for one key)."""
        table, size = self.keys, self.size
        key = (narrow_key(key) if self.narrow else key) + 1  # `_stored`
        slot = ((((key * 0x9E3779B97F4A7C15) & M64) >> 32) * size) >> 32  # `_home`
        while True:
            held = table.item(slot)
            if held == key:
                return self.counts.item(slot)
            if held == EMPTY:
                return 0
            slot = slot + 1 if slot + 1 < size else 0

    def add(self, keys: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """`counts[key] += delta` for distinct `keys`; returns the new counts."""
        keys = self._stored(keys)
        if self.used + keys.size >= self.size:
            # maybe not a free slot for every key: make room for those not in the table
            missing = int(np.count_nonzero(self._slots(keys, insert=False) < 0))
            if self.used + missing > MAX_LOAD * self.size:
                self._rebuild(missing)
        slots = self._slots(keys, insert=True)
        counts = self.counts[slots].astype(np.int64)
        counts += deltas
        if self.count_dtype == np.int32 and counts.size and int(counts.max()) > NARROW_COUNT_MAX:
            self._widen_counts()
        self.counts[slots] = counts
        if self.used > MAX_LOAD * self.size:  # most keys of a pass exist: check after
            self._rebuild(0)
        return counts

    def _widen_counts(self) -> None:
        """A count passed int32's range: every count int64 from now on."""
        self.count_dtype = np.int64
        wide = ondisk.empty(self.counts.size, np.int64)
        wide[...] = self.counts
        self.counts = wide

    def set(self, key: int, count: int) -> None:
        self.add(np.array([key], dtype=np.int64), np.array([count - self.get(key)]))

    def _rebuild(self, extra: int) -> None:
        """Re-insert the pairs with a count other than 0 into a table where they, with `extra`
        more, fill at most `REBUILD_LOAD`. They are first moved to the front of the old
        arrays, `INSERT_CHUNK` slots at a time (a write never passes the slots read), which
        are then shrunk to them (`ondisk.shrunk`): an index of the live slots and copies of
        their keys and counts beside the old table were 16 bytes per pair at once (the 5 GB
        mix's whitespace CJK at 50k: the loop's peak)."""
        keys, counts = self.keys, self.counts
        self.keys = self.counts = np.zeros(0, dtype=np.int64)
        n = 0
        for at in range(0, counts.size, INSERT_CHUNK):
            part = counts[at:at + INSERT_CHUNK]
            live = np.flatnonzero(part)
            moved_keys, moved_counts = keys[at:at + INSERT_CHUNK][live], part[live]
            keys[n:n + live.size], counts[n:n + live.size] = moved_keys, moved_counts
            n += live.size
            del part, live, moved_keys, moved_counts
        keys, counts = ondisk.shrunk(keys, n), ondisk.shrunk(counts, n)
        self._allocate(_slots_for(n + extra, REBUILD_LOAD))
        # the moved pairs are in the old slots' order, which is about the keys' hash order
        # (each key sits at or just past its first slot, a fixed share of its hash), so the
        # new table's pages are first written about in order too, as the moved pairs' pages
        # go (the whole new table beside all of them was the loop's peak on whitespace CJK
        # at 50k)
        self._insert(keys, counts, shrink=True)

    def _insert(self, keys: np.ndarray, counts: np.ndarray, shrink: bool = False) -> None:
        """Store distinct `keys` (stored form) absent from the table with their `counts`,
        `INSERT_CHUNK` keys at a time, from the last (the keys are distinct: the order of
        insertion changes where a key sits, not what it holds). `shrink`: the two arrays are
        the caller's to give up, and in memory they are shrunk behind the keys inserted
        (`ondisk.shrunk`)."""
        shrink = shrink and not ondisk.is_mapped(keys)
        n = keys.size
        while n:
            at = max(n - INSERT_CHUNK, 0)
            self.counts[self._slots(keys[at:n], insert=True)] = counts[at:n]
            n = at
            if shrink:
                keys, counts = ondisk.shrunk(keys, n), ondisk.shrunk(counts, n)

    @classmethod
    def from_arrays(cls, keys: np.ndarray, counts: np.ndarray, narrow: bool = False
                    ) -> PairCounts:
        """A table holding `counts[i]` for distinct `keys[i]` (`narrow`: see the class)."""
        table = cls(keys.size, narrow)
        counts = np.asarray(counts, dtype=np.int64)
        if narrow and counts.size and int(counts.max()) > NARROW_COUNT_MAX:
            table._widen_counts()
        table._insert(table._stored(keys), counts)
        return table
