"""WordPiece training (DESIGN.md §3): the likelihood (PMI) merge loop over the flat layout, and
the frequency variant (HF `WordPieceTrainer`, i.e. BPE with the `##` prefix).

Likelihood scoring: the score of a pair is `c_ab / (float64(c_a) * float64(c_b))`, where the
counts are taken over the current segmentation, weighted by word counts. The best pair has the
highest score, then the higher pair count, then the smallest `(left_id, right_id)`. Every
occurrence of the chosen pair is merged (left to right in runs such as `##a ##a ##a`).

A merge of `(a, b)` into `n` changes the token counts of `a`, `b` and `n`, hence the score of
every pair that contains one of them, and only of those (the pairs whose pair count changes
contain one of them too). Scores can go *up* (when `c_a` drops), so a lazy heap alone is wrong;
rescoring every pair of `a` and `b` after every merge is exact but slow (frequent tokens such as
`##s` have thousands of pairs). The selection is exact with less work:

- every pair has a heap entry that bounds its true key; pairs with the new token are rescored
  at once, and the pairs of a token whose count dropped are rescored only once it has dropped by
  more than `slack` (1/64) since they last were (`ref`); until then the token is *stale* and
  entries underestimate scores by at most `phi = (1 + slack)^2`;
- a popped entry is made exact and moved to a small *hot* set, rescored exactly (one vectorised
  pass) at every selection; popping goes on until the next entry, inflated by `phi`, cannot beat
  the best hot pair (with no stale token, entries are exact bounds and whole keys are compared);
- entries that are not the pair's latest pushed key are outdated duplicates and are dropped.

Each merge is one pass over the pair's positions, as in `bpe_trainer`: gather, check, rewrite
the links, emit the pair deltas and group them, as NumPy passes (also for the many merges that
touch a handful of positions). Pairs live in dense slots (count,
ids, latest pushed key as NumPy arrays) and a token -> slots index, so that rescoring a token's
pairs is a gather, not a loop. docs/wordpiece.md has the details and measurements."""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from .alphabet import Initial, Layout, Vocab
from .bpe_trainer import BpeSettings, BpeTrainer, MergeRecord
from .errors import TokcolumnarError
from .progress import Progress

M32 = (1 << 32) - 1
NONE_SCORE = -1.0  # "no entry in the heap" (real scores are > 0)
HEAP_MIN = 1 << 15  # compact the heap once it holds 4x its live entries (and at least this)
SMALL = 16  # below this many heap entries, plain Python beats NumPy's per-call overhead


@dataclass
class WordPieceSettings:
    vocab_size: int
    prefix: str = "##"
    min_frequency: int = 0
    max_merges: int | None = None
    min_score: float | None = None
    max_token_length: int | None = None
    show_progress: bool | None = None
    slack: float = 1 / 64  # rescore a token's pairs once its count fell by this fraction


@dataclass
class LikelihoodRecord(MergeRecord):
    """`MergeRecord` plus each merge's score and the two token counts it was computed from."""

    score: list[float] = field(default_factory=list)
    left_count: list[int] = field(default_factory=list)
    right_count: list[int] = field(default_factory=list)


