"""The lattices of the Unigram trainer and encoder as flat arrays, and the float32 folds and sums
over them in SentencePiece's order (docs/unigram.md, 4 and "The columnar trainer").

A lattice of a string holds a node for every piece that occurs in it (and an unknown node where
no piece of one character starts). The trainer builds the lattices once, for the seed pieces
(`LatticeBase`: every substring that is a seed, found by walking `SeedTrie`, the seeds as a trie
over code points), with everything that only depends on the node set: SentencePiece's node
order, the order of the forward and backward folds' steps and of the float32 sum chains. An EM
iteration or a pruning round keeps the nodes of the current pieces (a table over the seeds'
codes, `LatticeBase._tables`): a filter of arrays already in order, no sort and no join.

A fold (forward, backward, Viterbi) combines the nodes ending (or starting) at a position one
after another, in SentencePiece's list order. Step k of a fold takes the k-th node of every
string in that order, so the loop runs max(nodes per string) times; the float32 rounding of
each step is SentencePiece's. A position's accumulator starts at -inf, so its first node's
`LogSumExp(-inf, v)` is `v` exactly, as SentencePiece takes the first term as is: a filtered
schedule (some nodes gone) stays valid without renumbering. The encoder (`models.unigram`)
runs Viterbi on the same structure, over a trie of its vocabulary."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .passes import side_thread

F32 = np.float32
F64 = np.float64

_CP_BITS = 21  # every code point is below 2^21
_MAX_CP = 0x10FFFF
#: Nodes per batch of a fold or sum chain over a `LatticeBase` (`_Order.live_batches`): its
#: temporaries (a dozen bytes a node) then take some 15 MiB instead of the lattices' size (two
#: batches run at once, one per thread).
BATCH_NODES = 1 << 20
#: From this many nodes, a backward fold's step is cut in two (`LatticeBase.build`): the nodes
#: first in their position's list, whose LogSumExp with -inf is their value (a plain sum), then
#: the others; below it the extra NumPy calls cost more than the sum saves.
LEAD_SPLIT_NODES = 2048
#: A float32 sum chain's slices of fewer values than this are summed in Python floats
#: (`_chain_sums`): ~0.15 µs a value there, ~10 µs a slice in NumPy.
CHAIN_TAIL = 64
#: Characters per run of strings decoded at once (`code_points`).
CODE_POINT_BATCH = 1 << 22


# --- sorting and float32 sums in SentencePiece's order ----------------------------------------

def stable_argsort(key: np.ndarray) -> np.ndarray:
    """`np.argsort(key, kind="stable")` for non-negative integer keys, faster: the keys are
    sorted by stable passes over their 16-bit digits, lowest first, for which NumPy uses a
    radix sort (linear) instead of timsort; the result is the same permutation (a stable
    sort's is unique)."""
    if len(key) == 0:
        return np.zeros(0, np.int64)
    if key.min() < 0:
        return np.argsort(key, kind="stable")
    top = int(key.max())
    if top < 1 << 8:  # one counting pass
        return np.argsort(key.astype(np.uint8), kind="stable")
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while top >> shift:
        order = order[np.argsort(((key[order] >> shift) & 0xFFFF).astype(np.uint16),
                                 kind="stable")]
        shift += 16
    return order


def keep_rows(mask: np.ndarray, *arrays: np.ndarray | None) -> list:
    """`a[mask]` for each array (None stays None), by one `flatnonzero` and `take`s: boolean
    indexing with a mixed mask is ~7x slower per array (a branch per element)."""
    idx = np.flatnonzero(mask)
    return [None if a is None else a.take(idx) for a in arrays]


def _cuts(step: np.ndarray) -> np.ndarray:
    """The slice bounds of the runs of equal values of a sorted array."""
    return np.flatnonzero(np.r_[True, step[1:] != step[:-1], True]) if len(step) \
        else np.zeros(1, np.int64)


def _chain_sums(keys: np.ndarray, values: np.ndarray, cuts: np.ndarray, n: int,
                acc: np.ndarray | None = None) -> np.ndarray:
    """`acc[key] = float32(acc[key] + v)` (`v` a double), slice after slice; a slice holds each
    key at most once. `acc` (float32, n), when given, is summed into (a chain continued)."""
    acc = np.zeros(n, dtype=F32) if acc is None else acc
    bounds = cuts.tolist()
    # the last slices are small (a chain's k-th values: fewer chains are that long); from the
    # first of fewer than CHAIN_TAIL values, the rest is summed key by key in plain floats
    small = np.flatnonzero(np.diff(cuts) < CHAIN_TAIL)
    split = int(small[0]) if len(small) else len(bounds) - 1
    for a, z in zip(bounds[:split], bounds[1:split + 1]):
        kk = keys[a:z]
        acc[kk] = acc[kk] + values[a:z]  # in double, stored as float32 (rounded)
    if split < len(bounds) - 1:
        _sum_per_key(keys[bounds[split]:bounds[-1]], values[bounds[split]:bounds[-1]], acc)
    return acc


def _sum_per_key(keys: np.ndarray, values: np.ndarray, acc: np.ndarray) -> None:
    """`acc[key] = float32(acc[key] + v)` (`v` a double) over the values in order, key by
    key in Python floats: a double sum stored in a C float (`array("f")`) rounds as NumPy's
    float32 store does. For a few thousand values at most (`_chain_sums`' last slices), where
    a NumPy step per slice costs ~10 µs."""
    order = np.argsort(keys, kind="stable")  # each key's values, in order
    ks = keys[order]
    heads = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]).tolist() + [len(ks)]
    vs = values[order].tolist()
    cell = array("f", [0.0])
    for a, z, key in zip(heads[:-1], heads[1:], ks[heads[:-1]].tolist()):
        x = float(acc[key])
        for v in vs[a:z]:
            cell[0] = x + v  # the double sum, rounded to float32
            x = cell[0]
        acc[key] = x


