"""The BPE merge loop over the flat symbol layout (see `alphabet.Layout`).

Each merge is one columnar pass over the positions where its pair occurs: gather them, check
they are still live, rewrite the links, and emit the pair deltas (`-1` for the pairs the merge
destroys, `+1` for the pairs with the new token), which are grouped by pair key and folded into
the counts. Every new pair's positions are written once, by the pass that creates them, and
kept as a slice of that pass's sorted array; the queue holds one entry per such slice.

Pair keys are `left_id << 32 | right_id`, so key order is the `id` tie-break order. With the
default tie-break the loop reproduces HuggingFace `BpeTrainer` exactly, including what it does
when a merged string already exists as a token (the id is reused, and each queue entry merges
only the words it was created for). The other tie-breaks merge every occurrence of the chosen
pair, as the seeds' code and subword-nmt do.

The pass is written with NumPy on the layout's arrays because a merge touches ~20 positions on
average and per-call overhead dominates; the initial pair count, over every position, is a
Polars group-by."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .alphabet import Initial, Layout, Vocab
from .progress import Progress

M24 = (1 << 24) - 1
M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
CMAX = 1 << 62


@dataclass
class MergeRecord:
    """The merges in order: pair ids, new id, pair count and number of words touched."""

    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    words: list[int] = field(default_factory=list)


@dataclass
class BpeSettings:
    vocab_size: int
    min_frequency: int = 0
    tie_break: str = "id"
    prefix: str | None = None
    max_token_length: int | None = None
    max_merges: int | None = None
    show_progress: bool | None = None


class _Entries:
    """Queue entries. Each pass stores one sorted position array (a "base") with, per pair it
    created, the pair key and the slice of its positions; entry id = base << 24 | index."""

    def __init__(self) -> None:
        self.pos: list[np.ndarray] = []
        self.keys: list[list[int]] = []
        self.starts: list[list[int]] = []
        self.ends: list[list[int]] = []

    def add_base(self, positions: np.ndarray, keys: list[int], starts: list[int],
                 ends: list[int]) -> int:
        """Store a pass's positions; returns the id of its first entry."""
        self.pos.append(positions)
        self.keys.append(keys)
        self.starts.append(starts)
        self.ends.append(ends)
        return (len(self.pos) - 1) << 24

    def positions(self, eid: int) -> np.ndarray:
        b, i = eid >> 24, eid & M24
        return self.pos[b][self.starts[b][i]:self.ends[b][i]]

    def pair(self, eid: int) -> int:
        return self.keys[eid >> 24][eid & M24]