class _Slots:
    """Pairs in dense slots: key, count, left, right id and the best key pushed to the heap."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.n = 0
        self.count = np.zeros(capacity, dtype=np.int64)
        self.left = np.zeros(capacity, dtype=np.int64)
        self.right = np.zeros(capacity, dtype=np.int64)
        self.pscore = np.full(capacity, NONE_SCORE, dtype=np.float64)
        self.pcount = np.zeros(capacity, dtype=np.int64)
        self.hot = np.zeros(capacity, dtype=bool)
        self.slot_of: dict[int, int] = {}

    def _grow(self, need: int) -> None:
        cap = self.count.size
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for name, fill in (("count", 0), ("left", 0), ("right", 0), ("pscore", NONE_SCORE),
                           ("pcount", 0), ("hot", False)):
            old = getattr(self, name)
            arr = np.full(new_cap, fill, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def add_list(self, keys: list[int]) -> list[int]:
        """`add_many` for a few keys, without NumPy calls."""
        self._grow(self.n + len(keys))
        out = []
        for key in keys:
            i = self.n
            self.left[i] = key >> 32
            self.right[i] = key & M32
            self.slot_of[key] = i
            self.n += 1
            out.append(i)
        return out

    def add_many(self, keys: np.ndarray) -> np.ndarray:
        """New slots for keys not seen before (all of them are new); returns their slots."""
        k = keys.size
        self._grow(self.n + k)
        slots = np.arange(self.n, self.n + k, dtype=np.int64)
        self.left[slots] = keys >> 32
        self.right[slots] = keys & M32
        self.slot_of.update(zip(keys.tolist(), slots.tolist()))
        self.n += k
        return slots


class LikelihoodTrainer:
    """The likelihood WordPiece merge loop on an `Initial` (vocab + layout)."""

    def __init__(self, initial: Initial, settings: WordPieceSettings):
        self.vocab: Vocab = initial.vocab
        self.layout: Layout = initial.layout
        self.n_words = initial.n_words
        self.s = settings
        # ids to come: at most one per merge, and merges are bounded by the symbol positions
        room = max(settings.vocab_size - len(self.vocab), 0)
        if settings.max_merges is not None:
            room = min(room, settings.max_merges)
        cap = len(self.vocab) + min(room, int(np.count_nonzero(self.layout.sym >= 0))) + 1
        self.tcount = np.zeros(cap, dtype=np.int64)
        self.tcf = np.full(cap, np.inf)  # float64 counts, inf for 0 (dead pairs score 0)
        self.tlen = np.zeros(cap, dtype=np.int64)
        self.tlen[: len(self.vocab)] = self.vocab.base_len
        # ref[t]: the largest count of t since all its pairs were last rescored
        self.ref = np.zeros(cap, dtype=np.int64)
        self.stale: set[int] = set()  # tokens with ref > count
        self.slack = settings.slack
        self.phi = (1.0 + settings.slack) ** 2 * (1.0 + 1e-9)
        self.slots = _Slots()
        self.bases: list[np.ndarray] = []
        self.where: dict[int, list[tuple[int, int, int]]] = {}  # slot -> position slices
        self.index: dict[int, set[int]] = {}  # token id -> slots of the pairs containing it
        self.heap: list[tuple[float, int, int, int]] = []
        self.heap_limit = HEAP_MIN
        self.rec = LikelihoodRecord()
        self.rescored = 0  # statistics
        self.pushes = 0
        self.popped = 0
        self.hot = np.zeros(0, dtype=np.int64)  # slots rescored exactly at every selection

    # -- scoring ---------------------------------------------------------------------------
    def _scores(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact scores `c_ab / (float64(c_a) * float64(c_b))` (0 for dead pairs) and counts."""
        sl = self.slots
        c = sl.count[slots]
        tcf = self.tcf
        return c / (tcf[sl.left[slots]] * tcf[sl.right[slots]]), c

    def _set_count(self, t: int, value: int) -> None:
        self.tcount[t] = value
        self.tcf[t] = float(value) if value > 0 else np.inf

    def _eligible_one(self, slot: int, c: int) -> bool:
        if c <= 0 or c < self.s.min_frequency:
            return False
        if self.s.max_token_length is not None:
            sl = self.slots
            return (self.tlen.item(sl.left.item(slot)) + self.tlen.item(sl.right.item(slot))
                    ) <= self.s.max_token_length
        return True

    def _eligible(self, slots: np.ndarray, c: np.ndarray) -> np.ndarray:
        ok = c > 0
        if self.s.min_frequency > 1:
            ok &= c >= self.s.min_frequency
        if self.s.max_token_length is not None:
            sl = self.slots
            ok &= (self.tlen[sl.left[slots]] + self.tlen[sl.right[slots]]
                   ) <= self.s.max_token_length
        return ok

    def _push_better(self, slots: np.ndarray | list[int]) -> None:
        """Rescore `slots`; push those whose key beats the key they have in the heap (hot
        slots are rescored at every selection and have no heap entry)."""
        n = len(slots)
        if n == 0:
            return
        self.rescored += n
        if n <= SMALL:
            self._push_better_py(slots.tolist() if isinstance(slots, np.ndarray) else slots)
            return
        if not isinstance(slots, np.ndarray):
            slots = np.array(slots, dtype=np.int64)
        score, c = self._scores(slots)
        sl = self.slots
        ps, pc = sl.pscore[slots], sl.pcount[slots]
        better = (self._eligible(slots, c) & ~sl.hot[slots]
                  & ((score > ps) | ((score == ps) & (c > pc))))
        if not better.any():
            return
        slots, score, c = slots[better], score[better], c[better]
        sl.pscore[slots] = score
        sl.pcount[slots] = c
        keys = (sl.left[slots] << 32) | sl.right[slots]
        heap, push = self.heap, heapq.heappush
        for s, n, k, i in zip((-score).tolist(), (-c).tolist(), keys.tolist(), slots.tolist()):
            push(heap, (s, n, k, i))
        self.pushes += slots.size

    def _push_better_py(self, slots: list[int]) -> None:
        sl = self.slots
        count, left, right, hot = sl.count, sl.left, sl.right, sl.hot
        pscore, pcount, tcf = sl.pscore, sl.pcount, self.tcf
        heap, push = self.heap, heapq.heappush
        for i in slots:
            c = count.item(i)
            if hot.item(i) or not self._eligible_one(i, c):
                continue
            a, b = left.item(i), right.item(i)
            score = c / (tcf.item(a) * tcf.item(b))
            ps = pscore.item(i)
            if score > ps or (score == ps and c > pcount.item(i)):
                pscore[i] = score
                pcount[i] = c
                push(heap, (-score, -c, (a << 32) | b, i))
                self.pushes += 1

    def _rescore_token(self, t: int) -> None:
        """Rescore every pair of token t (dropping dead ones from its index); t is fresh."""
        self.ref[t] = self.tcount[t]
        self.stale.discard(t)
        s = self.index.get(t)
        if not s:
            return
        if len(s) <= SMALL:
            count = self.slots.count
            dead = [i for i in s if count.item(i) <= 0]
            if dead:
                s.difference_update(dead)
                if not s:
                    del self.index[t]
                    return
            self._push_better_py(list(s))
            self.rescored += len(s)
            return
        ch = np.fromiter(s, dtype=np.int64, count=len(s))
        dead = self.slots.count[ch] <= 0
        if dead.any():
            if dead.all():
                del self.index[t]
                return
            s.difference_update(ch[dead].tolist())
            ch = ch[~dead]
        self._push_better(ch)

    # -- initial state ---------------------------------------------------------------------
    def count_initial(self) -> None:
        lay = self.layout
        sym = lay.sym
        live = sym >= 0
        n = len(self.vocab)
        self.tcount[:n] = np.bincount(sym[live], weights=lay.wcount[live],
                                      minlength=n).astype(np.int64)
        self.ref[:n] = self.tcount[:n]
        t = self.tcount[:n]
        self.tcf[:n] = np.where(t > 0, t.astype(np.float64), np.inf)
        p = np.flatnonzero(live[:-1] & live[1:])
        keys = (sym[p] << 32) | sym[p + 1]
        df = pl.DataFrame({"key": keys, "pos": p, "w": lay.wcount[p]}).sort("key", "pos")
        groups = df.group_by("key", maintain_order=True).agg(pl.col("w").sum(), pl.len())
        gkeys = groups.get_column("key").to_numpy()
        slots = self.slots.add_many(gkeys)
        self.slots.count[slots] = groups.get_column("w").to_numpy()
        self.bases.append(df.get_column("pos").to_numpy())
        ends = np.cumsum(groups.get_column("len").to_numpy())
        starts = ends - groups.get_column("len").to_numpy()
        self.where = {s: [(0, st, en)] for s, st, en in zip(slots.tolist(), starts.tolist(),
                                                            ends.tolist())}
        tok = pl.DataFrame({"slot": np.concatenate([slots, slots]),
                            "tok": np.concatenate([gkeys >> 32, gkeys & M32])}).unique()
        by_tok = tok.group_by("tok").agg("slot")
        self.index = {t: set(s) for t, s in zip(by_tok.get_column("tok").to_list(),
                                                by_tok.get_column("slot").to_list())}
        score, c = self._scores(slots)
        ok = self._eligible(slots, c)
        slots, score, c, gkeys = slots[ok], score[ok], c[ok], gkeys[ok]
        self.slots.pscore[slots] = score
        self.slots.pcount[slots] = c
        self.heap = list(zip((-score).tolist(), (-c).tolist(), gkeys.tolist(), slots.tolist()))
        heapq.heapify(self.heap)
        self.heap_limit = max(HEAP_MIN, 4 * len(self.heap))
        self.pushes += len(self.heap)

    # -- selection -------------------------------------------------------------------------
    def _pop_exact(self) -> tuple[float, int, int, int] | None:
        """Pop the next live entry and return the pair's exact (-score, -count, key, slot), or
        None when the heap is empty. The pair leaves the heap (pushed key cleared)."""
        heap, sl, tc = self.heap, self.slots, self.tcf
        while heap:
            ns, nc, key, slot = heapq.heappop(heap)
            if -ns != sl.pscore.item(slot) or -nc != sl.pcount.item(slot):
                continue  # an outdated duplicate: the pair has a better entry (or none)
            sl.pscore[slot] = NONE_SCORE
            sl.pcount[slot] = 0
            c = sl.count.item(slot)
            if c <= 0 or c < self.s.min_frequency:
                continue
            score = c / (tc.item(key >> 32) * tc.item(key & M32))
            return -score, -c, key, slot
        return None

    def _scan_hot(self) -> tuple[float, int, int, int] | None:
        """The exact key (-score, -count, key, slot) of the best hot pair, by one vectorised
        rescoring of the hot set; dead or ineligible slots leave it, and the pairs far below
        its best go back to the heap."""
        hot = self.hot
        if hot.size == 0:
            return None
        if hot.size <= SMALL:
            return self._scan_hot_py()
        sl = self.slots
        score, c = self._scores(hot)
        ok = self._eligible(hot, c)
        if not ok.all():
            sl.hot[hot[~ok]] = False
            hot, score, c = hot[ok], score[ok], c[ok]
            self.hot = hot
            if hot.size == 0:
                return None
        m = score.max()
        idx = np.flatnonzero(score == m)
        if idx.size > 1:
            cc = c[idx]
            idx = idx[cc == cc.max()]
            if idx.size > 1:
                keys = (sl.left[hot[idx]] << 32) | sl.right[hot[idx]]
                idx = idx[np.argmin(keys):]  # the smallest key first
        i = int(idx[0])
        slot = int(hot[i])
        best = (-float(score[i]), -int(c[i]), (int(sl.left[slot]) << 32) | int(sl.right[slot]),
                slot)
        low = score * (self.phi * self.phi) < m
        if low.any():
            out = hot[low]
            sl.hot[out] = False
            self.hot = hot[~low]
            self._push_better(out)
        return best

    def _scan_hot_py(self) -> tuple[float, int, int, int] | None:
        sl = self.slots
        count, left, right, tcf = sl.count, sl.left, sl.right, self.tcf
        best = None
        keep = []
        for i in self.hot.tolist():
            c = count.item(i)
            if not self._eligible_one(i, c):
                sl.hot[i] = False
                continue
            keep.append(i)
            a, b = left.item(i), right.item(i)
            item = (-(c / (tcf.item(a) * tcf.item(b))), -c, (a << 32) | b, i)
            if best is None or item < best:
                best = item
        if len(keep) < self.hot.size:
            self.hot = np.array(keep, dtype=np.int64)
        return best

    def _next_best(self) -> tuple[float, int, int] | None:
        """The best pair: (score, count, slot), or None when no pair is left.

        Hot pairs are rescored exactly; heap entries are bounds up to the staleness factor
        `phi` of their tokens' counts (exact bounds, compared as whole keys, when no token is
        stale). Entries are popped, made exact and moved to the hot set until the next one
        cannot beat the best; near ties (e.g. every `x` always followed by `##s` scores
        exactly `1/c(##s)`) thus stay hot and are compared by one NumPy pass per merge."""
        heap = self.heap
        best = self._scan_hot()
        exact = not self.stale
        phi = self.phi
        popped = []
        while heap:
            if best is not None:
                ns, nc, key, _ = heap[0]
                if exact:
                    if (ns, nc, key) > best[:3]:
                        break
                elif -ns * phi < -best[0]:
                    break
            item = self._pop_exact()
            if item is None:
                break
            popped.append(item[3])
            if best is None or item < best:
                best = item
        if popped:
            new_hot = np.array(popped, dtype=np.int64)
            self.slots.hot[new_hot] = True
            self.hot = np.concatenate([self.hot, new_hot])
            self.popped += len(popped)
        if best is None:
            return None
        return -best[0], -best[1], best[3]

    # -- one merge -------------------------------------------------------------------------
    def _positions(self, slot: int) -> np.ndarray:
        sl = self.where.pop(slot, [])
        if len(sl) == 1:
            b, st, en = sl[0]
            return self.bases[b][st:en]
        if not sl:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate([self.bases[b][st:en] for b, st, en in sl]))

    def _live(self, pos: np.ndarray, a: int, b: int) -> np.ndarray:
        return self.layout.live_occurrences(pos, a, b)

    def _merge(self, slot: int, a: int, b: int, new: int) -> int:
        """Merge every occurrence of the pair in `slot`; returns the number of words touched.

        One NumPy pass over the pair's positions, also for the many merges that touch only a
        handful of words (likelihood scoring favours rare pairs): sequential semantics, left
        to right, left neighbours as rewritten and right ones as they were."""
        merged, n_words, deltas, plus = self._apply(self._positions(slot), a, b, new)
        if merged == 0:
            raise TokcolumnarError(f"internal error: pair ({a}, {b}) has no occurrence")
        tc = self.tcount
        self._set_count(a, tc.item(a) - merged)
        self._set_count(b, tc.item(b) - merged)  # a == b: both decrements apply
        self._set_count(new, tc.item(new) + merged)
        sl = self.slots
        sl.count[slot] -= merged
        if sl.count.item(slot) > 0:  # cannot happen (every occurrence is merged); stay exact
            self._push_better([slot])
        if deltas is not None:
            ukeys, delta = deltas
            get = sl.slot_of.get
            uslots = [get(k, -1) for k in ukeys]
            fresh = [k for k, i in zip(ukeys, uslots) if i < 0]
            if fresh:
                it = iter(sl.add_list(fresh) if len(fresh) <= SMALL else
                          sl.add_many(np.array(fresh, dtype=np.int64)).tolist())
                uslots = [i if i >= 0 else next(it) for i in uslots]
            if len(uslots) <= SMALL:
                count = sl.count
                for i, d in zip(uslots, delta):
                    count[i] += d
            else:
                sl.count[np.array(uslots, dtype=np.int64)] += np.array(delta, dtype=np.int64)
            self._push_better(self._record_new_pairs(*plus))
        # token counts changed: a and b went down (scores up), new went up (scores down)
        ref = self.ref
        if tc.item(new) > ref.item(new):
            ref[new] = tc.item(new)
        for t in ((a,) if a == b else (a, b)):
            c, r = tc.item(t), ref.item(t)
            if c == 0 or c * (1.0 + self.slack) < r:
                self._rescore_token(t)
            elif c < r:
                self.stale.add(t)
        return n_words

    def _apply(self, pos: np.ndarray, a: int, b: int, new: int):  # noqa: ANN202
        """The merge pass: gather the live occurrences, rewrite the links, group the pair
        deltas. Returns (merged weight, words touched, (keys, deltas) of the pair counts,
        (plus keys, plus positions))."""
        lay = self.layout
        sym = lay.sym
        pos = self._live(pos, a, b)
        if pos.size == 0:
            return 0, 0, None, None
        left_pos, rs = lay.merge_at(pos, new)
        ls = sym[left_pos]
        wc = lay.wcount[pos]
        merged = int(wc.sum())
        w = lay.word_of[pos]
        n_words = 1 + int(np.count_nonzero(w[1:] != w[:-1]))
        has_l = ls >= 0
        has_r = rs >= 0
        ls_l, lp_l, wc_l = ls[has_l], left_pos[has_l], wc[has_l]
        rs_r, p_r, wc_r = rs[has_r], pos[has_r], wc[has_r]
        plus = np.concatenate([(ls_l << 32) | new, (new << 32) | rs_r])
        if not plus.size:
            return merged, n_words, None, None
        pplus = np.concatenate([lp_l, p_r])
        keys = np.concatenate([(ls_l << 32) | a, (b << 32) | rs_r, plus])
        weights = np.concatenate([-wc_l, -wc_r, wc_l, wc_r])
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        first = np.empty(sk.size, dtype=bool)
        first[0] = True
        np.not_equal(sk[1:], sk[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        delta = np.add.reduceat(weights[order], starts)
        return merged, n_words, (sk[starts].tolist(), delta.tolist()), (plus, pplus)

    def _record_new_pairs(self, plus: np.ndarray, pplus: np.ndarray) -> list[int]:
        """Positions of the pairs with the new token (one sorted array for the pass), and the
        token -> pair index. Returns the slots of those pairs that are alive."""
        order = np.lexsort((pplus, plus))
        sk, sp = plus[order], pplus[order]
        first = np.empty(sk.size, dtype=bool)
        first[0] = True
        np.not_equal(sk[1:], sk[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        ends = np.append(starts[1:], sk.size)
        groups = zip(sk[starts].tolist(), starts.tolist(), ends.tolist())
        base = len(self.bases)
        self.bases.append(sp)
        sl = self.slots
        get = sl.slot_of.__getitem__
        count = sl.count
        where, index = self.where, self.index
        out = []
        for key, st, en in groups:
            slot = get(key)
            if count.item(slot) <= 0:
                continue
            out.append(slot)
            lst = where.get(slot)
            if lst is None:
                where[slot] = [(base, st, en)]
            else:
                lst.append((base, st, en))
            for t in (key >> 32, key & M32):
                s = index.get(t)
                if s is None:
                    index[t] = {slot}
                else:
                    s.add(slot)
        return out

    # -- the loop --------------------------------------------------------------------------
    def _new_token(self, a: int, b: int) -> str:
        return self.vocab.joined(a, b, self.s.prefix)

    def _compact_heap(self) -> None:
        """Drop outdated duplicates (entries that are not their pair's pushed key)."""
        heap, sl = self.heap, self.slots
        slots = np.fromiter((e[3] for e in heap), dtype=np.int64, count=len(heap))
        ns = np.fromiter((e[0] for e in heap), dtype=np.float64, count=len(heap))
        nc = np.fromiter((e[1] for e in heap), dtype=np.int64, count=len(heap))
        keep = (-ns == sl.pscore[slots]) & (-nc == sl.pcount[slots])
        heap[:] = [e for e, k in zip(heap, keep.tolist()) if k]
        heapq.heapify(heap)
        self.heap_limit = max(HEAP_MIN, 4 * len(heap))

    def train(self) -> LikelihoodRecord:
        self.count_initial()
        s, vocab, rec, sl = self.s, self.vocab, self.rec, self.slots
        bar = Progress("merging", total=s.vocab_size, enabled=s.show_progress)
        while len(vocab) < s.vocab_size:
            if s.max_merges is not None and len(rec.left) >= s.max_merges:
                break
            if len(self.heap) > self.heap_limit:
                self._compact_heap()
            best = self._next_best()
            if best is None:
                break
            score, count, slot = best
            if s.min_score is not None and score < s.min_score:
                break
            a, b = int(sl.left[slot]), int(sl.right[slot])
            new = vocab.add(self._new_token(a, b), "merge", vocab.base_len[a] + vocab.base_len[b])
            self.tlen[new] = vocab.base_len[new]
            rec.left.append(a)
            rec.right.append(b)
            rec.new.append(new)
            rec.count.append(count)
            rec.score.append(score)
            rec.left_count.append(int(self.tcount[a]))
            rec.right_count.append(int(self.tcount[b]))
            rec.words.append(self._merge(slot, a, b, new))
            bar.update(len(vocab))
        bar.close(len(vocab))
        return rec


# -- the pipeline stage ----------------------------------------------------------------------
def _settings(cfg: Any) -> WordPieceSettings:
    return WordPieceSettings(
        vocab_size=cfg.vocab_size, prefix=cfg.continuing_subword_prefix or "##",
        min_frequency=cfg.min_frequency, max_merges=cfg.max_merges, min_score=cfg.min_score,
        max_token_length=cfg.max_token_length, show_progress=cfg.show_progress)


def train_likelihood(initial: Initial, cfg: Any) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Run the likelihood loop; returns the merges table (with scores and token counts)."""
    from .training import merges_table

    trainer = LikelihoodTrainer(initial, _settings(cfg))
    rec = trainer.train()
    merges = merges_table(rec, initial.vocab.tokens, rec.score).with_columns(
        pl.Series("left_count", rec.left_count, dtype=pl.UInt64),
        pl.Series("right_count", rec.right_count, dtype=pl.UInt64))
    return merges, {"rescored": trainer.rescored, "pushes": trainer.pushes}


def train_frequency(initial: Initial, cfg: Any) -> pl.DataFrame:
    """HF `WordPieceTrainer`: BPE by pair frequency with the continuing prefix; the score
    column is the pair count (the quantity maximised)."""
    from .training import merges_table

    s = _settings(cfg)
    trainer = BpeTrainer(initial, BpeSettings(
        vocab_size=s.vocab_size, min_frequency=cfg.min_frequency, tie_break="id",
        prefix=s.prefix, max_token_length=cfg.max_token_length, max_merges=s.max_merges,
        show_progress=cfg.show_progress))
    rec = trainer.train()
    return merges_table(rec, initial.vocab.tokens, [float(c) for c in rec.count])


def segmented_words(words: pl.DataFrame, initial: Initial) -> pl.DataFrame:
    """`training.words_table` without the group-by: each word's final tokens and ids as Arrow
    lists over the layout's offsets (same schema, less memory at the peak of a run)."""
    import pyarrow as pa

    offsets, ids = initial.layout.segmentation(initial.n_words)
    off = pa.array(offsets, type=pa.int64())
    tok = pl.Series(initial.vocab.tokens, dtype=pl.String).gather(ids)
    tokens = pl.Series("tokens", pa.LargeListArray.from_arrays(off, tok.to_arrow()))
    id_lists = pl.Series("ids", pa.LargeListArray.from_arrays(
        off, pa.array(ids.astype(np.uint32))))
    return words.with_columns(tokens.cast(pl.List(pl.String)), id_lists.cast(pl.List(pl.UInt32)))


def train_wordpiece(words: pl.DataFrame, cfg: Any, normalizer: Any, pretokenizer: Any,
                    timings: dict[str, float]) -> Any:
    """`training.train` hook for `--model wordpiece`: words -> TrainResult."""
    from .training import TrainResult, initial_from_words, vocab_table

    t1 = time.perf_counter()
    initial = initial_from_words(words, cfg)
    timings["initial"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if cfg.wordpiece_scoring == "frequency":
        merges = train_frequency(initial, cfg)
    else:
        merges, _stats = train_likelihood(initial, cfg)
    timings["merge"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    result = TrainResult(cfg, segmented_words(words, initial), merges, vocab_table(initial, merges),
                         normalizer, pretokenizer, timings)
    timings["tables"] = time.perf_counter() - t3
    return result


def wordpiece_model_json(result: Any, vocab: dict[str, int]) -> dict[str, Any]:
    """The HF `WordPiece` model object of a training result."""
    cfg = result.config
    return {"type": "WordPiece", "unk_token": cfg.unk_token or "[UNK]",
            "continuing_subword_prefix": cfg.continuing_subword_prefix or "##",
            "max_input_chars_per_word": 100, "vocab": vocab}