def sequential_f32_sums(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """For each key in 0..n-1, `acc = float32(acc + v)` over its values in array order (`v` a
    double: C++'s `float += double`), as SentencePiece's loops sum. Vectorized across keys: the
    k-th value of every key is added in one step, so there are as many steps as the longest
    chain."""
    if len(keys) == 0:
        return np.zeros(n, dtype=F32)
    order = stable_argsort(keys)
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    rank = np.arange(len(k)) - np.repeat(starts, np.diff(np.r_[starts, len(k)]))
    by_rank = stable_argsort(rank)
    return _chain_sums(k[by_rank], values[order][by_rank].astype(F64),
                       _cuts(rank[by_rank]), n)


def merge_threads(per: np.ndarray) -> np.ndarray:
    """The threads' float32 vectors (rows) added in thread order: thread 0's += thread 1's, …"""
    out = per[0].copy()
    for t in range(1, len(per)):
        out = out + per[t]  # float32 + float32
    return out


def thread_sums(words: np.ndarray, keys: np.ndarray, values: np.ndarray, n: int,
                threads: int) -> np.ndarray:
    """SentencePiece's per-thread float32 sums merged in thread order: word i is summed by
    thread i mod `threads`, each thread in word order; thread 0's vector += thread 1's, …"""
    per = sequential_f32_sums((words % threads) * n + keys, values, threads * n)
    return merge_threads(per.reshape(threads, n))


def log_sum_exp(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SentencePiece's LogSumExp on float32 arrays (the exp and log1p in double):
    `max` if `max > min + 50`, else `float(max + log1p(exp(double(min - max))))`. With
    `x = -inf`, `v` comes out exactly."""
    vmin = np.minimum(x, y)
    vmax = np.maximum(x, y)
    near = (vmax + np.log1p(np.exp((vmin - vmax).astype(F64)))).astype(F32)
    return np.where(vmax > vmin + F32(50.0), vmax, near)


# --- text as code points ----------------------------------------------------------------------

def code_points(strings: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The code points of the strings end to end (int32: every code point is below 2^21) and
    each string's offset (n + 1 offsets). Decoded in runs of strings (`code_point_batches`)
    into the result: the whole text as one Python string, its UTF-32 bytes and a copy took
    ~4x the result's size at once (27 MB of English: ~400 MiB)."""
    lengths = strings.str.len_chars().to_numpy().astype(np.int64)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    out = np.empty(int(offsets[-1]), dtype=np.int32)
    for a, cp, _ in code_point_batches(strings, offsets):
        out[offsets[a]:offsets[a] + len(cp)] = cp
    return out, offsets


def code_point_batches(strings: pl.Series, offsets: np.ndarray | None = None
                       ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """`code_points` of runs of strings of about `CODE_POINT_BATCH` characters, in order: (the
    run's first string, its code points, its strings' offsets from 0). `offsets`: the
    strings' `code_points` offsets when at hand. For a pass over a corpus' characters that
    needs no array of them all."""
    if offsets is None:
        lengths = strings.str.len_chars().to_numpy().astype(np.int64)
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    at = np.unique(np.searchsorted(offsets, np.arange(0, int(offsets[-1]), CODE_POINT_BATCH),
                                   side="right") - 1).tolist() + [len(strings)]
    for a, z in zip(at[:-1], at[1:]):
        text = "".join(strings.slice(a, z - a).to_list())
        yield a, np.frombuffer(text.encode("utf-32-le"), dtype=np.int32), \
            offsets[a:z + 1] - offsets[a]


# --- the seeds as a trie ----------------------------------------------------------------------

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier (2^64 / phi, odd)


class _EdgeTable:
    """An open-addressing hash table (linear probing, load <= 1/2) from distinct non-negative
    int64 keys to int64 values, built and probed for many keys at once: one probe round per
    step of the longest probe sequence, where `searchsorted` over sorted keys costs ~20
    dependent cache misses per key."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        bits = max(4, int(2 * max(len(keys), 1) - 1).bit_length())
        self.shift = np.uint64(64 - bits)
        self.mask = (1 << bits) - 1
        self.keys = np.full(1 << bits, -1, np.int64)
        self.values = np.zeros(1 << bits, np.int64)
        pending = np.arange(len(keys))
        slot = self._hash(keys)
        while len(pending):
            at = slot[pending]
            free = self.keys[at] == -1
            claim = pending[free]
            self.keys[slot[claim]] = keys[claim]  # of several claims of one slot, one wins
            won = self.keys[slot[claim]] == keys[claim]
            self.values[slot[claim[won]]] = values[claim[won]]
            pending = np.r_[pending[~free], claim[~won]]
            slot[pending] = (slot[pending] + 1) & self.mask

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        return ((keys.astype(np.uint64) * _GOLDEN) >> self.shift).astype(np.int64)

    def get(self, keys: np.ndarray) -> np.ndarray:
        """Each key's value, -1 where it is not in the table."""
        out = np.full(len(keys), -1, np.int64)
        slot = self._hash(keys)
        pending = np.arange(len(keys))
        while len(pending):
            at = slot[pending]
            found = self.keys[at]
            hit = found == keys[pending]
            out[pending[hit]] = self.values[at[hit]]
            pending = pending[~hit & (found != -1)]
            slot[pending] = (slot[pending] + 1) & self.mask
        return out


@dataclass(frozen=True)
class SeedTrie:
    """Strings (the seed pieces, or a model's vocabulary) as a trie over code points, flat: an
    edge (parent node, code point) -> child node, keyed `parent << 21 | code point`, in a hash
    table so that one lookup takes a step for every string position at once; each node's
    string index (-1 for a prefix only). Node 0 is the root. Exact: the table compares the
    whole keys."""

    edges: _EdgeTable
    string_of: np.ndarray  # int64 per node
    depth: int  # the longest string, in characters
    size: int  # strings
    root: np.ndarray  # the root's edges as a table: per code point, its child (-1: none)

    @classmethod
    def build(cls, strings: pl.Series) -> SeedTrie:
        """The trie of `strings` (distinct; of equal strings the last is kept)."""
        cp, off = code_points(strings)
        n = np.diff(off)
        depth = int(n.max(initial=0))
        node = np.zeros(len(n), np.int64)
        keys, children, string_of = [], [], [np.full(1, -1, np.int64)]
        next_id = 1
        for level in range(depth):
            sel = np.flatnonzero(n > level)
            uniq, inv = np.unique((node[sel] << _CP_BITS) | cp[off[sel] + level],
                                  return_inverse=True)
            ids = next_id + np.arange(len(uniq))
            node[sel] = ids[inv]
            ends = np.full(len(uniq), -1, np.int64)
            done = n[sel] == level + 1
            ends[inv[done]] = sel[done]
            keys.append(uniq)
            children.append(ids)
            string_of.append(ends)
            next_id += len(uniq)
        empty = np.zeros(0, np.int64)
        root = np.full(_MAX_CP + 1, -1, np.int32)
        if keys:  # the first level's keys are the code points themselves (parent 0)
            root[keys[0]] = children[0]
        return cls(_EdgeTable(np.concatenate(keys) if keys else empty,
                              np.concatenate(children) if keys else empty),
                   np.concatenate(string_of), depth, len(strings), root)

    def matches(self, cp: np.ndarray, off: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every substring of the texts (`cp` end to end, `off` their offsets) that is one of
        the trie's strings: (index of its first character in `cp`, length, string index), by
        length then position — SentencePiece's `commonPrefixSearch` at every position, one
        character of every position per step. int32 where the values fit (a lattice build's
        largest inputs)."""
        narrow = np.int32 if max(len(cp), self.size) < 2**31 else np.int64
        if not self.depth:
            return np.zeros(0, narrow), np.zeros(0, narrow), np.zeros(0, narrow)
        end = np.repeat(off[1:], np.diff(off))
        pos = np.arange(len(cp))
        node = np.zeros(len(cp), np.int64)
        parts = []
        for length in range(1, self.depth + 1):
            live = pos + length <= end
            pos, end = pos[live], end[live]
            # the first character's child from the root's table: every position looks one
            # up, a gather where the hash table's probes cost ~5x as much
            child = self.root[cp[pos]].astype(np.int64) if length == 1 else \
                self.edges.get((node[live] << _CP_BITS) | cp[pos + length - 1])
            hit = child >= 0
            pos, end, node = pos[hit], end[hit], child[hit]
            s = self.string_of[node]
            found = s >= 0
            parts.append((pos[found].astype(narrow), np.full(int(found.sum()), length, narrow),
                          s[found].astype(narrow)))
            if not len(pos):
                break
        return tuple(np.concatenate(c) for c in zip(*parts))  # type: ignore[return-value]


# --- lattices ---------------------------------------------------------------------------------

def _fold_steps(w: np.ndarray, start: np.ndarray, length: np.ndarray, unk: np.ndarray,
                by_end: bool) -> tuple[np.ndarray, np.ndarray]:
    """A fold's schedule: (node order, step of each, ascending). Forward (`by_end`): a string's
    nodes by (end, start), SentencePiece's `end_nodes` lists (longest first); step k takes the
    k-th distinct (end, start) of every string (a character's node and its unknown node, never
    both present, share one). Backward: by (start from the right, insertion order: length,
    unknown last), step k the k-th node of every string. A step holds each position at most
    once, and a string's nodes come in fold order."""
    if not len(w):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    top = int(length.max()) + 1
    start, length = start.astype(np.int64), length.astype(np.int64)  # (the keys need 64 bits)
    if by_end:
        key = (start + length) * (top + 1) + (top - length)
    else:  # the insertion order within a start; the positions reversed below
        key = start * (top + 1) + np.where(unk, top, length)
    order = stable_argsort(key)
    k, ws = key[order], w[order]
    new_string = np.r_[True, ws[1:] != ws[:-1]]
    first = np.flatnonzero(new_string)
    sizes = np.diff(np.r_[first, len(order)])
    if by_end:
        g = np.cumsum(np.r_[True, k[1:] != k[:-1]]) - 1
        step = g - np.repeat(g[first], sizes)
    else:
        s = start[order]
        new_start = np.r_[True, s[1:] != s[:-1]]
        g0 = np.flatnonzero(new_start)
        group_end = np.repeat(np.r_[g0[1:], len(order)], np.diff(np.r_[g0, len(order)]))
        group_start = np.repeat(g0, np.diff(np.r_[g0, len(order)]))
        string_end = np.repeat(first + sizes, sizes)
        idx = np.arange(len(order))
        step = (string_end - group_end) + (idx - group_start)
    visit = stable_argsort(step)
    return order[visit], step[visit]


def _by_step(step: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fold's nodes by step (stable: in node order within a step), the steps' slice bounds
    and the steps' numbers (a step left empty gets neither)."""
    nodes = stable_argsort(step)
    sizes = np.bincount(step) if len(step) else np.zeros(0, np.int64)
    at = np.r_[0, np.cumsum(sizes)]
    return nodes, at[np.r_[True, at[1:] != at[:-1]]], np.flatnonzero(sizes)


def _log_sum_exp_fold(order: _Order, live: np.ndarray, score: np.ndarray, acc: np.ndarray,
                      backward: bool) -> None:
    """A forward (alpha) or `backward` (beta) fold of `order`'s present nodes into `acc`
    (float32 per position, BOS or EOS set), step after step, over batches of whole steps in
    order (`_Order.live_batches`): each position's SentencePiece LogSumExp of its nodes'
    `score + acc[other end]` in list order."""
    # `log_sum_exp` inlined, in fewer NumPy calls: the backward loop runs ~4,000 times on 5 MB
    # of Chinese (a position's first node needs the position after it), mostly on a few long
    # strings' nodes
    minimum, maximum, exp, log1p, where = np.minimum, np.maximum, np.exp, np.log1p, np.where
    f50 = F32(50.0)
    for start, end, code, _, cuts, lead in order.live_batches(live, batch=BATCH_NODES):
        sc = score[code]
        del code
        src, dst = (end, start) if backward else (start, end)  # a node's value flows src -> dst
        bounds = cuts.tolist()
        leads = lead.tolist() if lead is not None else [False] * (len(bounds) - 1)
        for a, z, first in zip(bounds[:-1], bounds[1:], leads):
            t = dst[a:z]
            if first:  # every node first in its list: LogSumExp(-inf, v) is v
                acc[t] = sc[a:z] + acc[src[a:z]]
                continue
            x = acc[t]
            y = sc[a:z] + acc[src[a:z]]
            vmin = minimum(x, y)
            vmax = maximum(x, y)
            near = exp(vmin - vmax, dtype=F64)  # the difference in float, exp in double
            log1p(near, out=near)
            near += vmax
            acc[t] = where(vmax > vmin + f50, vmax, near)  # (stored as float32: rounded)


def best_paths(pos_off: np.ndarray, nchar: np.ndarray, batches: Iterable[tuple],
               dtype: type = F32) -> tuple[np.ndarray, ...]:
    """Viterbi over lattices: the best path of every string, its score summed from the left in
    `dtype`. `batches`: (src, dst, score, node, cuts) of the nodes (start and end positions,
    score, any per-node value to give back) in the forward fold's order (`_fold_steps`), the
    steps' slice bounds `cuts`, in one or more runs of whole steps. Ties keep the node ending
    there that starts first (SentencePiece's strict `>`); the first node ending at a position
    is taken whatever its score (-inf included). Returns the path nodes' strings, `node`
    values, start and end positions (string after string, left to right), and every
    string's best score."""
    npos = int(pos_off[-1])
    best = np.full(npos, -np.inf, dtype=dtype)
    best[pos_off[:-1]] = 0
    narrow = np.int32 if npos < 2**31 else np.int64
    back = np.full(npos, -1, dtype=narrow)  # the best node's start, per end position
    what = None  # its `node` value
    for src, dst, score, node, cuts in batches:
        if what is None:
            what = np.zeros(npos, dtype=node.dtype)
        bounds = cuts.tolist()
        for a, z in zip(bounds[:-1], bounds[1:]):
            t = dst[a:z]
            v = best[src[a:z]] + score[a:z]
            better = np.flatnonzero((v > best[t]) | (back[t] < 0))
            t = t[better]
            best[t], back[t], what[t] = v[better], src[a:z][better], node[a:z][better]
    first = pos_off[:-1]
    last = pos_off[1:] - 1  # each string's end position
    # the paths from their right ends: each step's (strings, end positions), then each node
    # put in place (a string's path at its offset, left to right; no sort)
    cur = last.astype(narrow)
    alive = np.flatnonzero(nchar > 0).astype(narrow)
    nodes = np.zeros(len(nchar), np.int64)  # per string: its path's nodes
    steps = []
    while len(alive):
        end = cur[alive]
        steps.append((alive, end))
        nodes[alive] += 1
        start = back[end]
        cur[alive] = start
        alive = alive[start > first[alive]]
    path_end = np.cumsum(nodes)  # per string: one past its path's last node
    ends = np.empty(int(path_end[-1]) if len(path_end) else 0, dtype=narrow)
    for i, (alive, end) in enumerate(steps):
        ends[path_end[alive] - 1 - i] = end  # the i-th node from the right
    del steps
    strings = np.repeat(np.arange(len(nchar), dtype=narrow), nodes)
    if what is None:
        what = np.zeros(npos, dtype=np.int64)
    return strings, what[ends], back[ends], ends, best[last]


@dataclass
class Lattices:
    """All nodes of the lattices of a list of strings, flat. Positions are numbered string
    after string (`pos_off[w] + i`, i = 0..n_w); a node runs from `start` to `end` (global
    positions)."""

    pos_off: np.ndarray  # per string: its first position (n + 1 offsets)
    nchar: np.ndarray  # per string: characters
    w: np.ndarray  # per node: its string
    b: np.ndarray  # per node: start (local)
    length: np.ndarray
    id: np.ndarray  # current piece id (0 for an unknown character)
    score: np.ndarray  # float32
    unk: np.ndarray  # bool: an UNK node
    _cache: dict = field(default_factory=dict, repr=False)  # orders and schedules

    @property
    def start(self) -> np.ndarray:
        if "start" not in self._cache:
            self._cache["start"] = self.pos_off[self.w] + self.b
        return self._cache["start"]

    @property
    def end(self) -> np.ndarray:
        if "end" not in self._cache:
            self._cache["end"] = self.start + self.length
        return self._cache["end"]

    def begin_order(self) -> np.ndarray | slice:
        """Nodes by (string, start, SentencePiece's insertion order: length, UNK last);
        `slice(None)` when the nodes are in that order (`LatticeBase.view`)."""
        if "begin" not in self._cache:
            top = int(self.length.max(initial=0)) + 1
            key = self.start * (top + 1) + np.where(self.unk, top, self.length)
            self._cache["begin"] = stable_argsort(key)
        return self._cache["begin"]

    def _folds(self, by_end: bool) -> tuple[np.ndarray, np.ndarray]:
        """(node order, slice bounds) of the forward (`by_end`) or backward fold (see
        `_fold_steps`); cached: the passes over one lattice share them."""
        if by_end not in self._cache:
            order, step = _fold_steps(self.w, self.start, self.length, self.unk, by_end)
            self._cache[by_end] = (order, _cuts(step))
        return self._cache[by_end]

    def _fold(self, by_end: bool, score: np.ndarray) -> np.ndarray:
        """Forward (alpha: `by_end`) or backward (beta) log-sum-exp fold in float32."""
        acc = np.full(self.pos_off[-1], -np.inf, dtype=score.dtype)
        acc[self.pos_off[:-1] if by_end else self.pos_off[1:] - 1] = 0  # BOS / EOS
        order, cuts = self._folds(by_end)
        src, dst = (self.start, self.end) if by_end else (self.end, self.start)
        src, dst, sc = src[order], dst[order], score[order]
        for i in range(len(cuts) - 1):
            a, z = cuts[i], cuts[i + 1]
            t = dst[a:z]
            acc[t] = log_sum_exp(acc[t], sc[a:z] + acc[src[a:z]])
        return acc

    def forward(self) -> np.ndarray:
        return self._fold(True, self.score)

    def backward(self) -> np.ndarray:
        return self._fold(False, self.score)

    def viterbi(self, score: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The best path of every string (`best_paths`): its nodes in string order then left
        to right, and the best score of every string, float32 summed left to right."""
        score = self.score if score is None else score
        order, cuts = self._folds(by_end=True)
        nodes = [(self.start[order], self.end[order], score[order], order, cuts)]
        _, nodes, _, _, best = best_paths(self.pos_off, self.nchar, nodes, score.dtype)
        return nodes, best

    def marginals(self) -> np.ndarray:
        """Per node, float(Z-normalized) exponent: ((alpha + score) + beta) - Z, float32."""
        alpha, beta = self.forward(), self.backward()
        z = alpha[self.pos_off[1:] - 1]
        return ((alpha[self.start] + self.score) + beta[self.end]) - z[self.w]


@dataclass
class _Order:
    """A lattice's nodes in one order: start position (int32), length (int8), code (int32: a
    seed, or an unknown slot, see `LatticeBase`), and the slice bounds of its steps or ranks
    (`cuts`: a few thousand bounds, where a per-node step took 4 bytes a node); where needed,
    its string (int32)."""

    start: np.ndarray
    length: np.ndarray
    code: np.ndarray
    cuts: np.ndarray
    w: np.ndarray | None = None
    lead: np.ndarray | None = None  # per step: its nodes are each first in their list

    @classmethod
    def of(cls, rows: np.ndarray | slice, cuts: np.ndarray, start: np.ndarray,
           length: np.ndarray, code: np.ndarray, w: np.ndarray | None = None,
           lead: np.ndarray | None = None) -> _Order:
        # narrowed before the gathers: `rows` visits the nodes in steps, far apart
        start, length, code = start.astype(np.int32, copy=False), \
            length.astype(np.int8, copy=False), code.astype(np.int32, copy=False)
        w = None if w is None else w.astype(np.int32, copy=False)
        if isinstance(rows, slice):  # (all the rows: the arrays themselves, not copies)
            start, length, code, w = (None if a is None else a if rows == slice(None)
                                      else a[rows].copy() for a in (start, length, code, w))
        else:
            start, length, code, w = (None if a is None else a.take(rows)
                                      for a in (start, length, code, w))
        return cls(start, length, code, cuts, w, lead)

    @classmethod
    def empty(cls) -> _Order:
        """An order of no nodes (a fold not built)."""
        return cls(np.zeros(0, np.int32), np.zeros(0, np.int8), np.zeros(0, np.int32),
                   np.zeros(1, np.int64))

    def live(self, live: np.ndarray) -> tuple:
        """(start, end, code, w, cuts, lead) of the nodes whose code is live (w, lead None
        where not kept). The cuts are the kept nodes' steps' bounds, the steps left empty
        dropped; `lead` the kept steps'."""
        return next(self.live_batches(live, batch=None))

    def live_batches(self, live: np.ndarray, batch: int | None = None) -> Iterator[tuple]:
        """`live` for runs of whole steps of about `batch` nodes (a step larger than that
        alone; None: all in one; the callers give `BATCH_NODES`), in order: a fold or sum
        chain run over them in turn does what it does over all nodes at once, with
        temporaries of a batch's size."""
        cuts = self.cuts
        if batch is None or len(cuts) < 2:
            edges = [0, len(cuts) - 1]
        else:
            at = np.searchsorted(cuts, np.arange(0, int(cuts[-1]), batch), side="right") - 1
            edges = np.unique(np.r_[at, len(cuts) - 1]).tolist()
        for i, j in zip(edges[:-1], edges[1:]):
            a, z = int(cuts[i]), int(cuts[j])
            m = live[self.code[a:z]]
            start, length, code, w = keep_rows(m, *(None if x is None else x[a:z] for x in
                                                 (self.start, self.length, self.code, self.w)))
            if j > i:
                at = np.r_[0, np.cumsum(np.add.reduceat(m, cuts[i:j] - a, dtype=np.int64))]
                full = at[1:] != at[:-1]  # the steps that keep a node
                kept = at[np.r_[True, full]]
                lead = None if self.lead is None else self.lead[i:j][full]
            else:
                kept = np.zeros(1, np.int64)
                lead = None if self.lead is None else np.zeros(0, bool)
            end = start + length
            del length, m
            yield start, end, code, w, kept, lead


@dataclass
class LatticeBase:
    """The lattices of `strings` for every seed piece, built once: the nodes in SentencePiece's
    begin order (string, start, length), with an unknown slot after the nodes of each
    character's start (present when that character is no piece), and the same nodes in the
    orders of the forward and backward folds and of the float32 sum chains. A node's code is
    its seed (0..S-1); an unknown slot's is S + its character's seed, or 2S when the character
    is no seed: per EM iteration, a table over the 2S + 1 codes says which nodes are present,
    their piece ids and scores (`_tables`), and each order keeps its present nodes — a filter
    of arrays already in order."""

    pos_off: np.ndarray  # int64 per string (n + 1)
    nchar: np.ndarray  # int64 per string
    n_seeds: int
    begin: _Order  # with w; one step
    forward: _Order  # the forward fold's nodes by step (Viterbi's too)
    backward: _Order  # the backward fold's nodes by step
    _chains: dict = field(default_factory=dict, repr=False)
    #: after `release_begin`: the unknown slots by code (their starts and strings, ascending
    #: within a code, and each code's slice bounds), for the E-step's piece 0
    _unknown: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None,
                                                                       repr=False)

    @classmethod
    def build(cls, strings: pl.Series, trie: SeedTrie, begin: bool = True,
              folds: str = "both") -> LatticeBase:
        """The lattices of `strings` for every string of `trie`, with the begin order if
        `begin` and the fold order of `folds` ("both", "forward" for Viterbi only, or "none").
        No sort: the matches come by length, each length at distinct positions, so each is
        put in place by a running cursor per start (begin order) and per end (the forward
        fold's order)."""
        n_seeds = trie.size
        cp, off = code_points(strings)
        nchar = np.diff(off)
        pos_off = np.r_[0, np.cumsum(nchar + 1)].astype(np.int64)
        pos, length, seed = trie.matches(cp, off)
        levels = np.searchsorted(length, np.arange(1, int(length.max(initial=0)) + 2))
        word_of = np.repeat(np.arange(len(nchar), dtype=np.int32), nchar)
        # begin order: at each character, its matches by length, then its unknown slot
        per_char = np.bincount(pos, minlength=len(cp)) + 1
        first = np.cumsum(per_char) - per_char
        slot = np.empty(len(pos), pos.dtype)
        cursor = first.copy()
        for a, z in zip(levels[:-1], levels[1:]):
            slot[a:z] = cursor[pos[a:z]]
            cursor[pos[a:z]] += 1
        n = int(per_char.sum())
        # (int32 and int8 node arrays: the build's peak memory is its temporaries)
        char = np.repeat(np.arange(len(cp), dtype=np.int32), per_char)  # the first character
        w = word_of[char]
        start = char + w
        del char
        node_len = np.ones(n, np.int8)
        node_len[slot] = length
        code = np.full(n, 2 * n_seeds, np.int32)
        code[slot] = seed
        has_char = (first < cursor) & (node_len[first] == 1)  # the character is a seed
        code[cursor[has_char]] = n_seeds + code[first[has_char]]
        every = slice(None) if begin else slice(0)
        ordered = _Order.of(every, _cuts(np.zeros(n if begin else 0, np.int8)), start, node_len,
                            code, w)
        if folds == "none":
            return cls(pos_off, nchar, n_seeds, ordered, _Order.empty(), _Order.empty())
        # forward steps: a string's distinct (end, start) pairs by end, then start (longest
        # first); a character's unknown slot shares its character node's step
        ends = pos + word_of[pos] + length
        lone = np.flatnonzero(~has_char)  # characters whose unknown slot stands alone
        lone_end = lone + word_of[lone] + 1
        before = np.cumsum(np.bincount(np.r_[ends, lone_end], minlength=int(pos_off[-1])))
        before = np.r_[0, before[:-1]]  # nodes ending before each position
        rank_at = np.zeros(int(pos_off[-1]), np.int64)
        fstep = np.empty(n, np.int32)
        for top in range(len(levels) - 1, 0, -1):  # the longest first
            a, z = levels[top - 1], levels[top]
            e = ends[a:z]
            fstep[slot[a:z]] = before[e] - before[pos_off[word_of[pos[a:z]]]] + rank_at[e]
            rank_at[e] += 1
        fstep[cursor[lone]] = (before[lone_end] - before[pos_off[word_of[lone]]]
                               + rank_at[lone_end])
        fstep[cursor[has_char]] = fstep[first[has_char]]
        del pos, length, seed, slot, ends, before, rank_at
        nodes, cuts, _ = _by_step(fstep)
        forward = _Order.of(nodes, cuts, start, node_len, code)
        del fstep
        if folds != "both":
            return cls(pos_off, nchar, n_seeds, ordered, forward, _Order.empty())
        # backward steps: a string's nodes by start from the right, then insertion order
        string_end = np.r_[first, n][off[1:]][word_of]  # per character: its string's end
        local = np.arange(n, dtype=np.int32) - np.repeat(first.astype(np.int32), per_char)
        bstep = np.repeat((string_end - (first + per_char)).astype(np.int32), per_char) + local
        del string_end, per_char, first, cursor
        # a large step in two: first its nodes first in their list (a character's first slot:
        # when present, no node of its start comes before), then the others (`_Order.lead`)
        large = (np.bincount(bstep) >= LEAD_SPLIT_NODES)[bstep]
        bstep = 2 * bstep + ~(large & (local == 0))
        del large, local
        nodes, cuts, steps = _by_step(bstep)
        del bstep
        backward = _Order.of(nodes, cuts, start, node_len, code, lead=steps % 2 == 0)
        return cls(pos_off, nchar, n_seeds, ordered, forward, backward)

    def _tables(self, ids: np.ndarray, scores: np.ndarray, unk_id: int = 0,
                unk_score: float | None = None, dtype: type = F32
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per code: present, piece id (`unk_id` for an unknown node), score (`dtype`; an
        unknown node's is `unk_score`, by default SentencePiece's float32 min - 10)."""
        s = self.n_seeds
        piece = ids >= 0
        live = np.r_[piece, ~piece, True]
        idc = np.r_[ids, np.full(s + 1, unk_id, ids.dtype)]
        if unk_score is None:
            min_score = scores.min() if len(scores) else F32(0)
            unk_score = F32(min_score - F32(10.0))
        score = np.r_[np.where(piece, scores[np.maximum(ids, 0)], 0).astype(dtype),
                      np.full(s + 1, unk_score, dtype)]
        return live, idc, score

    def chains(self, threads: int) -> list[_Order]:
        """The float32 sum chains of the seeds' nodes (the unknown slots left out), in two
        orders: the first half of the threads' chains and the second (one order for one
        thread), so that the halves can be summed on two threads. A chain is one seed's nodes
        of one thread's words (word i mod `threads`) in begin order; an order holds its nodes
        by (rank in their chain, thread, seed), its cuts the ranks' bounds."""
        if threads not in self._chains:
            b = self.begin
            # int32 where the values fit (node indices, keys, ranks): the temporaries over
            # every node are this build's peak
            narrow = np.int32 if max(len(b.code), threads * max(self.n_seeds, 1)) < 2**31 \
                else np.int64
            nodes = np.flatnonzero(b.code < self.n_seeds).astype(narrow)
            second = (b.w[nodes] % threads) >= (threads + 1) // 2  # the second half's threads
            halves = [nodes[~second], nodes[second]] if threads > 1 else [nodes]
            del nodes, second
            self._chains[threads] = [self._chain_order(halves.pop(0), threads, narrow)
                                     for _ in range(len(halves))]
        return self._chains[threads]

    def release_begin(self, threads: int) -> None:
        """Build the sum chains for `threads`, keep the unknown slots by code, and let the
        begin order go (the E-step's only other use of it, piece 0, reads those two): on
        medium/zh 169 MiB of the words' lattices that the EM rounds and pruning no longer
        hold. `view` needs the begin order: not for a base released."""
        self.chains(threads)
        b = self.begin
        s = self.n_seeds
        slots = np.flatnonzero(b.code >= s).astype(np.int32)
        by_code = stable_argsort(b.code[slots] - s)  # (stable: each code's slots ascending)
        slots = slots[by_code]
        del by_code
        cuts = np.searchsorted(b.code[slots], np.arange(s, 2 * s + 2)).astype(np.int64)
        self._unknown = (b.start[slots], b.w[slots], cuts)
        del slots
        self.begin = _Order.empty()

    def _piece_zero(self, live: np.ndarray, idc: np.ndarray, threads: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(start, end, code, w) of the present nodes of piece 0 in begin order: its seed's
        nodes and the unknown slots present. A position holds at most one of them (a
        character's unknown slot is present only when the character is no piece), so begin
        order is their starts' order."""
        if self._unknown is None:
            start, end, code, w, _, _ = self.begin.live(live & (idc == 0))
            return start, end, code, w
        s = self.n_seeds
        parts = []
        for seed in np.flatnonzero(live[:s] & (idc[:s] == 0)).tolist():  # one as a rule
            for order in self.chains(threads):
                at = np.flatnonzero(order.code == seed)
                parts.append((order.start[at], order.length[at].astype(np.int32),
                              order.code[at], order.w[at]))
        u_start, u_w, cuts = self._unknown
        # the present codes that have slots (a seed gone has a live code, and no slot unless
        # it is a character): their slices, end to end
        sel = np.flatnonzero(live[s:2 * s + 1] & (cuts[1:] > cuts[:-1]))
        if len(sel):
            n = cuts[sel + 1] - cuts[sel]
            at = np.repeat(cuts[sel] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
            parts.append((u_start[at], np.ones(len(at), np.int32),
                          np.repeat((sel + s).astype(np.int32), n), u_w[at]))
        if not parts:
            empty = np.zeros(0, np.int32)
            return empty, empty, empty, empty
        start, length, code, w = (np.concatenate(c) for c in zip(*parts))
        order = np.argsort(start, kind="stable")
        start = start[order]
        return start, start + length[order], code[order], w[order]

    def _chain_order(self, nodes: np.ndarray, threads: int, narrow: type) -> _Order:
        """The chains of `nodes` (seed nodes in begin order) by (rank, thread, seed)."""
        b = self.begin
        key = (b.w[nodes] % threads).astype(narrow) * max(self.n_seeds, 1) + b.code[nodes]
        order = stable_argsort(key)
        nodes = nodes[order]
        k = key[order]
        del key, order
        heads = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]).astype(narrow)
        del k
        rank = np.arange(len(nodes), dtype=narrow) - np.repeat(
            heads, np.diff(np.r_[heads, len(nodes)]))
        del heads
        by_rank = stable_argsort(rank)
        nodes = nodes[by_rank]
        cuts = _cuts(rank[by_rank])
        del rank, by_rank
        return _Order.of(nodes, cuts, b.start, b.length, b.code, b.w)

    def _folds(self, live: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta): `Lattices.forward` and `backward` over the present nodes, the
        backward fold on the side thread while this one runs the forward fold (NumPy releases
        the GIL in the large steps; the two write different arrays)."""
        npos = int(self.pos_off[-1])
        alpha = np.full(npos, -np.inf, dtype=F32)
        alpha[self.pos_off[:-1]] = 0  # BOS
        beta = np.full(npos, -np.inf, dtype=F32)
        beta[self.pos_off[1:] - 1] = 0  # EOS
        backward = side_thread().submit(_log_sum_exp_fold, self.backward, live, score, beta,
                                        True)
        _log_sum_exp_fold(self.forward, live, score, alpha, False)
        backward.result()
        return alpha, beta

    def expected(self, ids: np.ndarray, scores: np.ndarray, counts: np.ndarray, n: int,
                 threads: int) -> np.ndarray:
        """The E-step: every node's marginal `freq × exp(((alpha + score) + beta) - Z)` summed
        in float32 per piece, in SentencePiece's order (thread = word mod `threads`, then word,
        start, insertion; the threads' vectors added in thread order). The nodes of piece 0
        (the unknown nodes join them, interleaved in begin order) are summed apart. The chains
        run over batches of whole ranks, in order: each sum continues where the last batch
        left it, so the float32 results are those of one pass."""
        live, idc, score = self._tables(ids, scores)
        alpha, beta = self._folds(live, score)
        z = alpha[self.pos_off[1:] - 1]
        freq = counts.astype(F32)

        def contrib(start, end, code, w):
            x = ((alpha[start] + score[code]) + beta[end]) - z[w]
            return freq[w].astype(F64) * np.exp(x.astype(F64))

        def chain_sums(order: _Order) -> np.ndarray:
            """The sums of `order`'s chains (threads x pieces; 0 for the other threads)."""
            per = np.zeros(threads * n, dtype=F32)
            for start, end, code, w, cuts, _ in order.live_batches(live & (idc != 0),
                                                                batch=BATCH_NODES):
                _chain_sums((w % threads) * n + idc[code], contrib(start, end, code, w), cuts,
                            threads * n, per)
            return per

        # the two halves of the threads on two threads (their sums are disjoint: adding
        # them is exact), piece 0 after the first
        first, *rest = self.chains(threads)
        other = side_thread().submit(chain_sums, rest[0]) if rest else None
        per = chain_sums(first).reshape(threads, n)
        if n:
            start, end, code, w = self._piece_zero(live, idc, threads)
            per[:, 0] = sequential_f32_sums(w % threads, contrib(start, end, code, w), threads)
        if other is not None:
            per += other.result().reshape(threads, n)
        return merge_threads(per)

    def viterbi(self, ids: np.ndarray, scores: np.ndarray, unk_id: int = 0,
                unk_score: float | None = None, dtype: type = F32
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The best path of every string for the present pieces (`best_paths`: scores summed
        from the left in `dtype`, ties to the node ending there that starts first): its
        nodes' strings, piece ids, local starts and lengths, string after string, left to
        right."""
        live, idc, score = self._tables(ids, scores, unk_id, unk_score, dtype)
        batches = ((start, end, score[code], code, cuts) for start, end, code, _, cuts, _
                   in self.forward.live_batches(live, batch=BATCH_NODES))
        strings, code, start, end, _ = best_paths(self.pos_off, self.nchar, batches, dtype)
        strings = strings.astype(np.int64)
        return (strings, idc[code], start - self.pos_off[strings],
                (end - start).astype(np.int64))

    def view(self, ids: np.ndarray, scores: np.ndarray, strings: np.ndarray | None = None
             ) -> Lattices:
        """The lattices for the current pieces as `Lattices`: `ids[seed]` each seed's piece id
        (-1: gone), `scores` the pieces' float32 scores; an unknown node (id 0, score
        min - 10) where no piece of one character starts. `strings` (bool per string) keeps
        only those strings' nodes. The nodes stay in begin order, the fold schedules are the
        base's filtered."""
        live, idc, score = self._tables(ids, scores)
        b = self.begin
        keep = live[b.code]
        if strings is not None:
            keep &= strings[b.w]
        # the nodes' positions and lengths as int32 (the base's, an int64 copy of each took
        # ~50 MiB a column on the seeds of 27 MB of English)
        w, start, length, code = keep_rows(keep, b.w, b.start, b.length, b.code)
        length = length.astype(np.int32)
        lat = Lattices(pos_off=self.pos_off, nchar=self.nchar, w=w,
                       b=start - self.pos_off[w].astype(np.int32), length=length,
                       id=idc.astype(np.int32)[code], score=score[code],
                       unk=code >= self.n_seeds)
        lat._cache.update(start=start, end=start + length, begin=slice(None))  # (in order)
        return lat
