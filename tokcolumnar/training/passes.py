"""The NumPy kernels both merge loops (BPE and WordPiece) are built from, on the flat symbol
layout (`tokcolumnar.layout.Layout`; docs/architecture.md, "The flat layout").

A pair is keyed `left_id << 32 | right_id` (`pair_key`), so ascending key order is the `id`
tie-break order, and is named by the position of its left symbol. A loop

1. groups every adjacent pair of the initial layout by key (`group_pairs`): the weighted count
   of each pair and its positions, one sorted slice per pair;
2. merges a pair (or a batch of independent pairs) in one pass (`merge_pass`): rewrites the
   links and returns the pair-count changes — `-w` for each pair the merges destroy, `+w` for
   each pair with a new token — with the positions of the new pairs;
3. folds the changes into its counts (`sum_by_key_arrays`) and indexes the new pairs' positions
   (`sort_new_pairs`): every occurrence of a new pair is created by the pass that created its
   newer token, so one sorted array per pass, sliced per pair, is the whole index.

Per-call overhead dominates here (a merge touches ~20 positions on average), so each step is a
handful of whole-array NumPy calls, and Polars only where an array is large enough to pay for
it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from .. import ondisk
from ..layout import Layout, is_symbol
from ..memory import PASS_CHUNK_POSITIONS

M32 = (1 << 32) - 1
#: Above this many changes, Polars' hash group-by beats NumPy's sort-based grouping.
POLARS_GROUP_MIN = 200_000

#: From this many positions (or new pairs), a BPE pass runs its independent steps on two
#: threads: NumPy's sorts, gathers and element-wise calls release the GIL, so the second core
#: takes one half (medium/ru byte-level: ~25 such passes hold a third of the loop's time).
PARALLEL_MIN = 20_000

_side: ThreadPoolExecutor | None = None


def side_thread() -> ThreadPoolExecutor:
    """The one helper thread of the merge passes (made on first use, idle otherwise; not a
    field of a trainer, whose state is pickled by the checkpoints)."""
    global _side
    if _side is None:
        _side = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokcolumnar-pass")
    return _side


#: `allowed(left_ids, right_ids) -> mask`: which pairs may be counted at all (the BPE loop's
#: `--max-token-length`); None counts every pair.
PairFilter = Callable[[np.ndarray, np.ndarray], np.ndarray] | None


def pair_key(left: np.ndarray | int, right: np.ndarray | int) -> np.ndarray | int:
    """The key of pair (left, right): ascending key order is (left_id, right_id) order."""
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        # int64 before the shift: layout ids are int32, and an int scalar would take their type
        return (np.asarray(left, dtype=np.int64) << 32) | right
    return (left << 32) | right


@dataclass
class PairGroups:
    """Adjacent pairs grouped by key: `keys` ascending, `counts` (weighted by word counts), and
    `positions[starts[i]:ends[i]]` the ascending left positions of pair `keys[i]`."""

    keys: np.ndarray
    counts: np.ndarray
    positions: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def group_pairs(layout: Layout, n_tokens: int, allowed: PairFilter = None) -> PairGroups:
    """Count every adjacent pair of the layout and group its positions by pair key.

    With few enough tokens (`DENSE_COUNT_MAX` dense keys `left * n + right`: a byte-level
    alphabet), the positions go straight into their pair's slice (`_bucketed`). When every
    dense key fits in 32 bits, they are ordered by one sort of `dense key << 32 | position`
    (uint64; faster than the radix sort by argsorts it replaced, and a third of its memory);
    otherwise by a Polars sort on (key, position)."""
    sym = layout.sym
    if allowed is None and n_tokens * n_tokens <= DENSE_COUNT_MAX:
        return _bucketed(layout, n_tokens)
    if allowed is None and n_tokens * n_tokens < (1 << 32):
        combined = _dense_keys(layout, n_tokens)
        owned = [_sorted(combined)]  # (`_grouped` drops the last reference as it goes)
        del combined
        return _grouped(owned, n_tokens, layout)
    # a pair sits wherever two live symbols are adjacent
    live = is_symbol(sym)
    positions = np.flatnonzero(live[:-1] & live[1:]).astype(np.int32)
    del live
    if allowed is not None:
        left, right = sym[positions], sym[positions + 1]
        ok = allowed(left, right)
        positions, left, right = positions[ok], left[ok], right[ok]
        del ok
    if n_tokens * n_tokens < (1 << 32):
        # one in-place sort of `dense << 32 | position`, dense = left * n + right (8 bytes
        # per pair, built in place in uint64: with the layout's int32 ids the product would
        # wrap past 2**31): positions come out ascending within each key, and no int64
        # argsort permutations (8 bytes per pair each, two or three alive at once) are
        # needed
        combined = left.astype(np.uint64)
        del left
        combined *= np.uint64(n_tokens)
        # ids are >= 0: an int32 id's bits read as uint32 are the id (no copy)
        combined += (right.view(np.uint32) if right.dtype == np.int32
                     else right.astype(np.uint64))
        del right
        combined <<= np.uint64(32)
        combined |= positions.view(np.uint32)
        del positions
        combined.sort()
        owned = [combined]
        del combined
        return _grouped(owned, n_tokens, layout)
    if allowed is None:
        left, right = sym[positions], sym[positions + 1]
    frame = pl.DataFrame({"key": pair_key(left, right), "pos": positions,
                          "w": layout.weights(positions)}).sort("key", "pos")
    groups = frame.group_by("key", maintain_order=True).agg(pl.col("w").sum(), pl.len())
    ends = np.cumsum(groups.get_column("len").to_numpy())
    starts = ends - groups.get_column("len").to_numpy()
    return PairGroups(groups.get_column("key").to_numpy(), groups.get_column("w").to_numpy(),
                      frame.get_column("pos").to_numpy().astype(np.int32), starts, ends)


def _grouped(owned: list[np.ndarray], n_tokens: int, layout: Layout) -> PairGroups:
    """The pair groups of the sorted `dense key << 32 | position` values (uint64), handed
    over as the one item of `owned` (taken out here, so the array is freed once read: it is
    the largest of the initial stage)."""
    combined = owned.pop()
    n = combined.size
    # the position is the low word, the dense key the high one (in memory order): both read
    # as strided uint32 views; `DENSE_CHUNK` values at a time (an array in a file: its pages
    # dropped between chunks, `ondisk.drop_pages`)
    halves = combined.view(np.uint32)
    low = 0 if sys.byteorder == "little" else 1
    # the positions (the queue's first base, int32) are written over the values' first half:
    # a chunk of values is copied out whole before its positions go to bytes [4 at, 4 end),
    # below the chunk's end, where every value was read (the positions beside the values
    # were 4 more bytes per pair occurrence on the initial stage's peak); a file's are
    # written to a file of their own
    in_place = not ondisk.is_mapped(combined)
    positions = (halves if in_place else ondisk.empty(n, np.uint32)).view(np.int32)
    last = None  # the last dense key of the chunk before
    run_starts, firsts = [], []
    for at in range(0, n, DENSE_CHUNK):
        part = halves[2 * at + 1 - low:2 * (at + DENSE_CHUNK):2].copy()  # the dense keys
        positions[at:at + part.size] = halves[2 * at + low:2 * (at + part.size):2].copy()
        first = np.ones(part.size, dtype=bool)
        first[1:] = part[1:] != part[:-1]
        if last is not None:  # the chunk's first value starts a run unless it continues
            first[0] = part[0] != last
        last = part[-1]
        here = np.flatnonzero(first)
        run_starts.append(here + at)
        firsts.append(part[here])
        del part, first, here
        ondisk.drop_pages()
    starts = np.concatenate(run_starts) if run_starts else np.zeros(0, dtype=np.int64)
    unique = (np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.uint32)).astype(np.int64)
    del run_starts, firsts
    ends = np.append(starts[1:], n)
    del halves
    if in_place:  # the values' second half given back
        positions = ondisk.shrunk(positions[:n], n)
    del combined
    keys = ((unique // n_tokens) << 32) | (unique % n_tokens)
    return PairGroups(keys, _slice_sums(layout, positions, starts), positions, starts, ends)


#: `_dense_keys` reads this many positions of the layout at a time.
DENSE_CHUNK = 1 << 22
#: Up to this many dense keys (`n_tokens ** 2`: a byte-level alphabet's ~66k), `group_pairs`
#: counts and places each key's positions in its slice (`_bucketed`: four int64 or float64
#: arrays over the keys, 4 MB at most); beyond, it sorts them (an alphabet of a few thousand
#: characters, whitespace-split English: bins of 2^22 keys took ~40 MB more than the sort).
DENSE_COUNT_MAX = 1 << 17
#: `_bucketed` reads this many positions of the layout at a time (its transients, ~15 arrays
#: of 8 bytes per position, are one chunk's: ~120 MB at 2^20).
BUCKET_CHUNK = 1 << 20


def _dense_keys(layout: Layout, n_tokens: int) -> np.ndarray:
    """`(left * n_tokens + right) << 32 | position` (uint64) of every adjacent pair of the
    layout, in position order, built `DENSE_CHUNK` positions at a time: the pairs' positions
    (int64 from `flatnonzero`, then int32) and their ids for the whole layout at once were
    8-12 bytes per pair beside this array on the initial stage's peak (this is 8)."""
    sym = layout.sym
    n = sym.size - 1
    count = 0
    for at in range(0, n, DENSE_CHUNK):
        s = sym[at:at + DENSE_CHUNK + 1]
        live = is_symbol(s)
        count += int(np.count_nonzero(live[:-1] & live[1:]))
    combined = ondisk.empty(count, np.uint64)
    done = 0
    for at in range(0, n, DENSE_CHUNK):
        here, dense = _dense_chunk(sym, at, n_tokens)
        out = combined[done:done + here.size]
        out[...] = dense  # (int64 and >= 0: below 2**32 here)
        out <<= np.uint64(32)
        out |= here.astype(np.uint64)
        done += here.size
    return combined


