"""The BPE merge loop over the flat symbol layout (docs/architecture.md: "The flat layout",
"The BPE loop", "Exact batching").

The queue holds *entries*: an entry is the slice of positions where a pair was created by one
pass (or by the initial count), with the pair's count when it was queued. Each step pops the
best entry, merges its pair in one columnar pass (`passes.merge_pass`), folds the pair-count
changes into the counts, and queues one entry per new pair.

With the default tie-break `id` the loop is HuggingFace's `BpeTrainer`, quirks included: the
queue is lazy (an entry popped with an outdated count is pushed back with the current one), a
merged string that already exists as a token keeps its id, and each entry merges only in the
words it was created for (so HF can merge one pair twice). The other tie-breaks (`lexical-max`
for subword-nmt, `first-seen` for the seed documents) keep one entry per pair and merge every
occurrence, as those programs do.

Exact batching merges several queue entries in one pass when the result is provably the same
as merging them one by one; with HF's tie-break the pass then costs a handful of NumPy calls
for many merges."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import ondisk
from ..layout import Layout, is_symbol
from ..malloc import release_free_heap
from ..progress import Progress
from .pairtable import NARROW_ID_MAX, PairCounts, narrow_keys, wide_key, wide_keys
from .passes import (
    M32,
    PARALLEL_MIN,
    KeySums,
    PairFilter,
    group_pairs,
    side_thread,
    sum_by_key_arrays,
    summed_merge_pass,
)
from .symbols import Initial, Vocab

M24 = (1 << 24) - 1
#: `QueueEntries.sweep` reads this many positions at a time.
SWEEP_CHUNK = 1 << 22
#: The initial base is swept when the positions merged since its last sweep reach this share
#: of its size (each merged occurrence makes up to two of its positions stale).
SWEEP_SHARE = 0.25
#: ... when it holds at least this many positions (a small table's sweeps cost more than
#: they free).
SWEEP_MIN = 1 << 16
#: A sweep reads the layout whole (a bit per position, `_stand_map`) when the base holds at least
#: 1/SWEEP_MAP_SHARE of the layout's size. The map costs a sequential pass over the layout
#: (~0.27 s on 100M positions), then ~25 ns a position; reading two symbols at random, ~90 ns:
#: even from ~1/32 of the layout (100 MB of byte-level Chinese at 30k: the sweeps 12.8 ->
#: 10.7 s with 32, against 8).
SWEEP_MAP_SHARE = 32
#: Every this many passes the loop gives the heap's free pages back (`release_free_heap`),
#: as it does after each compaction and sweep: the bases' arrays (mostly below the loop's
#: mmap threshold, `malloc.merging_heap`) and the passes' temporaries leave freed blocks
#: between live ones that glibc keeps resident. 100 MB of generated Chinese, byte-level, 30k:
#: 170-195 MB of the loop's RSS was such free heap; a trim costs ~5 ms there.
HEAP_TRIM_PASSES = 64
#: `_bounds` sums the neighbours of this many positions at a time.
BOUNDS_CHUNK = 1 << 19
M64 = (1 << 64) - 1
#: Heap items of the `id` tie-break are one int: `(CMAX - count) << 128 | pair << 64 | entry`,
#: so that the smallest item is the highest count, then the smallest pair key, then the oldest
#: entry (HF's order).
CMAX = 1 << 62


@dataclass
class MergeRecord:
    """The merges in order: pair ids, new id, pair count and number of words touched.

    Typed arrays (8 bytes a value), not lists: a list holds a Python int object per value
    (~36 bytes with its slot), made one merge at a time amid the loop's short-lived objects,
    so the allocator's arenas they sit in stay resident after the loop (30k merges: ~5 MiB
    of lists, and more of the peak; docs/architecture.md, "Memory")."""

    left: array[int] = field(default_factory=lambda: array("q"))
    right: array[int] = field(default_factory=lambda: array("q"))
    new: array[int] = field(default_factory=lambda: array("q"))
    count: array[int] = field(default_factory=lambda: array("q"))
    words: array[int] = field(default_factory=lambda: array("q"))


@dataclass
class BpeSettings:
    vocab_size: int
    min_frequency: int = 0
    tie_break: str = "id"
    prefix: str | None = None
    max_token_length: int | None = None
    max_merges: int | None = None
    show_progress: bool | None = None


class QueueEntries:
    """The position slices of all queue entries. Each pass stores one sorted position array
    (a *base*) with, per pair it created, the pair key and the bounds of its slice (NumPy
    arrays: 17 bytes per entry, where lists of Python ints took ~110); an entry id is
    `base << 24 | index`.

    An entry that can no longer merge (merged, or replaced by a newer entry of its pair) is
    `kill`ed; once the positions of dead entries pass `compact_share` of the live ones, every
    base with dead entries is rewritten without their slices (`compact`): entry ids stay, the
    slices of dead entries become empty."""

    compact_share = 0.25  # tests set it to 0 to compact at every kill
    #: The pair keys held in the narrow form (`pairtable.narrow_keys`: 4 bytes an entry, not
    #: 8; the trainer sets it when every id fits, `narrow_pairs`); `keys_of` reads them wide.
    #: 100 MB of byte-level Chinese at 30k: ~15M entries, 60 MB.
    narrow = False

    def __init__(self) -> None:
        self.positions_of_base: list[np.ndarray] = []
        self.keys: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.dead: list[np.ndarray] = []  # per base, per entry: killed
        self.dead_in_base: list[int] = []  # per base: positions held by dead entries
        self.live_positions = 0
        self.dead_positions = 0

    def add_base(self, positions: np.ndarray, keys: np.ndarray, bounds: np.ndarray) -> int:
        """Store a pass's positions, its pair keys (int64) and slice bounds (`keys.size + 1`
        ascending offsets into `positions`); returns the id of its first entry. (A large
        base's positions go to a file when the loop runs on disk, `ondisk`.)"""
        self.positions_of_base.append(ondisk.kept(positions))
        self.keys.append(narrow_keys(keys) if self.narrow else keys)
        self.starts.append(bounds[:-1])
        self.ends.append(bounds[1:])
        self.dead.append(np.zeros(keys.size, dtype=bool))
        self.dead_in_base.append(0)
        self.live_positions += positions.size
        return (len(self.positions_of_base) - 1) << 24

    def positions(self, entry: int) -> np.ndarray:
        base, i = entry >> 24, entry & M24
        return self.positions_of_base[base][self.starts[base][i]:self.ends[base][i]]

    def pair(self, entry: int) -> int:
        key = int(self.keys[entry >> 24][entry & M24])
        return wide_key(key) if self.narrow else key

    def keys_of(self, base: int, index: np.ndarray | None = None) -> np.ndarray:
        """The pair keys (int64) of `base`'s entries, or of those `index` picks."""
        keys = self.keys[base] if index is None else self.keys[base][index]
        return wide_keys(keys) if self.narrow else keys

    def kill(self, entry: int) -> None:
        """`entry` will never be read again: its positions may be freed."""
        base, i = entry >> 24, entry & M24
        dead = self.dead[base]
        if dead.item(i):
            return
        dead[i] = True
        size = self.ends[base].item(i) - self.starts[base].item(i)
        self.dead_in_base[base] += size
        self.live_positions -= size
        self.dead_positions += size
        if self.dead_positions > self.compact_share * self.live_positions:
            self.compact()

    def compact(self) -> None:
        """Rewrite every base holding dead entries' positions without them.

        A base's slices tile its positions in entry order (`add_base` takes ascending
        bounds, and a compacted base keeps them so), so the positions kept are a boolean
        mask, each entry's flag repeated over its slice: 1 byte per position of the base
        for a moment. (An int64 index of the kept positions, built before, took 16 bytes per
        position at once: compacting the initial base of 20M pair occurrences of Chinese
        put ~320 MB on the loop's peak.)"""
        for base, dead_size in enumerate(self.dead_in_base):
            if not dead_size:
                continue
            starts, ends = self.starts[base], self.ends[base]
            dead = self.dead[base]
            keep = np.repeat(~dead, ends - starts)
            self.positions_of_base[base] = ondisk.kept(self.positions_of_base[base][keep])
            del keep
            # the new slice lengths: 0 for dead entries; new bounds are their running sums,
            # one int32 array whose views are the starts and ends (as `add_base` keeps them:
            # two arrays took 4 bytes more per entry)
            lengths = ends - starts
            lengths[dead] = 0
            bounds = np.zeros(lengths.size + 1, dtype=np.int32)
            np.cumsum(lengths, out=bounds[1:])
            del lengths
            self.starts[base], self.ends[base] = bounds[:-1], bounds[1:]
            self.dead_in_base[base] = 0
        self.dead_positions = 0
        release_free_heap()  # the old bases' blocks

    def sweep(self, base: int, standing: Callable[[np.ndarray], np.ndarray],
              sweepable: np.ndarray) -> None:
        """Rewrite `base` without the positions of its dead entries and, in the entries
        `sweepable` marks, the positions `standing` finds stale (False: the entry's pair no
        longer stands there, as one of its symbols was merged; a position never holds its
        pair again, as a token only grows into a longer one; `standing` may keep a stale one,
        never drop one that stands). A stale position is read by nothing but the filters
        that drop it, except under HF's semantics, where an entry's positions also name the
        words it merges in when its pair has several entries (`_positions`): the caller marks
        only entries whose pair can never have another (`BpeTrainer._sweep`).

        About `SWEEP_CHUNK` positions at a time, written back in place; then the array is
        shrunk to the kept size (or, a view or a file's, copied into a new one)."""
        positions = self.positions_of_base[base]
        starts, ends = self.starts[base], self.ends[base]
        dead = self.dead[base]
        lengths = ends - starts
        kept_lengths = np.zeros(lengths.size, dtype=np.int64)
        write = 0
        i = 0
        while i < lengths.size:
            # whole entries, about SWEEP_CHUNK positions
            lo = int(starts[i])
            j = max(int(np.searchsorted(ends, lo + SWEEP_CHUNK, side="right")), i + 1)
            hi = int(ends[j - 1])
            pos = positions[lo:hi]
            keep = standing(pos)
            keep |= np.repeat(~sweepable[i:j], lengths[i:j])
            keep &= np.repeat(~dead[i:j], lengths[i:j])
            kept = pos[keep]
            positions[write:write + kept.size] = kept
            write += kept.size
            # each entry's kept positions: differences of the running count at its bounds
            running = np.zeros(keep.size + 1, dtype=np.int64)
            np.cumsum(keep, out=running[1:])
            kept_lengths[i:j] = running[ends[i:j] - lo] - running[starts[i:j] - lo]
            del pos, keep, kept, running  # (no view of `positions` outlives its shrink)
            i = j
            ondisk.drop_pages()  # (on disk: the chunk's pages, read in one call each)
        self.live_positions -= int(lengths[~dead].sum()) - write
        self.dead_positions -= self.dead_in_base[base]
        self.dead_in_base[base] = 0
        # shrunk where it is when in memory (a copy was the loop's peak at a sweep)
        self.positions_of_base[base] = ondisk.shrunk(positions, write)
        del positions
        bounds = np.zeros(lengths.size + 1, dtype=np.int32)
        np.cumsum(kept_lengths, out=bounds[1:])
        self.starts[base], self.ends[base] = bounds[:-1], bounds[1:]

    @property
    def nbytes(self) -> int:
        """The bytes held (the starts and ends of a base are views of one bounds array)."""
        return sum(a.nbytes for group in (self.positions_of_base, self.keys, self.starts,
                                          self.dead) for a in group) + 4 * len(self.starts)


def _first_live(layout: Layout, pos: np.ndarray, a: int, b: int) -> int:
    """The first position of `pos` where the pair (a, b) still occurs, or -1."""
    pos = pos[layout.sym[pos] == a]  # (the next position of a stale one is not read)
    hit = np.flatnonzero(layout.sym[layout.next_of(pos)] == b)
    return int(pos[hit[0]]) if hit.size else -1


def _invert_string(s: str) -> bytes:
    """A byte key whose ascending order is descending string order (for `lexical-max`)."""
    return b"".join((0x10FFFF - ord(c)).to_bytes(3, "big") for c in s) + b"\xff\xff\xff"


Candidate = tuple[int, int, int]  # (count, pair key, entry)


def _stand_map(sym: np.ndarray, n_initial: int) -> np.ndarray:
    """For each position p of the layout (`sym` read as unsigned: a SEP or a removed symbol
    is huge), whether p and p + 1 both hold initial tokens (`BpeTrainer._sweep`), a bit per
    position (`np.packbits`' order; `_stands_at` reads it): a byte per position was the
    loop's peak at a sweep (100 MB of byte-level Chinese: 100 MB more for a moment). Made
    `SWEEP_CHUNK` positions at a time into an `ondisk` array (a file when the loop runs on
    disk, its pages dropped after each chunk): no temporary spans the layout."""
    n = max(sym.size - 1, 0)
    stands = ondisk.empty((n + 7) // 8, np.uint8)
    for lo in range(0, n, SWEEP_CHUNK):  # (SWEEP_CHUNK is a multiple of 8)
        hi = min(lo + SWEEP_CHUNK, n)
        initial = sym[lo:hi + 1] < n_initial
        stands[lo // 8:(hi + 7) // 8] = np.packbits(initial[:-1] & initial[1:])
        ondisk.drop_pages()
    return stands


def _stands_at(stands: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The bits of `_stand_map` at positions `pos`, as booleans."""
    bits = stands[pos >> 3] >> (7 - (pos & 7)).astype(np.uint8)
    return (bits & 1).view(bool)


class BpeTrainer:
    """Runs the merge loop on an `Initial` (vocab + layout); see the module docstring."""

    cold_divisor = 256  # initial cold threshold = best initial pair count // cold_divisor
    batching = True  # exact batching on (tests turn it off to compare with one merge per pass)

    def __init__(self, initial: Initial, settings: BpeSettings):
        self.vocab: Vocab = initial.vocab
        self.layout: Layout = initial.layout
        self.settings = settings
        # tie-break `id`: HF's semantics (lazy queue, one entry per creating pass)
        self.hf_semantics = settings.tie_break == "id"
        self.entries = QueueEntries()
        # pair key -> count (a NumPy hash table: ~16 bytes per slot, not a dict's ~100)
        self.pair_counts = PairCounts()
        # the live queue entries of each pair: one id, or a list when a re-created token
        # gave a pair several (HF semantics only)
        self.entries_of_pair: dict[int, int | list[int]] = {}
        self.heap: list = []
        self.merges = MergeRecord()
        # Cold store (tie-break id): pairs created with a count below `threshold` wait in
        # arrays instead of the queue; counts only fall after creation, so none can be the best
        # pair while the best valid count is >= threshold (see `_revive`). One part per base
        # that sent pairs there: the base, the entries' indexes in it (uint32) and their
        # counts when they went cold (uint16 or uint32 while the threshold fits,
        # `_cold_counts`): 6-8 bytes per cold pair (its key is the base's, `QueueEntries.keys`).
        self.threshold = 0
        self.cold: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.reused_token_in_pass = False
        room = min(settings.vocab_size - len(self.vocab), initial.layout.sym.size)
        if settings.max_merges is not None:
            room = min(room, settings.max_merges)
        # length of each token in characters, prefix/suffix not counted (--max-token-length)
        self.token_length = np.zeros(len(self.vocab) + max(room, 0) + 1, dtype=np.int64)
        # every id below len(vocab) + room: the pair table's narrow form when they fit
        self.narrow_pairs = len(self.vocab) + max(room, 0) - 1 <= NARROW_ID_MAX
        self.entries.narrow = self.narrow_pairs
        # the tokens no merge can make again (a merge's string has two characters at least):
        # the initial pairs of two of them never have a second entry (`_sweep`)
        self.single_char = np.array([len(t) == 1 for t in self.vocab.tokens], dtype=bool)
        self.merged_since_sweep = 0
        self.token_length[: len(self.vocab)] = self.vocab.base_len

    # -- queue ---------------------------------------------------------------------------
    def _push(self, count: int, pair: int, entry: int, first: int | None = None) -> None:
        tie_break = self.settings.tie_break
        if tie_break == "id":
            heapq.heappush(self.heap, ((CMAX - count) << 128) | (pair << 64) | entry)
        elif tie_break == "lexical-max":
            key = _invert_string(self.vocab.tokens[pair >> 32]) + _invert_string(
                self.vocab.tokens[pair & M32])
            heapq.heappush(self.heap, (-count, key, entry))
        else:  # first-seen: among equal counts, the pair whose first occurrence comes first
            if first is None:
                first = int(self.entries.positions(entry)[0])
            heapq.heappush(self.heap, (-count, first, entry))

    def _pop(self) -> tuple[int, int, int, object]:
        item = heapq.heappop(self.heap)
        if self.settings.tie_break == "id":
            return CMAX - (item >> 128), (item >> 64) & M64, item & M64, None
        entry = item[2]
        return -item[0], self.entries.pair(entry), entry, item[1]

    # -- length rule -----------------------------------------------------------------------
    def _length_filter(self) -> PairFilter:
        """Pairs whose token would exceed --max-token-length are never counted."""
        limit = self.settings.max_token_length
        if limit is None:
            return None
        length = self.token_length
        return lambda left, right: (length[left] + length[right]) <= limit

    # -- initial pairs ---------------------------------------------------------------------
    def count_initial_pairs(self) -> None:
        """Count every adjacent pair and queue one entry per pair (tie-break `id`: the pairs
        below the cold threshold wait in the cold store, as arrays — most pairs of a large
        table, which as heap items and dict entries cost ~150 bytes each)."""
        groups = group_pairs(self.layout, len(self.vocab), self._length_filter())
        key_arr = np.asarray(groups.keys, dtype=np.int64)
        count_arr = np.asarray(groups.counts, dtype=np.int64)
        # pairs are contiguous slices: the bounds are the starts and the last end
        bounds = np.append(groups.starts, groups.positions.size).astype(np.int32)
        first_entry = self.entries.add_base(groups.positions, key_arr, bounds)
        del groups
        self.pair_counts = PairCounts.from_arrays(key_arr, count_arr, self.narrow_pairs)
        entry_arr = first_entry + np.arange(key_arr.size, dtype=np.int64)
        if self.settings.tie_break == "id":
            # at least 2: pairs seen once wait cold whatever the best count (a table of rare
            # pairs, e.g. random words, would otherwise queue every pair a pass creates)
            self.threshold = max(int(count_arr.max()) // self.cold_divisor, 2
                                 ) if count_arr.size else 0
            if self.threshold > 1:
                cold = count_arr < self.threshold
                if cold.any():
                    self.cold.append((first_entry >> 24, np.flatnonzero(cold).astype(np.uint32),
                                      self._cold_counts(count_arr[cold])))
                    hot = ~cold
                    key_arr, entry_arr, count_arr = key_arr[hot], entry_arr[hot], count_arr[hot]
        keys, counts, entries = key_arr.tolist(), count_arr.tolist(), entry_arr.tolist()
        self.entries_of_pair = dict(zip(keys, entries))
        if self.settings.tie_break == "id":
            self.heap = [((CMAX - c) << 128) | (k << 64) | e
                         for k, c, e in zip(keys, counts, entries)]
            heapq.heapify(self.heap)
        else:
            for k, c, e in zip(keys, counts, entries):
                self._push(c, k, e)

    # -- live entries ----------------------------------------------------------------------
    def _entries_list(self, pair: int) -> list[int]:
        e = self.entries_of_pair.get(pair)
        return [] if e is None else [e] if isinstance(e, int) else e

    def _add_entry(self, pair: int, entry: int) -> None:
        e = self.entries_of_pair.get(pair)
        if e is None:
            self.entries_of_pair[pair] = entry
        elif isinstance(e, int):
            self.entries_of_pair[pair] = [e, entry]
        else:
            e.append(entry)

    def _drop_entry(self, pair: int, entry: int) -> None:
        e = self.entries_of_pair[pair]
        if isinstance(e, int):
            del self.entries_of_pair[pair]
        else:
            e.remove(entry)
            if len(e) == 1:
                self.entries_of_pair[pair] = e[0]

    # -- one pass --------------------------------------------------------------------------
    def _positions(self, entry: int, pair: int) -> np.ndarray:
        """The positions a merge of this entry visits."""
        several = self.entries_of_pair.get(pair)
        if not isinstance(several, list):
            return self.entries.positions(entry)
        pos = np.unique(np.concatenate([self.entries.positions(e) for e in several]))
        if self.hf_semantics:  # HF merges only in the words this entry was created for
            mine = self.entries.positions(entry)
            pos = pos[np.isin(self.layout.words(pos), self.layout.words(mine))]
        return pos

    def _gather(self, batch: list[Candidate]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The live occurrences of every batch member, concatenated in member order, with the
        member index of each and the per-member sizes."""
        layout = self.layout
        if len(batch) == 1:
            _, pair, entry = batch[0]
            pos = layout.live_occurrences(self._positions(entry, pair), pair >> 32, pair & M32)
            return pos, np.zeros(pos.size, dtype=np.int64), [pos.size]
        pairs = np.array([p for _, p, _ in batch], dtype=np.int64)
        if (pairs >> 32 == pairs & M32).any():
            # a run `a a a` merges left to right: each member on its own
            found = [layout.live_occurrences(self._positions(e, p), p >> 32, p & M32)
                     for _, p, e in batch]
            sizes = [x.size for x in found]
            member = np.repeat(np.arange(len(batch), dtype=np.int64), sizes)
            return np.concatenate(found), member, sizes
        raw = [self._positions(e, p) for _, p, e in batch]
        member = np.repeat(np.arange(len(batch), dtype=np.int64), [x.size for x in raw])
        pos = np.concatenate(raw)
        # keep the positions where the member's pair still stands (the left symbol first:
        # the next position of a stale one is not read)
        live = layout.sym[pos] == (pairs >> 32)[member]
        pos, member = pos[live], member[live]
        live = layout.sym[layout.next_of(pos)] == (pairs & M32)[member]
        pos, member = pos[live], member[live]
        return pos, member, np.bincount(member, minlength=len(batch)).tolist()

    def _apply(self, pos: np.ndarray, left: np.ndarray, right: np.ndarray, new: np.ndarray,
               member: np.ndarray, n_members: int, word: np.ndarray) -> list[int]:
        """Merge every occurrence in `pos` into its member's new token at once (the members
        of a pass never overlap; `left`, `right`, `new`: one id per member; `word`: the word
        of each position), fold the pair-count changes into the counts and queue the new
        pairs. Returns the number of distinct words each member touched."""
        # words touched: a new word (or member) starts wherever either changes
        starts = np.ones(pos.size, dtype=bool)
        starts[1:] = (word[1:] != word[:-1]) | (member[1:] != member[:-1])
        words = np.bincount(member[starts], minlength=n_members).tolist()
        del starts
        if n_members == 1:  # one id each: no per-position copies of them
            keys, sums, new_pairs = summed_merge_pass(
                self.layout, pos, int(left[0]), int(right[0]), int(new[0]),
                allowed=self._length_filter(), word=word)
        else:
            keys, sums, new_pairs = summed_merge_pass(self.layout, pos, left, right, new,
                                                      member, self._length_filter(), word)
        # one vectorised update of the table for all changes (summed per pair)
        counts = self.pair_counts.add(keys, sums)
        if new_pairs is not None:
            self._queue_new_pairs(new_pairs, keys, counts)
        return words

    def _bounds(self, pos: np.ndarray, member: np.ndarray, n: int,
                word: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each member, upper bounds on the pairs its new token N can make: the largest
        weighted count of a pair (N, y), the largest of a pair (x, N), and the smallest left
        symbol x reaching that largest count (docs/architecture.md, "Exact batching").
        Symbols are read before the pass; a neighbour merged in the same pass becomes a new
        token, whose id is larger and whose count is part of its old symbol's count, so the
        bounds stay upper bounds and the smallest x a lower bound. (`word`: each position's
        word, whose count weighs it.)"""
        layout = self.layout

        def side(neighbour_of: Callable[[np.ndarray], np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray]:
            # the weighted count of each (member, neighbour symbol), keys sorting by member
            # then symbol; summed `BOUNDS_CHUNK` positions at a time, then the chunks' sums
            # (a batch of millions of positions: ~80 bytes a position at once, the loop's
            # peak on 100 MB of Chinese)
            summed = KeySums()
            for at in range(0, pos.size, BOUNDS_CHUNK):
                part = slice(at, at + BOUNDS_CHUNK)
                neighbour = layout.sym[neighbour_of(pos[part])]
                ok = is_symbol(neighbour)
                keys = (member[part][ok] << 32) | neighbour[ok]
                del neighbour
                # (a hash group-by in a large pass: `np.unique`'s argsort of millions of keys
                # held a quarter of the loop on 100 MB of Chinese)
                summed.add(*sum_by_key_arrays(keys, layout.word_count[word[part][ok]]))
                ondisk.drop_pages()
            return summed.total()

        def top(unique: np.ndarray, sums: np.ndarray) -> np.ndarray:
            best = np.zeros(n, dtype=np.int64)
            np.maximum.at(best, unique >> 32, sums)
            return best

        def right(p: np.ndarray) -> np.ndarray:
            return layout.next_of(layout.next_of(p))

        # the right side on the helper thread in a large pass (the two sides are independent)
        if pos.size >= PARALLEL_MIN:
            right_side = side_thread().submit(side, right)
            unique, sums = side(layout.prev_of)
            right_top = top(*right_side.result())
        else:
            right_top = top(*side(right))
            unique, sums = side(layout.prev_of)
        left_top = top(unique, sums)
        # the smallest left symbol whose count reaches the member's largest
        at_top = sums == left_top[unique >> 32]
        left_min = np.full(n, M32, dtype=np.int64)
        np.minimum.at(left_min, unique[at_top] >> 32, unique[at_top] & M32)
        return right_top, left_top, left_min

    @staticmethod
    def _cut(batch: list[Candidate], right_top: np.ndarray, left_top: np.ndarray,
             left_min: np.ndarray) -> int:
        """How many members of `batch` (in queue order) merge as sequential merging would:
        member k stays while no pair made by an earlier member j can come before it in the
        queue. At equal count the order is the pair key (left id, then right id), and a new
        token N is larger than every existing id: (N, y) never comes before an existing pair
        (a_k, b_k), and (x, N) does only when x < a_k. So member k (count c, left a) needs, for
        every earlier j, right_top[j] <= c, and left_top[j] < c or (left_top[j] == c and every
        x reaching c, i.e. left_min[j], is >= a)."""
        keep = 1
        r_top = int(right_top[0])
        l_top, l_min = int(left_top[0]), int(left_min[0])
        while keep < len(batch):
            count, pair, _ = batch[keep]
            if r_top > count or l_top > count or (l_top == count and l_min < pair >> 32):
                break
            r_top = max(r_top, int(right_top[keep]))
            top_k, min_k = int(left_top[keep]), int(left_min[keep])
            if top_k > l_top:
                l_top, l_min = top_k, min_k
            elif top_k == l_top:
                l_min = min(l_min, min_k)
            keep += 1
        return keep

    def _queue_new_pairs(self, new_pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
                         changed: np.ndarray, changed_counts: np.ndarray) -> None:
        """Queue one entry per new pair of a pass (`new_pairs`: the pass's new pairs as
        `sort_new_pairs` gives them); `changed` (ascending) are the pairs whose counts the
        pass changed (every new pair among them) and `changed_counts` their counts."""
        positions, key_arr, bounds = new_pairs
        count_arr = changed_counts[np.searchsorted(changed, key_arr)]
        first_entry = self.entries.add_base(positions, key_arr, bounds)
        if self.hf_semantics:
            queued = count_arr > 0
            if self.threshold > 1:  # pairs below the threshold go to the cold store
                cold = queued & (count_arr < self.threshold)
                if cold.any():
                    idx = np.flatnonzero(cold)
                    self.cold.append((first_entry >> 24, idx.astype(np.uint32),
                                      self._cold_counts(count_arr[idx])))
                    queued &= ~cold
            if self.reused_token_in_pass and self.cold:  # a re-created token: its pairs may
                self._revive(0, only=key_arr)  # be cold
            index = np.flatnonzero(queued)
            # a pass that made only new tokens: no pair holding one has an entry yet
            self._queue_entries(key_arr[index], first_entry + index, count_arr[index],
                                fresh=not self.reused_token_in_pass)
            return
        new_keys, counts = key_arr.tolist(), count_arr.tolist()
        for i, (key, c) in enumerate(zip(new_keys, counts)):
            if c <= 0:
                continue
            entry = first_entry + i
            old = self._entries_list(key)
            if old:  # one live entry per pair: fold older positions into the new entry
                merged = np.unique(np.concatenate(
                    [self.entries.positions(x) for x in old] + [self.entries.positions(entry)]))
                for replaced in [*old, entry]:
                    self.entries.kill(replaced)
                entry = self.entries.add_base(merged, np.array([key], dtype=np.int64),
                                               np.array([0, merged.size], dtype=np.int32))
            self.entries_of_pair[key] = entry
            self._push(c, key, entry)

    # -- the loop --------------------------------------------------------------------------
    def _new_token(self, a: int, b: int) -> str:
        return self.vocab.joined(a, b, self.settings.prefix)

    def _next_valid(self) -> Candidate | None:
        """Pop until an entry whose count is current (HF's lazy re-queueing); None at the
        end."""
        tie_break, counts = self.settings.tie_break, self.pair_counts
        entries_of_pair, hf = self.entries_of_pair, self.hf_semantics
        while self.heap or self.cold:
            if not self.heap:
                self._revive(0)
                continue
            count, pair, entry, tie = self._pop()
            current = counts.get(pair)
            if not hf and entries_of_pair.get(pair) != entry:
                continue  # an entry replaced by a newer one for the same pair
            if count != current:
                if hf or current > 0:
                    self._push(current, pair, entry, tie if tie_break == "first-seen" else None)
                continue
            if tie_break == "first-seen":
                first = _first_live(self.layout, self.entries.positions(entry), pair >> 32,
                                    pair & M32)
                if first != tie:  # its first occurrence moved: re-queue at the new one
                    if first >= 0:
                        self._push(current, pair, entry, first)
                    continue
            if self.cold and count < self.threshold:
                self._push(count, pair, entry)
                self._revive(count)
                continue
            return count, pair, entry
        return None

    def _cold_counts(self, counts: np.ndarray) -> np.ndarray:
        """Counts of pairs going cold (all below the threshold) in the narrowest of uint16
        and uint32 that holds the threshold, else as they are (int64): 100 MB of byte-level
        Chinese at 30k, ~13M cold pairs below a threshold of a few thousand, 26 MB less
        with uint16."""
        if self.threshold <= 1 << 16:
            return counts.astype(np.uint16)
        return counts.astype(np.uint32) if self.threshold <= 1 << 32 else counts

    def _revive(self, count: int, only: np.ndarray | None = None) -> None:
        """Move cold pairs into the queue: those created with a count >= count // 2 (all when
        `count` <= 1), or, with `only`, those among these keys. Lowers the threshold.

        Part by part (in the order they went cold, as one array of them all would be), the
        entries that move gathered from every part; then their current counts are read and
        they are queued at once (per part, the table's lookups and the pushes cost ~0.25 ms
        of fixed overhead each, and a late revive reads hundreds of parts: medium/en
        byte-level, 30k, ~0.5 s of the loop)."""
        if not self.cold:
            return
        if only is None:
            self.threshold = count // 2 if count > 1 else 0
        kept, moved_keys, moved_entries = [], [], []
        for base, index, counts in self.cold:
            keys = self.entries.keys_of(base, index)
            move = np.isin(keys, only) if only is not None else counts >= self.threshold
            if not move.all():
                rest = ~move
                kept.append((base, index[rest], counts[rest]))
            if not move.any():
                continue
            moved_keys.append(keys[move])
            moved_entries.append((base << 24) + index[move].astype(np.int64))
        self.cold = kept
        if moved_keys:
            self._queue_revived(np.concatenate(moved_keys), np.concatenate(moved_entries))

    def _queue_revived(self, keys: np.ndarray, entries: np.ndarray) -> None:
        """Queue revived entries (`keys`: their pairs) at their pairs' current counts."""
        # distinct keys for the table (a pair can wait in the cold store with several
        # entries)
        unique, inverse = np.unique(keys, return_inverse=True)
        self._queue_entries(keys, entries, self.pair_counts.get_many(unique)[inverse],
                            fresh=False)

    def _queue_entries(self, keys: np.ndarray, entries: np.ndarray, counts: np.ndarray,
                       fresh: bool) -> None:
        """Queue entries (tie-break `id`) of pairs `keys` at `counts` (arrays, in order), as
        live entries of their pairs (`fresh`: none of the pairs has one yet). Their heap items
        are made in one comprehension and pushed one by one into a large heap, or added and
        the heap remade (`heapify`, linear) when they are many beside it; items are distinct
        ints, so the queue's order is the same either way. (A loop of `_add_entry` and
        `heappush` per entry took ~1 us more per new pair: medium/en byte-level at 30k
        queues ~177k.)"""
        keys_l, entries_l = keys.tolist(), entries.tolist()
        entries_of_pair = self.entries_of_pair
        if fresh:
            entries_of_pair.update(zip(keys_l, entries_l))
        else:
            add_entry = self._add_entry
            for key, entry in zip(keys_l, entries_l):
                if key in entries_of_pair:
                    add_entry(key, entry)
                else:  # (`_add_entry`'s usual case, inlined)
                    entries_of_pair[key] = entry
        items = [((CMAX - c) << 128) | (key << 64) | entry
                 for key, entry, c in zip(keys_l, entries_l, counts.tolist())]
        heap = self.heap
        if len(items) * 8 >= len(heap):
            heap.extend(items)
            heapq.heapify(heap)
        else:
            push = heapq.heappush
            for item in items:
                push(heap, item)

    def _sweep(self) -> None:
        """Drop the initial base's stale positions (`QueueEntries.sweep`): most of the loop's
        memory on long words (20 MB of byte-level Chinese at 30k: ~80% of the positions the
        entries held by the end were stale). Under HF's semantics only the entries of a pair
        of two single-character tokens, which no merge can make again, so that the pair never
        has a second entry whose words the first one's positions must name; under the other
        tie-breaks (one entry per pair) all of them.

        An initial pair stands at `p` only if `p` and `p + 1` both still hold initial tokens
        (ids below the initial vocabulary's size): an initial token not merged spans one
        position, and a merged token's id is a new one, or, for a string made again, one
        that is not the pair's own. So the test reads two symbols, not the pair's key."""
        keys = self.entries.keys_of(0)
        if self.hf_semantics:
            one = self.single_char
            sweepable = one[keys >> 32] & one[keys & M32]
        else:
            sweepable = np.ones(keys.size, dtype=bool)
        sym, n_initial = self.layout.sym, self.single_char.size
        unsigned = np.dtype(f"u{sym.itemsize}")  # a SEP or removed symbol reads as huge
        if self.entries.positions_of_base[0].size * SWEEP_MAP_SHARE >= sym.size:
            # a large base: each position's answer read from a bit per layout position,
            # made in one sequential pass (the base's positions are in pair order: reading
            # two symbols for each one at random was ~2.5x slower on 100M positions)
            stands = _stand_map(sym.view(unsigned), n_initial)

            def standing(pos: np.ndarray) -> np.ndarray:
                return _stands_at(stands, pos)
        else:
            def standing(pos: np.ndarray) -> np.ndarray:
                return ((sym[pos].view(unsigned) < n_initial)
                        & (sym[pos + 1].view(unsigned) < n_initial))

        self.entries.sweep(0, standing, sweepable)
        self.merged_since_sweep = 0
        release_free_heap()  # the stand map and the old base

    def _below_minimum(self, count: int) -> bool:
        return count < 1 or count < self.settings.min_frequency

    def _collect(self, first: Candidate, room: int) -> list[Candidate]:
        """Exact batching, step 1: after `first`, take the next entries in queue order while
        none conflicts with an earlier one (its left is an earlier right symbol or its right an
        earlier left symbol), none makes a token that exists or that the batch makes, and each
        pair has a single queue entry. `train` then keeps the prefix whose counts beat every
        pair a member creates (step 2)."""
        batch = [first]
        lefts = {first[1] >> 32}
        rights = {first[1] & M32}
        made = {self._new_token(first[1] >> 32, first[1] & M32)}
        ids = self.vocab.ids
        while len(batch) < room and (self.heap or self.cold):
            item = self._next_valid()
            if item is None:
                break
            count, pair, entry = item
            a, b = pair >> 32, pair & M32
            token = self._new_token(a, b)
            if (self._below_minimum(count) or a in rights or b in lefts or token in ids
                    or token in made or isinstance(self.entries_of_pair[pair], list)):
                self._push(count, pair, entry)
                break
            batch.append(item)
            lefts.add(a)
            rights.add(b)
            made.add(token)
        return batch

    def train(self, resumed: bool = False,
              on_pass: Callable[[BpeTrainer], None] | None = None) -> MergeRecord:
        """Run the loop (continue it, `resumed`, on a trainer restored from a checkpoint).
        `on_pass(self)` runs before each pass, when the state is between two passes (the
        checkpoint writer of `--resume`: every field of the trainer is the loop's state)."""
        if not resumed:
            self.count_initial_pairs()
        settings, vocab, record = self.settings, self.vocab, self.merges
        max_merges = settings.max_merges if settings.max_merges is not None else 1 << 62
        bar = Progress("merging", total=min(settings.vocab_size - len(vocab), max_merges),
                       unit="merges", enabled=settings.show_progress)
        passes = 0
        while len(vocab) < settings.vocab_size and len(record.left) < max_merges:
            if on_pass is not None:
                on_pass(self)
            # 1. the best pair
            first = self._next_valid()
            if first is None or self._below_minimum(first[0]):
                break
            _, pair, _ = first
            a, b = pair >> 32, pair & M32
            # 2. with HF's order, the batch of entries that provably come next (a token made
            # again, or a pair with several entries, merges alone)
            batchable = (self.batching and self.hf_semantics
                         and not isinstance(self.entries_of_pair[pair], list)
                         and self._new_token(a, b) not in vocab.ids)
            room = min(settings.vocab_size - len(vocab), max_merges - len(record.left))
            batch = self._collect(first, room) if batchable else [first]
            # 3. their live occurrences, and the cut: keep members while each one's count is
            # above every count a pair created by an earlier member can reach
            pos, member, sizes = self._gather(batch)
            # each position's word, read once for the pass (its weight, the words touched)
            word = self.layout.words(pos)
            if len(batch) > 1:
                keep = self._cut(batch, *self._bounds(pos, member, len(batch), word))
                for count, p, entry in batch[keep:]:
                    self._push(count, p, entry)
                if keep < len(batch):
                    batch = batch[:keep]
                    n_keep = sum(sizes[:keep])
                    pos, member, word = pos[:n_keep], member[:n_keep], word[:n_keep]
            # 4. the new tokens, in merge order
            tokens_before = len(vocab)
            # int32 ids, as the layout holds them: the pass's per-position copies
            # (`lefts[member]`...) take 4 bytes each, not 8
            lefts = np.empty(len(batch), dtype=np.int32)
            rights = np.empty(len(batch), dtype=np.int32)
            news = np.empty(len(batch), dtype=np.int32)
            for i, (count, p, entry) in enumerate(batch):
                a, b = p >> 32, p & M32
                new = vocab.add(self._new_token(a, b), "merge",
                                vocab.base_len[a] + vocab.base_len[b])
                self.token_length[new] = vocab.base_len[new]
                lefts[i], rights[i], news[i] = a, b, new
                if self.hf_semantics:
                    self._drop_entry(p, entry)
                else:
                    del self.entries_of_pair[p]
                    self.pair_counts.set(p, 0)
                self.entries.kill(entry)
                record.left.append(a)
                record.right.append(b)
                record.new.append(new)
                record.count.append(count)
            self.reused_token_in_pass = bool((news < tokens_before).any())
            # 5. one pass for the whole batch
            if pos.size:
                words = self._apply(pos, lefts, rights, news, member, len(batch), word)
            else:
                words = [0] * len(batch)
            record.words.extend(words)
            # 6. the initial base without its stale positions, once enough were merged
            self.merged_since_sweep += pos.size
            initial = self.entries.positions_of_base[0].size if self.entries.keys else 0
            if initial >= SWEEP_MIN and self.merged_since_sweep >= SWEEP_SHARE * initial:
                self._sweep()
            # 7. now and then, the heap's free pages back to the system
            passes += 1
            if passes % HEAP_TRIM_PASSES == 0:
                release_free_heap()
            bar.update(len(record.left), pair=record.count[-1])  # a clock check between lines
        bar.close(len(record.left))
        return self.merges
