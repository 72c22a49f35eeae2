"""The pair index: the merge table's pairs -> ranks as a hash table probed with NumPy, which the
BPE merge loop asks for the rank of every pair it looks at (`model.BPEModel.pair_ranks`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NO_PAIR = np.int64(np.iinfo(np.int64).max)  # rank of a pair no merge joins
PAIR_INDEX_SLOTS_PER_KEY = 8  # the pair index's load: 1/8, lookups mostly one probe
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing of the pair keys


@dataclass
class PairIndex:
    """Pair key (`left << 32 | right`) -> merge rank, as an open-addressing hash table probed
    with NumPy: `PAIR_INDEX_SLOTS_PER_KEY` slots per key keep nearly every lookup at one probe
    (about twice as fast as a binary search of the sorted keys, which the merge loop did for
    every pair it looked at). Linear probing: a key sits at the first free slot from its home
    slot on, so a lookup stops at its key, at a free slot (absent), or after `max_probe`."""

    keys: np.ndarray  # int64 per slot, -1 when free (a key is never negative)
    ranks: np.ndarray  # int64 per slot
    bits: int  # log2 of the slot count
    max_probe: int  # the farthest any key sits from its home slot

    @classmethod
    def build(cls, keys: np.ndarray, ranks: np.ndarray) -> PairIndex:
        size = 1 << max(10, int(keys.size * PAIR_INDEX_SLOTS_PER_KEY - 1).bit_length())
        bits = size.bit_length() - 1
        slot_keys = np.full(size, -1, dtype=np.int64)
        slot_ranks = np.zeros(size, dtype=np.int64)
        home = cls.home(keys, bits)
        slot = home.copy()
        todo = np.arange(keys.size)
        while todo.size:
            # each key not placed yet tries its current slot; of the keys aiming at one free
            # slot the first takes it, the others (and keys finding it taken) try the next
            aim = slot[todo]
            free = slot_keys[aim] == -1
            taken, first = np.unique(aim[free], return_index=True)
            winner = todo[free][first]
            slot_keys[taken] = keys[winner]
            slot_ranks[taken] = ranks[winner]
            placed = np.zeros(keys.size, dtype=bool)
            placed[winner] = True
            todo = todo[~placed[todo]]
            slot[todo] = (slot[todo] + 1) & (size - 1)
        max_probe = int(((slot - home) & (size - 1)).max(initial=0))
        return cls(slot_keys, slot_ranks, bits, max_probe)

    @staticmethod
    def home(keys: np.ndarray, bits: int) -> np.ndarray:
        """Each key's home slot: Fibonacci hashing (the top bits of key * 2**64/phi)."""
        mixed = keys.astype(np.uint64) * _HASH_MUL  # wraps modulo 2**64, as hashing wants
        return (mixed >> np.uint64(64 - bits)).astype(np.int64)

    def lookup(self, pairs: np.ndarray) -> np.ndarray:
        """The rank of each pair key (NO_PAIR when no merge has it, and for a negative key:
        a pair with a SEP or a removed symbol on either side)."""
        mask = self.keys.size - 1
        home = self.home(pairs, self.bits)
        found = self.keys[home]
        valid = pairs >= 0  # -1 would match a free slot
        out = np.where((found == pairs) & valid, self.ranks[home], NO_PAIR)
        # the pairs whose home slot holds another key go on probing, fewer at every step
        todo = np.flatnonzero((found != pairs) & (found != -1) & valid)
        for step in range(1, self.max_probe + 1):
            if not todo.size:
                break
            at = (home[todo] + step) & mask
            found = self.keys[at]
            hit = found == pairs[todo]
            out[todo[hit]] = self.ranks[at[hit]]
            todo = todo[~hit & (found != -1)]
        return out