def _dense_chunk(sym: np.ndarray, at: int, n_tokens: int, size: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The positions (int64) of the adjacent pairs that start in `sym[at:at + size]` (size:
    `DENSE_CHUNK`), and their dense keys `left * n_tokens + right` (int64)."""
    s = sym[at:at + (DENSE_CHUNK if size is None else size) + 1]
    live = is_symbol(s)
    here = np.flatnonzero(live[:-1] & live[1:])
    del live
    dense = s[here].astype(np.int64)
    dense *= n_tokens
    dense += s[here + 1]
    here += at
    return here, dense


def _bucketed(layout: Layout, n_tokens: int) -> PairGroups:
    """`group_pairs` by a counting sort, for up to `DENSE_COUNT_MAX` dense keys: a first
    reading of the layout counts each dense key's occurrences and sums their weights (in
    position order, as the pairs' counts are summed); each key's slice then starts after
    those of the smaller keys, and a second reading writes each position into its key's
    slice, `BUCKET_CHUNK` positions at a time, in position order (within a chunk a stable
    order by key: one in-place sort of `dense << 32 | index in the chunk`). The positions
    array (int32, 4 bytes per pair occurrence) is the only one of the layout's size: the sort
    of all `dense << 32 | position` values at once held 12 bytes per occurrence (100 MB of
    byte-level Chinese: ~0.8 GB more on the initial stage's peak)."""
    sym = layout.sym
    n = sym.size - 1
    n_keys = n_tokens * n_tokens
    occurrences = np.zeros(n_keys, dtype=np.int64)
    sums = np.zeros(n_keys)  # float64: sums of integers, exact below 2**53
    for at in range(0, n, BUCKET_CHUNK):
        here, dense = _dense_chunk(sym, at, n_tokens, BUCKET_CHUNK)
        occurrences += np.bincount(dense, minlength=n_keys)
        sums += np.bincount(dense, weights=layout.weights(here).astype(np.float64),
                            minlength=n_keys)
    ends = np.cumsum(occurrences)
    fill = ends - occurrences  # where each key's next position goes
    positions = ondisk.empty(int(ends[-1]) if n_keys else 0, np.int32)  # the queue's 1st base
    for at in range(0, n, BUCKET_CHUNK):
        here, dense = _dense_chunk(sym, at, n_tokens, BUCKET_CHUNK)
        if not here.size:
            continue
        dense <<= 32
        dense |= np.arange(here.size)
        dense.sort()  # in place (NumPy 2's SIMD sort: ~2x Polars' copying sort here)
        index = (dense & M32).astype(np.intp)
        key = dense >> 32
        del dense
        # each position's rank among its key's positions in the chunk (runs of equal keys)
        first = np.ones(key.size, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        run_starts = np.flatnonzero(first)
        run_lengths = np.diff(np.append(run_starts, key.size))
        rank = np.arange(key.size) - np.repeat(run_starts, run_lengths)
        positions[fill[key] + rank] = here[index]
        fill[key[run_starts]] += run_lengths
    unique = np.flatnonzero(occurrences)
    starts, stops = ends[unique] - occurrences[unique], ends[unique]
    keys = ((unique // n_tokens) << 32) | (unique % n_tokens)
    return PairGroups(keys, sums[unique].astype(np.int64), positions, starts, stops)


def _sorted(values: np.ndarray) -> np.ndarray:
    """`values` (distinct, an array the caller gives up) in ascending order: sorted in place
    (NumPy 2's SIMD sort, faster than Polars' on 2 cores, and no copy: Polars' sort held
    the keys twice, 16 bytes per pair, the peak of a whitespace CJK run's initial stage), or,
    for an array in a file (`ondisk`), a range of values at a time into another file
    (`_sorted_in_parts`)."""
    if ondisk.is_mapped(values):
        return _sorted_in_parts(values)
    values.sort()
    return values


#: A mapped array (`ondisk`) is sorted a range of its values at a time, each range at most
#: about this many values (`_sorted_in_parts`).
SORT_PART = 1 << 25


def _sorted_in_parts(values: np.ndarray) -> np.ndarray:
    """`values` (a mapped uint64 array) in ascending order (up to `SORT_PART` values: in
    place), into a new mapped array: the
    values are split into ranges of at most about `SORT_PART` values by a histogram of their
    top bits, and each range is gathered from the array (one reading of it per range,
    `DENSE_CHUNK` values at a time), sorted in memory and written after the ranges before it
    (an array of its own: `values` is read by every range). One sort of the
    whole mapped array touched all its pages at once, beyond any budget (5 GB of text: 3 GB
    in one NumPy call); this holds one range and one chunk."""
    n = values.size
    if n <= SORT_PART:
        values.sort()
        return values
    top = 0
    for at in range(0, n, DENSE_CHUNK):
        top = max(top, int(values[at:at + DENSE_CHUNK].max()))
        ondisk.drop_pages()
    shift = np.uint64(max(top.bit_length() - 16, 0))  # at most 2**16 buckets
    histogram = np.zeros((top >> int(shift)) + 1, dtype=np.int64)
    for at in range(0, n, DENSE_CHUNK):
        histogram += np.bincount((values[at:at + DENSE_CHUNK] >> shift).astype(np.intp),
                                 minlength=histogram.size)
        ondisk.drop_pages()
    # consecutive buckets, each range closed once it holds SORT_PART values (or one bucket)
    cuts = [0]
    filled = 0
    for bucket, size in enumerate(histogram.tolist()):
        if filled and filled + size > SORT_PART:
            cuts.append(bucket)
            filled = 0
        filled += size
    cuts.append(histogram.size)
    out = ondisk.empty(n, values.dtype)
    done = 0
    for lo, hi in zip(cuts, cuts[1:]):
        parts = []
        for at in range(0, n, DENSE_CHUNK):
            chunk = values[at:at + DENSE_CHUNK]
            bucket = chunk >> shift
            parts.append(chunk[(bucket >= np.uint64(lo)) & (bucket < np.uint64(hi))])
            del chunk, bucket
            ondisk.drop_pages()
        part = np.concatenate(parts)
        del parts
        part.sort()
        out[done:done + part.size] = part
        done += part.size
        del part
        ondisk.drop_pages()
    return out


#: `_slice_sums` reads the weights of this many positions at a time.
WEIGHT_CHUNK = 1 << 20


def _slice_sums(layout: Layout, positions: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The summed word counts of each slice `positions[starts[i]:starts[i + 1]]` (int64),
    reading the weights of about `WEIGHT_CHUNK` positions at a time (whole slices): the
    weights of every pair occurrence at once were 8 bytes per occurrence (plus 4 of word
    indexes) on the initial stage's peak."""
    counts = np.zeros(starts.size, dtype=np.int64)
    i = 0
    while i < starts.size:
        lo = int(starts[i])
        j = max(int(np.searchsorted(starts, lo + WEIGHT_CHUNK, side="left")), i + 1)
        hi = int(starts[j]) if j < starts.size else positions.size
        counts[i:j] = np.add.reduceat(layout.weights(positions[lo:hi]), starts[i:j] - lo)
        i = j
    return counts


@dataclass
class PassChanges:
    """What a merge pass changed: `keys`/`weights` are the pair-count changes (one entry per
    occurrence and neighbour, not yet summed); `new_keys`/`new_positions` the pairs with a new
    token and their left positions."""

    keys: np.ndarray
    weights: np.ndarray
    new_keys: np.ndarray
    new_positions: np.ndarray


def merge_pass(layout: Layout, pos: np.ndarray, left: np.ndarray | int,
               right: np.ndarray | int, new: np.ndarray | int,
               allowed: PairFilter = None, weight: np.ndarray | None = None) -> PassChanges:
    """Merge the pair at each position of `pos` into `new` (per position, or one id for all)
    and return the pair-count changes, in HF's per-merge order.

    The merges of one pass never overlap, so they commute and run at once. For each merged
    occurrence with word count w, its left neighbour l *as it stands after the pass* and its
    right neighbour r *as it stood before*: `(l, left) -w`, `(l, new) +w`, `(right, r) -w`,
    `(new, r) +w` (a neighbour that is a word boundary gives nothing). `allowed` drops the
    changes of pairs that are never counted; `weight`: the word counts of `pos`, when the
    caller has them (else read from the layout)."""
    # rewrite the links; `right_sym` is each right neighbour's symbol before the pass
    left_pos, right_sym = layout.merge_at(pos, new)
    left_sym = layout.sym[left_pos]
    if weight is None:
        weight = layout.weights(pos)
    has_left = is_symbol(left_sym)
    has_right = is_symbol(right_sym)

    def pick(values: np.ndarray | int, mask: np.ndarray) -> np.ndarray | int:
        return values[mask] if isinstance(values, np.ndarray) else values

    # changes beside the left neighbour
    l_sym, l_pos, l_weight = left_sym[has_left], left_pos[has_left], weight[has_left]
    l_old, l_new = pick(left, has_left), pick(new, has_left)
    del left_sym, left_pos
    # changes beside the right neighbour (the new pair is named by the merged position)
    r_sym, r_pos, r_weight = right_sym[has_right], pos[has_right], weight[has_right]
    r_old, r_new = pick(right, has_right), pick(new, has_right)
    del right_sym, weight, has_left, has_right
    # the four changes in HF's order: (left ids, right ids, weights, sign, new positions)
    parts = [(l_sym, l_old, l_weight, -1, None), (r_old, r_sym, r_weight, -1, None),
             (l_sym, l_new, l_weight, 1, l_pos), (r_new, r_sym, r_weight, 1, r_pos)]
    if allowed is None:
        masks: list[np.ndarray | None] = [None] * 4
        sizes = [l_sym.size, r_sym.size, l_sym.size, r_sym.size]
    else:
        masks = [allowed(_full(a, b if isinstance(b, np.ndarray) else a),
                         _full(b, a if isinstance(a, np.ndarray) else b))
                 for a, b, _, _, _ in parts]
        sizes = [int(np.count_nonzero(m)) for m in masks]
    # written in place into one array each (no part arrays concatenated: a large pass's
    # changes took ~2x their final size at once); the new pairs are the last two parts, a
    # view of the keys
    keys = np.empty(sum(sizes), dtype=np.int64)
    weights = np.empty(sum(sizes), dtype=np.int64)
    new_positions = np.empty(sizes[2] + sizes[3], dtype=pos.dtype)
    at = 0
    for (a, b, w, sign, p), ok, size in zip(parts, masks, sizes):
        out = keys[at:at + size]
        out[...] = a if ok is None or not isinstance(a, np.ndarray) else a[ok]
        out <<= 32
        out |= b if ok is None or not isinstance(b, np.ndarray) else b[ok]
        out = weights[at:at + size]
        out[...] = w if ok is None else w[ok]
        if sign < 0:
            np.negative(out, out=out)
        if p is not None:
            start = at - sizes[0] - sizes[1]
            new_positions[start:start + size] = p if ok is None else p[ok]
        at += size
    return PassChanges(keys, weights, keys[sizes[0] + sizes[1]:], new_positions)


#: A merge pass over more occurrences than this runs in chunks of this many
#: (`summed_merge_pass`): a pass's temporaries cost ~220 bytes per merged occurrence, so one
#: pair merged everywhere in a long word (`aaaa...` of 50M characters: 25M merges) would take
#: gigabytes at once, past --memory-limit and its estimate (issue 27, item 7). The estimate
#: (`memory.merge_bytes`) counts one chunk's temporaries.
PASS_CHUNK = PASS_CHUNK_POSITIONS

#: The pair-count changes of a pass summed per pair (keys ascending, int64 sums) and its new
#: pairs as `sort_new_pairs` gives them (None: the pass made none).
SummedPass = tuple[np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray, np.ndarray] | None"]


def summed_merge_pass(layout: Layout, pos: np.ndarray, left: np.ndarray | int,
                      right: np.ndarray | int, new: np.ndarray | int,
                      member: np.ndarray | None = None, allowed: PairFilter = None,
                      word: np.ndarray | None = None) -> SummedPass:
    """`merge_pass` with its changes summed per pair and its new pairs sorted. `left`, `right`
    and `new` are one id each, or (with `member`, the member index of each position) one per
    member. `word`: the word of each position (int32), when the caller has them; the weights
    are read from them a chunk at a time (the int64 weights of a whole large pass were 8 bytes
    per position on the loop's peak: 100 MB of byte-level Chinese, ~300 MB).

    A pass over more than `PASS_CHUNK` positions merges them in chunks, in ascending position
    order: a merged occurrence's left neighbour is at a smaller position, so it is merged (in
    this chunk or an earlier one) before the occurrence's changes are read, and its right
    neighbour is at a larger one, so it still stands as before the pass — the changes of
    `merge_pass` over the whole pass, chunk by chunk. Each chunk's changes are summed and its
    new pairs sorted at once, so the pass holds only those (few distinct pairs, 4 bytes per new
    pair) beyond one chunk's temporaries."""
    def weights(part: slice) -> np.ndarray | None:
        return None if word is None else layout.word_count[word[part]]

    if pos.size <= PASS_CHUNK:
        return _summed(merge_pass(layout, pos, _of(left, member), _of(right, member),
                                  _of(new, member), allowed, weights(slice(None))))
    if member is not None and not bool((pos[1:] > pos[:-1]).all()):
        order = np.argsort(pos, kind="stable")
        pos, member = pos[order], member[order]
        if word is not None:
            word = word[order]
        del order
    sums = KeySums()
    made: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, pos.size, PASS_CHUNK):
        chunk = pos[start:start + PASS_CHUNK]
        m = None if member is None else member[start:start + PASS_CHUNK]
        w = weights(slice(start, start + PASS_CHUNK))
        keys, counts, new_pairs = _summed(merge_pass(layout, chunk, _of(left, m),
                                                     _of(right, m), _of(new, m), allowed, w))
        sums.add(keys, counts)
        if new_pairs is not None:
            made.append(new_pairs)
        ondisk.drop_pages()  # (a loop on disk over its budget: the chunk's mapped pages)
    keys, counts = sums.total()
    return keys, counts, join_new_pairs(made)


def _of(values: np.ndarray | int, member: np.ndarray | None) -> np.ndarray | int:
    """One id, or the id of each position's member."""
    return values if member is None else values[member]


def _summed(changes: PassChanges) -> SummedPass:
    """A pass's changes summed per pair and its new pairs sorted (a large pass sorts them on
    the helper thread meanwhile: the two steps are independent)."""
    n_new = changes.new_keys.size
    new_sorted = (side_thread().submit(sort_new_pairs, changes.new_keys, changes.new_positions)
                  if n_new >= PARALLEL_MIN else None)
    keys, sums = sum_by_key_arrays(changes.keys, changes.weights)
    if not n_new:
        return keys, sums, None
    return keys, sums, (new_sorted.result() if new_sorted is not None
                        else sort_new_pairs(changes.new_keys, changes.new_positions))


def join_new_pairs(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The new pairs of a chunked pass, from each chunk's (`sort_new_pairs`), as the whole
    pass's: each key's slices in chunk order. Chunks run in ascending positions, and a
    chunk's new pairs sit at its merged positions or at their left neighbours, which are at
    or after the previous chunk's last merged position: a key's positions stay ascending, and
    only that last position can repeat where two slices join (dropped, as `sort_new_pairs`
    drops repeats). Empties `parts`.

    Each chunk's positions are scattered to their places in the joined array one chunk at a
    time, the chunk then dropped: beside the joined array, one chunk's positions and index.
    (A gather from all chunks' positions concatenated, by an index over all of them, held
    three copies of a large pass's positions: 100 MB of byte-level Chinese, ~75 MB above
    the loop's steady state.)"""
    if len(parts) <= 1:
        return parts.pop() if parts else None
    n_slices = [k.size for _, k, _ in parts]
    keys = np.concatenate([k for _, k, _ in parts])
    chunk = np.repeat(np.arange(len(parts), dtype=np.int32), n_slices)
    lengths = np.concatenate([np.diff(b) for _, _, b in parts]).astype(np.int64)
    order = np.lexsort((chunk, keys))  # by key, then chunk
    del chunk
    keys, lengths = keys[order], lengths[order]
    placed = np.cumsum(lengths) - lengths  # each slice's start in the joined array
    # the same, in the chunks' own order of slices
    placed_by_chunk = np.empty_like(placed)
    placed_by_chunk[order] = placed
    del order
    positions = np.empty(int(lengths.sum()), dtype=np.int32)
    at = 0
    while parts:
        chunk_positions, _, bounds = parts.pop(0)
        n = bounds.size - 1
        # each position's place: its slice's place plus its offset in the slice (int32:
        # positions, and so new pairs, are fewer than 2**31)
        index = np.repeat((placed_by_chunk[at:at + n] - bounds[:-1]).astype(np.int32),
                          np.diff(bounds))
        index += np.arange(index.size, dtype=np.int32)
        positions[index] = chunk_positions
        del chunk_positions, index
        at += n
    del placed_by_chunk
    same = np.zeros(keys.size, dtype=bool)
    same[1:] = keys[1:] == keys[:-1]
    repeat = np.zeros(keys.size, dtype=bool)
    repeat[1:] = same[1:] & (positions[placed[1:]] == positions[placed[1:] - 1])
    if repeat.any():
        keep = np.ones(positions.size, dtype=bool)
        keep[placed[repeat]] = False
        positions = positions[keep]
        lengths[repeat] -= 1
    last = np.append(np.flatnonzero(~same)[1:] - 1, keys.size - 1)  # each key's last slice
    bounds = np.zeros(last.size + 1, dtype=np.int32)
    bounds[1:] = np.cumsum(lengths)[last]
    return positions, keys[~same], bounds


def _full(value: np.ndarray | int, like: np.ndarray) -> np.ndarray:
    """`value` as an array of `like`'s length (a scalar id broadcast)."""
    return value if isinstance(value, np.ndarray) else np.full(like.size, value, np.int64)


def sum_by_key_arrays(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (ascending, int64) and the sum of the weights of each (int64)."""
    if keys.size > POLARS_GROUP_MIN:
        agg = (pl.DataFrame({"k": keys, "w": weights}).group_by("k").agg(pl.col("w").sum())
               .sort("k"))
        return (agg.get_column("k").to_numpy().astype(np.int64, copy=False),
                agg.get_column("w").to_numpy().astype(np.int64, copy=False))
    # sort, then sum each run of equal keys: a few calls (`np.unique` with its inverse,
    # then a float64 `bincount`, cost ~40 us of fixed overhead on a small pass's few hundred
    # changes, and passes are thousands)
    order = keys.argsort()
    keys = keys[order].astype(np.int64, copy=False)
    if not keys.size:
        return keys, np.zeros(0, dtype=np.int64)
    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    sums = np.add.reduceat(weights[order].astype(np.int64, copy=False), starts)
    return keys[starts], sums


class KeySums:
    """Per-key sums added part by part (each part's keys distinct), folded as they come: the
    parts are summed into one whenever those added since the last fold outnumber its keys.
    So the parts held stay within about twice the distinct keys (plus the last part), and
    each fold sums more new keys than it carries over: all folds together sum at most about
    twice the keys added. (The parts of a large pass held whole until its
    end were its peak: 100 MB of byte-level Chinese, ~300 MB above the loop's state.)

    >>> sums = KeySums()
    >>> sums.add(np.array([1, 5]), np.array([2, 3]))
    >>> sums.add(np.array([5, 7]), np.array([-3, 4]))
    >>> [a.tolist() for a in sums.total()]
    [[1, 5, 7], [2, 0, 4]]
    """

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._folded = 0  # the keys of the first part, the last fold's result
        self._held = 0  # the keys of every part held

    def add(self, keys: np.ndarray, sums: np.ndarray) -> None:
        """Add one part: distinct keys and their sums."""
        self._parts.append((keys, sums))
        self._held += keys.size
        if len(self._parts) > 1 and self._held - self._folded > max(self._folded, FOLD_MIN):
            self._fold()

    def _fold(self) -> None:
        keys = np.concatenate([k for k, _ in self._parts])
        sums = np.concatenate([s for _, s in self._parts])
        self._parts.clear()  # (the parts go before the group-by's own copies)
        keys, sums = sum_by_key_arrays(keys, sums)
        self._parts.append((keys, sums))
        self._folded = self._held = keys.size

    def total(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct keys (ascending, int64) and the sum of each (int64, 0 included)."""
        if not self._parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if len(self._parts) > 1:
            self._fold()
        return self._parts[0]


#: `KeySums` folds no fewer keys than this at once (below, a fold's fixed cost dominates).
FOLD_MIN = 1 << 20


@dataclass
class NewPairs:
    """The positions a pass created, one ascending slice per new pair:
    `positions[starts[i]:ends[i]]` are the left positions of pair `keys[i]` (keys ascending)."""

    positions: np.ndarray
    keys: list[int]
    starts: list[int]
    ends: list[int]


def sort_new_pairs(keys: np.ndarray, positions: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort a pass's new pairs by (key, position) and drop repeats (a batch can name one
    occurrence twice). Returns the positions (int32), the distinct keys (ascending) and the
    bounds: `positions[bounds[i]:bounds[i + 1]]` are the left positions of pair `keys[i]`.

    A large pass sorts one packed int64 per pair (left id, right id and position side by
    side, when their bits fit in 63): NumPy's in-place sort of one array is ~5x faster than
    `lexsort`'s two stable argsorts and gathers (1M pairs: ~110 vs ~580 ms)."""
    packed = _packed(keys, positions) if keys.size >= PACKED_SORT_MIN else None
    if packed is not None:
        sorted_, pbits, rbits = packed
        sorted_.sort()
        if sorted_.size > 1:  # a repeat is the same packed value
            keep = np.ones(sorted_.size, dtype=bool)
            keep[1:] = sorted_[1:] != sorted_[:-1]
            if not keep.all():
                sorted_ = sorted_[keep]
        positions = sorted_ & ((1 << pbits) - 1)
        sorted_ >>= pbits
        keys = ((sorted_ >> rbits) << 32) | (sorted_ & ((1 << rbits) - 1))
    else:
        order = np.lexsort((positions, keys))
        keys, positions = keys[order], positions[order]
        if keys.size > 1:
            keep = np.ones(keys.size, dtype=bool)
            keep[1:] = (keys[1:] != keys[:-1]) | (positions[1:] != positions[:-1])
            if not keep.all():
                keys, positions = keys[keep], positions[keep]
    first = np.ones(keys.size + 1, dtype=bool)
    first[1:-1] = keys[1:] != keys[:-1]
    bounds = np.flatnonzero(first).astype(np.int32)
    return positions.astype(np.int32), keys[bounds[:-1]], bounds


#: From this many new pairs, `sort_new_pairs` sorts packed values (below, `lexsort`'s fixed
#: cost is smaller than packing's few extra passes).
PACKED_SORT_MIN = 512


def _packed(keys: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """`(left << rbits | right) << pbits | position` per pair (a new int64 array, in the
    order of (key, position)) with `pbits` and `rbits`; None when the bits exceed 63 (ids
    and positions are >= 0)."""
    pbits = int(positions.max()).bit_length()
    right = keys & M32
    rbits = int(right.max()).bit_length()
    lbits = (int(keys.max()) >> 32).bit_length()
    if lbits + rbits + pbits > 63:
        return None
    packed = keys >> 32
    packed <<= rbits
    packed |= right
    packed <<= pbits
    packed |= positions
    return packed, pbits, rbits