def pair_keys(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return (left.astype(np.int64) << 32) | right.astype(np.int64)


def _first_valid(layout: Layout, pos: np.ndarray, a: int, b: int) -> int:
    ok = (layout.sym[pos] == a) & (layout.sym[layout.nxt[pos]] == b)
    hit = np.flatnonzero(ok)
    return int(pos[hit[0]]) if hit.size else -1


def _invert_string(s: str) -> bytes:
    """A byte key whose ascending order is descending string order (for `lexical-max`)."""
    return b"".join((0x10FFFF - ord(c)).to_bytes(3, "big") for c in s) + b"\xff\xff\xff"


class BpeTrainer:
    """Runs the merge loop on an `Initial` (vocab + layout); see the module docstring."""

    cold_divisor = 256  # initial cold threshold = best initial pair count // cold_divisor

    def __init__(self, initial: Initial, settings: BpeSettings):
        self.vocab: Vocab = initial.vocab
        self.layout: Layout = initial.layout
        self.n_words = initial.n_words
        self.s = settings
        self.hf = settings.tie_break == "id"
        self.entries = _Entries()
        self.counts: dict[int, int] = {}
        self.live: dict[int, int | list[int]] = {}
        self.heap: list = []
        self.merges = MergeRecord()
        self.batching = True
        self.passes = 0
        # Cold store (tie-break id): pairs created with a count below `threshold` wait in
        # arrays instead of the queue; counts only fall after creation, so none can be the best
        # pair while the best valid count is >= threshold (see `_revive`).
        self.threshold = 0
        self.cold: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.reuse_pass = False
        room = min(settings.vocab_size - len(self.vocab), initial.layout.sym.size)
        if settings.max_merges is not None:
            room = min(room, settings.max_merges)
        self.tlen = np.zeros(len(self.vocab) + max(room, 0) + 1, dtype=np.int64)
        self.tlen[: len(self.vocab)] = self.vocab.base_len

    # -- queue ---------------------------------------------------------------------------
    def _push(self, count: int, pair: int, eid: int, first: int | None = None) -> None:
        tb = self.s.tie_break
        if tb == "id":
            heapq.heappush(self.heap, ((CMAX - count) << 128) | (pair << 64) | eid)
        elif tb == "lexical-max":
            key = _invert_string(self.vocab.tokens[pair >> 32]) + _invert_string(
                self.vocab.tokens[pair & M32])
            heapq.heappush(self.heap, (-count, key, eid))
        else:
            if first is None:
                first = int(self.entries.positions(eid)[0])
            heapq.heappush(self.heap, (-count, first, eid))

    def _pop(self) -> tuple[int, int, int, object]:
        item = heapq.heappop(self.heap)
        if self.s.tie_break == "id":
            return CMAX - (item >> 128), (item >> 64) & M64, item & M64, None
        eid = item[2]
        return -item[0], self.entries.pair(eid), eid, item[1]

    # -- length rule -----------------------------------------------------------------------
    def _len_ok(self, left: np.ndarray, right: np.ndarray) -> np.ndarray | None:
        if self.s.max_token_length is None:
            return None
        return (self.tlen[left] + self.tlen[right]) <= self.s.max_token_length

    # -- initial pairs ---------------------------------------------------------------------
    def count_initial_pairs(self) -> None:
        """Count every adjacent pair and index its positions: positions grouped by pair key
        (a radix sort on 16-bit digits of a dense key when the initial vocabulary allows, else
        a Polars sort), then one entry per pair."""
        lay = self.layout
        sym = lay.sym
        p = np.flatnonzero((sym[:-1] >= 0) & (sym[1:] >= 0)).astype(np.int32)
        left, right = sym[p], sym[p + 1]
        ok = self._len_ok(left, right)
        if ok is not None:
            p, left, right = p[ok], left[ok], right[ok]
        n0 = len(self.vocab)
        if n0 * n0 < (1 << 32):
            dense = (left * n0 + right).astype(np.uint32)
            del left, right
            order = np.argsort((dense & 0xFFFF).astype(np.uint16), kind="stable")
            if n0 * n0 > (1 << 16):
                hi = (dense >> 16).astype(np.uint16)[order]
                order = order[np.argsort(hi, kind="stable")]
                del hi
            dense = dense[order]
            p = p[order]
            del order
            first = np.ones(dense.size, dtype=bool)
            first[1:] = dense[1:] != dense[:-1]
            starts = np.flatnonzero(first)
            del first
            lens = np.diff(np.append(starts, dense.size))
            d = dense[starts].astype(np.int64)
            groups = pl.DataFrame({
                "key": ((d // n0) << 32) | (d % n0),
                "w": np.add.reduceat(lay.wcount[p], starts) if p.size else np.zeros(0, np.int64),
                "len": lens})
            positions = p
        else:
            df = pl.DataFrame({"key": pair_keys(left, right), "pos": p, "w": lay.wcount[p]}
                              ).sort("key", "pos")
            groups = df.group_by("key", maintain_order=True).agg(pl.col("w").sum(), pl.len())
            positions = df.get_column("pos").to_numpy().astype(np.int32)
        keys = groups.get_column("key").to_list()
        sums = groups.get_column("w").to_list()
        ends = np.cumsum(groups.get_column("len").to_numpy())
        starts = (ends - groups.get_column("len").to_numpy()).tolist()
        eid0 = self.entries.add_base(positions, keys, starts, ends.tolist())
        eids = range(eid0, eid0 + len(keys))
        self.live = dict(zip(keys, eids))
        self.counts = dict(zip(keys, sums))
        if self.s.tie_break == "id":
            self.heap = [((CMAX - w) << 128) | (k << 64) | e for k, w, e in zip(keys, sums, eids)]
            heapq.heapify(self.heap)
            self.threshold = max(sums, default=0) // self.cold_divisor
        else:
            for k, w, e in zip(keys, sums, eids):
                self._push(w, k, e)

    # -- live entries ----------------------------------------------------------------------
    def _entries_of(self, pair: int) -> list[int]:
        e = self.live.get(pair)
        return [] if e is None else [e] if isinstance(e, int) else e

    def _add_live(self, pair: int, eid: int) -> None:
        e = self.live.get(pair)
        if e is None:
            self.live[pair] = eid
        elif isinstance(e, int):
            self.live[pair] = [e, eid]
        else:
            e.append(eid)

    def _drop_live(self, pair: int, eid: int) -> None:
        e = self.live[pair]
        if isinstance(e, int):
            del self.live[pair]
        else:
            e.remove(eid)
            if len(e) == 1:
                self.live[pair] = e[0]

    # -- one merge -------------------------------------------------------------------------
    def _positions(self, eid: int, pair: int) -> np.ndarray:
        ents = self.live.get(pair)
        if not isinstance(ents, list):
            return self.entries.positions(eid)
        pos = np.unique(np.concatenate([self.entries.positions(e) for e in ents]))
        if self.hf:  # HF merges only in the words this entry was created for
            mine = self.entries.positions(eid)
            pos = pos[np.isin(self.layout.word_of[pos], self.layout.word_of[mine])]
        return pos

    def _live_occurrences(self, pos: np.ndarray, a: int, b: int) -> np.ndarray:
        return self.layout.live_occurrences(pos, a, b)

    def _gather(self, batch: list[tuple[int, int, int]]
                ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The live occurrences of every batch member, concatenated in member order, with the
        member index of each and the per-member sizes."""
        if len(batch) == 1:
            _, p, e = batch[0]
            pos = self._live_occurrences(self._positions(e, p), p >> 32, p & M32)
            return pos, np.zeros(pos.size, dtype=np.int64), [pos.size]
        raw = [self._positions(e, p) for _, p, e in batch]
        member = np.repeat(np.arange(len(batch), dtype=np.int64), [x.size for x in raw])
        pos = np.concatenate(raw)
        pairs = np.array([p for _, p, _ in batch], dtype=np.int64)
        a, b = (pairs >> 32)[member], (pairs & M32)[member]
        sym, nxt = self.layout.sym, self.layout.nxt
        ok = (sym[pos] == a) & (sym[nxt[pos]] == b)
        if (pairs >> 32 == pairs & M32).any():  # runs need the left-to-right rule
            return self._gather_slow(batch)
        pos, member = pos[ok], member[ok]
        return pos, member, np.bincount(member, minlength=len(batch)).tolist()

    def _gather_slow(self, batch: list[tuple[int, int, int]]
                     ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        pos_list = [self._live_occurrences(self._positions(e, p), p >> 32, p & M32)
                    for _, p, e in batch]
        sizes = [x.size for x in pos_list]
        member = np.repeat(np.arange(len(batch), dtype=np.int64), sizes)
        return np.concatenate(pos_list), member, sizes

    def _apply(self, pos: np.ndarray, a: np.ndarray, b: np.ndarray, new: np.ndarray,
               member: np.ndarray, n_members: int) -> list[int]:
        """Merge every occurrence in `pos` (left symbol a, right b) into `new`, all at once.

        The merges of one pass never overlap (see `_collect`), so they commute. Emits HF's
        per-merge changes: `(l, a) -1, (l, new) +1` for the left neighbour l as it stands
        after the pass, and `(b, r) -1, (new, r) +1` for the right neighbour r as it stood
        before. Returns the number of distinct words each member touched."""
        lay = self.layout
        left_pos, rs = lay.merge_at(pos, new)
        ls = lay.sym[left_pos]
        wc = lay.wcount[pos]
        has_l = ls >= 0
        has_r = rs >= 0
        ls_l, lp_l, wc_l, a_l, n_l = ls[has_l], left_pos[has_l], wc[has_l], a[has_l], new[has_l]
        rs_r, p_r, wc_r, b_r, n_r = rs[has_r], pos[has_r], wc[has_r], b[has_r], new[has_r]
        minus_l, minus_r = (ls_l << 32) | a_l, (b_r << 32) | rs_r
        plus_l, plus_r = (ls_l << 32) | n_l, (n_r << 32) | rs_r
        wc_ml, wc_mr, wc_pl, wc_pr = wc_l, wc_r, wc_l, wc_r
        if self.s.max_token_length is not None:
            ok = self._len_ok(ls_l, a_l)
            minus_l, wc_ml = minus_l[ok], wc_l[ok]
            ok = self._len_ok(b_r, rs_r)
            minus_r, wc_mr = minus_r[ok], wc_r[ok]
            ok = self._len_ok(ls_l, n_l)
            plus_l, lp_l, wc_pl = plus_l[ok], lp_l[ok], wc_l[ok]
            ok = self._len_ok(n_r, rs_r)
            plus_r, p_r, wc_pr = plus_r[ok], p_r[ok], wc_r[ok]
        keys = np.concatenate([minus_l, minus_r, plus_l, plus_r])
        weights = np.concatenate([-wc_ml, -wc_mr, wc_pl, wc_pr])
        if keys.size > 200_000:
            agg = pl.DataFrame({"k": keys, "w": weights}).group_by("k").agg(pl.col("w").sum())
            uk, delta = agg.get_column("k").to_list(), agg.get_column("w").to_list()
        else:
            ukeys, inv = np.unique(keys, return_inverse=True)
            uk = ukeys.tolist()
            delta = np.bincount(inv, weights=weights).astype(np.int64).tolist()
        get = self.counts.get
        self.counts.update(zip(uk, [get(k, 0) + d for k, d in zip(uk, delta)]))
        if plus_l.size or plus_r.size:
            self._queue_new_pairs(np.concatenate([plus_l, plus_r]),
                                  np.concatenate([lp_l, p_r]))
        w = lay.word_of[pos]
        starts = np.ones(pos.size, dtype=bool)
        starts[1:] = (w[1:] != w[:-1]) | (member[1:] != member[:-1])
        return np.bincount(member[starts], minlength=n_members).tolist()

    def _bounds(self, pos: np.ndarray, member: np.ndarray, n: int) -> np.ndarray:
        """For each member, the largest count a pair with its new token can reach: the largest
        weighted count of one neighbour symbol beside its occurrences (DESIGN.md §4)."""
        lay = self.layout
        w = lay.wcount[pos]
        out = np.zeros(n, dtype=np.int64)
        for neigh in (lay.sym[lay.prv[pos]], lay.sym[lay.nxt[lay.nxt[pos]]]):
            ok = neigh >= 0
            keys = (member[ok] << 32) | neigh[ok]
            uk, inv = np.unique(keys, return_inverse=True)
            sums = np.bincount(inv, weights=w[ok]).astype(np.int64)
            np.maximum.at(out, uk >> 32, sums)
        return out

    def _queue_new_pairs(self, plus: np.ndarray, pplus: np.ndarray) -> None:
        order = np.lexsort((pplus, plus))
        sk, sp = plus[order], pplus[order]
        if sk.size > 1:
            keep = np.ones(sk.size, dtype=bool)
            keep[1:] = (sk[1:] != sk[:-1]) | (sp[1:] != sp[:-1])
            if not keep.all():
                sk, sp = sk[keep], sp[keep]
        first = np.ones(sk.size, dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        starts = np.flatnonzero(first)
        ends = np.append(starts[1:], sk.size)
        keys = sk[starts].tolist()
        get = self.counts.get
        cnt = [get(k, 0) for k in keys]
        eid0 = self.entries.add_base(sp.astype(np.int32), keys, starts.tolist(), ends.tolist())
        if self.hf:
            if self.threshold > 1:
                c_arr = np.array(cnt, dtype=np.int64)
                cold = (c_arr > 0) & (c_arr < self.threshold)
                if cold.any():
                    idx = np.flatnonzero(cold)
                    self.cold.append((sk[starts][idx], eid0 + idx, c_arr[idx]))
                    cnt = np.where(cold, 0, c_arr).tolist()
            if self.reuse_pass and self.cold:  # a re-created token: its pairs may be cold
                self._revive(0, only=np.array(keys, dtype=np.int64))
            heap, push, live = self.heap, heapq.heappush, self.live
            id_mode = self.s.tie_break == "id"
            for i, (key, c) in enumerate(zip(keys, cnt)):
                if c <= 0:
                    continue
                eid = eid0 + i
                if key in live:
                    self._add_live(key, eid)
                else:
                    live[key] = eid
                if id_mode:
                    push(heap, ((CMAX - c) << 128) | (key << 64) | eid)
                else:
                    self._push(c, key, eid)
            return
        for i, (key, c) in enumerate(zip(keys, cnt)):
            if c <= 0:
                continue
            eid = eid0 + i
            old = self._entries_of(key)
            if old:  # one live entry per pair: fold older positions into the new entry
                merged = np.unique(np.concatenate(
                    [self.entries.positions(x) for x in old] + [self.entries.positions(eid)]))
                eid = self.entries.add_base(merged, [key], [0], [merged.size])
            self.live[key] = eid
            self._push(c, key, eid)

    # -- the loop --------------------------------------------------------------------------
    def _new_token(self, a: int, b: int) -> str:
        return self.vocab.joined(a, b, self.s.prefix)

    def _next_valid(self) -> tuple[int, int, int] | None:
        """Pop until an entry whose count is current (HF's lazy re-queueing); None at the
        end."""
        s, counts, live, hf = self.s, self.counts, self.live, self.hf
        while self.heap or self.cold:
            if not self.heap:
                self._revive(0)
                continue
            count, pair, eid, tie = self._pop()
            cur = counts.get(pair, 0)
            if not hf and live.get(pair) != eid:
                continue
            if count != cur:
                if hf or cur > 0:
                    self._push(cur, pair, eid, tie if s.tie_break == "first-seen" else None)
                continue
            if s.tie_break == "first-seen":
                first = _first_valid(self.layout, self.entries.positions(eid), pair >> 32,
                                     pair & M32)
                if first != tie:
                    if first >= 0:
                        self._push(cur, pair, eid, first)
                    continue
            if self.cold and count < self.threshold:
                self._push(count, pair, eid)
                self._revive(count)
                continue
            return count, pair, eid
        return None

    def _revive(self, count: int, only: np.ndarray | None = None) -> None:
        """Move cold pairs into the queue: those created with a count >= count // 2 (all when
        `count` <= 1), or, with `only`, those among these keys. Lowers the threshold."""
        if not self.cold:
            return
        keys, eids, cnt = (np.concatenate(x) for x in zip(*self.cold))
        if only is not None:
            move = np.isin(keys, only)
        else:
            self.threshold = count // 2 if count > 1 else 0
            move = cnt >= self.threshold
        rest = ~move
        self.cold = [(keys[rest], eids[rest], cnt[rest])] if rest.any() else []
        get, heap = self.counts.get, self.heap
        for key, eid in zip(keys[move].tolist(), eids[move].tolist()):
            self._add_live(key, eid)
            heapq.heappush(heap, ((CMAX - get(key, 0)) << 128) | (key << 64) | eid)

    def _below_minimum(self, count: int) -> bool:
        return count < 1 or count < self.s.min_frequency

    def _collect(self, first: tuple[int, int, int], room: int) -> list[tuple[int, int, int]]:
        """Exact batching (DESIGN.md §4): after `first`, take the next entries in queue order
        while none conflicts with an earlier one (its left is an earlier right symbol or its
        right an earlier left symbol), none reuses an existing token, and each pair has a
        single queue entry. `_trim` then keeps the prefix whose counts beat every new pair."""
        batch = [first]
        lefts = {first[1] >> 32}
        rights = {first[1] & M32}
        made = {self._new_token(first[1] >> 32, first[1] & M32)}
        ids = self.vocab.ids
        while len(batch) < room and (self.heap or self.cold):
            item = self._next_valid()
            if item is None:
                break
            count, pair, eid = item
            a, b = pair >> 32, pair & M32
            tok = self._new_token(a, b)
            if (self._below_minimum(count) or a in rights or b in lefts or tok in ids
                    or tok in made or isinstance(self.live[pair], list)):
                self._push(count, pair, eid)
                break
            batch.append(item)
            lefts.add(a)
            rights.add(b)
            made.add(tok)
        return batch

    def train(self) -> MergeRecord:
        self.count_initial_pairs()
        s = self.s
        vocab, live = self.vocab, self.live
        bar = Progress("merging", total=s.vocab_size, enabled=s.show_progress)
        hf = self.hf
        m = self.merges
        max_merges = s.max_merges if s.max_merges is not None else 1 << 62
        while len(vocab) < s.vocab_size and len(m.left) < max_merges:
            first = self._next_valid()
            if first is None or self._below_minimum(first[0]):
                break
            count, pair, eid = first
            a, b = pair >> 32, pair & M32
            batchable = (hf and self.batching and not isinstance(live[pair], list)
                         and self._new_token(a, b) not in vocab.ids)
            room = min(s.vocab_size - len(vocab), max_merges - len(m.left))
            batch = self._collect(first, room) if batchable else [first]
            pos, member, sizes = self._gather(batch)
            if len(batch) > 1:
                bounds = self._bounds(pos, member, len(batch))
                keep = 1
                top = int(bounds[0])
                while keep < len(batch) and batch[keep][0] > top:
                    top = max(top, int(bounds[keep]))
                    keep += 1
                for c, p, e in batch[keep:]:
                    self._push(c, p, e)
                if keep < len(batch):
                    batch = batch[:keep]
                    n_keep = sum(sizes[:keep])
                    pos, member = pos[:n_keep], member[:n_keep]
            n_before = len(vocab)
            a_arr = np.empty(len(batch), dtype=np.int64)
            b_arr = np.empty(len(batch), dtype=np.int64)
            n_arr = np.empty(len(batch), dtype=np.int64)
            for i, (c, p, e) in enumerate(batch):
                a, b = p >> 32, p & M32
                new = vocab.add(self._new_token(a, b), "merge",
                                vocab.base_len[a] + vocab.base_len[b])
                self.tlen[new] = vocab.base_len[new]
                a_arr[i], b_arr[i], n_arr[i] = a, b, new
                if hf:
                    self._drop_live(p, e)
                else:
                    del live[p]
                    self.counts[p] = 0
                m.left.append(a)
                m.right.append(b)
                m.new.append(new)
                m.count.append(c)
            self.reuse_pass = bool((n_arr < n_before).any())
            if pos.size:
                words = self._apply(pos, a_arr[member], b_arr[member], n_arr[member], member,
                                    len(batch))
            else:
                words = [0] * len(batch)
            m.words.extend(words)
            self.passes += 1
            bar.update(len(vocab))
        bar.close(len(vocab))
        return self.merges
