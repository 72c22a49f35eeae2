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

from .alphabet import REMOVED, SEP, Initial, Layout, Vocab
from .progress import Progress

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
    show_progress: bool | None = None


class _Entries:
    """Queue entries: each is a slice of one pass's sorted position array."""

    def __init__(self) -> None:
        self.bases: list[np.ndarray] = []
        self.base: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.pair: list[int] = []

    def add_base(self, positions: np.ndarray) -> int:
        self.bases.append(positions)
        return len(self.bases) - 1

    def add(self, base: int, start: int, end: int, pair: int) -> int:
        self.base.append(base)
        self.start.append(start)
        self.end.append(end)
        self.pair.append(pair)
        return len(self.pair) - 1

    def positions(self, eid: int) -> np.ndarray:
        return self.bases[self.base[eid]][self.start[eid]:self.end[eid]]


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

    def __init__(self, initial: Initial, settings: BpeSettings):
        self.vocab: Vocab = initial.vocab
        self.layout: Layout = initial.layout
        self.n_words = initial.n_words
        self.s = settings
        self.hf = settings.tie_break == "id"
        self.entries = _Entries()
        self.counts: dict[int, int] = {}
        self.live: dict[int, list[int]] = {}
        self.heap: list = []
        self.merges = MergeRecord()
        self.tlen = np.zeros(max(settings.vocab_size, len(self.vocab)) + 1, dtype=np.int64)
        self.tlen[: len(self.vocab)] = self.vocab.base_len

    # -- queue ---------------------------------------------------------------------------
    def _push(self, count: int, pair: int, eid: int, first: int | None = None) -> None:
        tb = self.s.tie_break
        if tb == "id":
            heapq.heappush(self.heap, ((CMAX - count) << 96) | (pair << 32) | eid)
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
            return CMAX - (item >> 96), (item >> 32) & M64, item & M32, None
        eid = item[2]
        return -item[0], self.entries.pair[eid], eid, item[1]

    # -- length rule -----------------------------------------------------------------------
    def _len_ok(self, left: np.ndarray, right: np.ndarray) -> np.ndarray | None:
        if self.s.max_token_length is None:
            return None
        return (self.tlen[left] + self.tlen[right]) <= self.s.max_token_length

    # -- initial pairs ---------------------------------------------------------------------
    def count_initial_pairs(self) -> None:
        lay = self.layout
        sym = lay.sym
        p = np.flatnonzero((sym[:-1] >= 0) & (sym[1:] >= 0))
        left, right = sym[p], sym[p + 1]
        ok = self._len_ok(left, right)
        if ok is not None:
            p, left, right = p[ok], left[ok], right[ok]
        df = pl.DataFrame({"key": pair_keys(left, right), "pos": p, "w": lay.wcount[p]}).sort(
            "key", "pos")
        groups = df.group_by("key", maintain_order=True).agg(pl.col("w").sum(), pl.len())
        base = self.entries.add_base(df.get_column("pos").to_numpy())
        keys = groups.get_column("key").to_list()
        sums = groups.get_column("w").to_list()
        ends = np.cumsum(groups.get_column("len").to_numpy()).tolist()
        start = 0
        add, live, counts = self.entries.add, self.live, self.counts
        items = []
        for key, w, end in zip(keys, sums, ends):
            eid = add(base, start, end, key)
            live[key] = [eid]
            counts[key] = w
            if self.s.tie_break == "id":
                items.append(((CMAX - w) << 96) | (key << 32) | eid)
            else:
                self._push(w, key, eid)
            start = end
        if items:
            self.heap = items
            heapq.heapify(self.heap)

    # -- one merge -------------------------------------------------------------------------
    def _positions(self, eid: int, pair: int) -> np.ndarray:
        ents = self.live[pair]
        if len(ents) == 1:
            return self.entries.positions(eid)
        pos = np.unique(np.concatenate([self.entries.positions(e) for e in ents]))
        if self.hf:  # HF merges only in the words this entry was created for
            mine = self.entries.positions(eid)
            pos = pos[np.isin(self.layout.word_of[pos], self.layout.word_of[mine])]
        return pos

    def _apply(self, pos: np.ndarray, a: int, b: int, new: int) -> tuple[int, int]:
        """Merge (a, b) -> new at the live occurrences among `pos`; returns the number of
        occurrences merged and of words touched, and queues the new pairs."""
        lay = self.layout
        sym, nxt, prv = lay.sym, lay.nxt, lay.prv
        pos = pos[(sym[pos] == a) & (sym[nxt[pos]] == b)]
        if a == b and pos.size > 1:  # runs `a a a`: merge left to right
            n = pos.size
            chained = np.zeros(n, dtype=bool)
            chained[1:] = nxt[pos[:-1]] == pos[1:]
            idx = np.arange(n)
            run_start = np.maximum.accumulate(np.where(chained, 0, idx))
            pos = pos[((idx - run_start) & 1) == 0]
        if pos.size == 0:
            return 0, 0
        q = nxt[pos]
        r = nxt[q]
        rs = sym[r]
        sym[pos] = new
        sym[q] = REMOVED
        nxt[pos] = r
        prv[r] = pos
        left_pos = prv[pos]
        ls = sym[left_pos]
        wc = lay.wcount[pos]
        has_l = ls >= 0
        has_r = rs >= 0
        ls_l, lp_l, wc_l = ls[has_l], left_pos[has_l], wc[has_l]
        rs_r, p_r, wc_r = rs[has_r], pos[has_r], wc[has_r]
        new_l = np.full(ls_l.size, new, dtype=np.int64)
        new_r = np.full(rs_r.size, new, dtype=np.int64)
        minus_l, minus_r = pair_keys(ls_l, np.full(ls_l.size, a)), pair_keys(
            np.full(rs_r.size, b), rs_r)
        plus_l, plus_r = pair_keys(ls_l, new_l), pair_keys(new_r, rs_r)
        if self.s.max_token_length is not None:
            ok_ml = self._len_ok(ls_l, np.full(ls_l.size, a))
            ok_mr = self._len_ok(np.full(rs_r.size, b), rs_r)
            ok_pl = self._len_ok(ls_l, new_l)
            ok_pr = self._len_ok(new_r, rs_r)
            minus = np.concatenate([minus_l[ok_ml], minus_r[ok_mr]])
            wminus = np.concatenate([wc_l[ok_ml], wc_r[ok_mr]])
            plus_l, lp_l, wc_pl = plus_l[ok_pl], lp_l[ok_pl], wc_l[ok_pl]
            plus_r, p_r, wc_pr = plus_r[ok_pr], p_r[ok_pr], wc_r[ok_pr]
        else:
            minus = np.concatenate([minus_l, minus_r])
            wminus = np.concatenate([wc_l, wc_r])
            wc_pl, wc_pr = wc_l, wc_r
        plus = np.concatenate([plus_l, plus_r])
        pplus = np.concatenate([lp_l, p_r])
        keys = np.concatenate([minus, plus])
        weights = np.concatenate([-wminus, wc_pl, wc_pr])
        if keys.size > 200_000:
            agg = pl.DataFrame({"k": keys, "w": weights}).group_by("k").agg(pl.col("w").sum())
            uk, delta = agg.get_column("k").to_list(), agg.get_column("w").to_list()
        else:
            ukeys, inv = np.unique(keys, return_inverse=True)
            uk = ukeys.tolist()
            delta = np.bincount(inv, weights=weights).astype(np.int64).tolist()
        counts = self.counts
        for k, d in zip(uk, delta):
            if d:
                counts[k] = counts.get(k, 0) + d
        if plus.size:
            self._queue_new_pairs(plus, pplus)
        w = lay.word_of[pos]
        return int(pos.size), int(np.count_nonzero(w[1:] != w[:-1]) + 1)

    def _queue_new_pairs(self, plus: np.ndarray, pplus: np.ndarray) -> None:
        order = np.lexsort((pplus, plus))
        sk, sp = plus[order], pplus[order]
        if sk.size > 1:
            keep = np.ones(sk.size, dtype=bool)
            keep[1:] = (sk[1:] != sk[:-1]) | (sp[1:] != sp[:-1])
            if not keep.all():
                sk, sp = sk[keep], sp[keep]
        cut = np.flatnonzero(sk[1:] != sk[:-1]) + 1
        starts = [0, *cut.tolist()]
        ends = [*cut.tolist(), int(sk.size)]
        keys = sk[starts].tolist()
        base = self.entries.add_base(sp)
        counts, live, add = self.counts, self.live, self.entries.add
        for key, s, e in zip(keys, starts, ends):
            c = counts.get(key, 0)
            if c <= 0:
                continue
            if self.hf:
                eid = add(base, s, e, key)
                live.setdefault(key, []).append(eid)
            else:  # one live entry per pair: fold older positions into the new entry
                old = live.get(key)
                if old:
                    merged = np.unique(np.concatenate(
                        [self.entries.positions(x) for x in old] + [sp[s:e]]))
                    eid = add(self.entries.add_base(merged), 0, merged.size, key)
                else:
                    eid = add(base, s, e, key)
                live[key] = [eid]
            self._push(c, key, eid)

    # -- the loop --------------------------------------------------------------------------
    def train(self) -> MergeRecord:
        self.count_initial_pairs()
        s = self.s
        vocab, counts, live = self.vocab, self.counts, self.live
        prefix = s.prefix
        bar = Progress("merging", total=s.vocab_size, enabled=s.show_progress)
        hf = self.hf
        heap = self.heap
        while len(vocab) < s.vocab_size and heap:
            count, pair, eid, tie = self._pop()
            cur = counts.get(pair, 0)
            if not hf and eid not in live.get(pair, ()):
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
            if count < 1 or count < s.min_frequency:
                break
            a, b = pair >> 32, pair & M32
            right = vocab.tokens[b]
            if prefix and right.startswith(prefix):
                right = right[len(prefix):]
            new_token = vocab.tokens[a] + right
            new = vocab.add(new_token, "merge", vocab.base_len[a] + vocab.base_len[b])
            self.tlen[new] = vocab.base_len[new]
            pos = self._positions(eid, pair)
            if hf:
                ents = live[pair]
                ents.remove(eid)
                if not ents:
                    del live[pair]
            else:
                del live[pair]
                counts[pair] = 0
            n_occ, n_words = self._apply(pos, a, b, new)
            m = self.merges
            m.left.append(a)
            m.right.append(b)
            m.new.append(new)
            m.count.append(count)
            m.words.append(n_words)
            bar.update(len(vocab))
        bar.close(len(vocab))
        return self.merges
