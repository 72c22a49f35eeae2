"""WordPiece training (docs/architecture.md, "WordPiece"): the likelihood (PMI) merge loop over the
flat layout. (The frequency variant, HF's `WordPieceTrainer`, is the BPE loop with the `##`
prefix: `polars_engine.merge_loop`.)

Likelihood scoring: the score of a pair is `c_ab / (float64(c_a) * float64(c_b))`, where the counts
are taken over the current segmentation, weighted by word counts. The best pair has the highest
score, then the higher pair count, then the smallest `(left_id, right_id)`. Every occurrence of the
chosen pair is merged (left to right in runs such as `##a ##a ##a`).

A merge of `(a, b)` into `n` changes the token counts of `a`, `b` and `n`, hence the score of every
pair that contains one of them, and only of those (the pairs whose pair count changes contain one of
them too). Scores can go *up* (when `c_a` drops), so a lazy heap alone is wrong; rescoring every
pair of `a` and `b` after every merge is exact but slow (frequent tokens such as `##s` have
thousands of pairs). The selection is exact with less work:

- every pair has a heap entry that bounds its true key; pairs with the new token are rescored
  at once, and the pairs of a token whose count dropped are rescored only once it has dropped by
  more than `slack` (1/64) since they last were (`ref`); until then the token is *stale* and
  entries underestimate scores by at most `phi = (1 + slack)^2`;
- a popped entry is made exact and moved to a small *hot* set, rescored exactly (one vectorised
  pass) at every selection; popping goes on until the next entry, inflated by `phi`, cannot beat
  the best hot pair (with no stale token, entries are exact bounds and whole keys are compared);
  a hot pair goes back to the heap once it is far below the best of each of the last `HOLD`
  merges (a tie cluster stays hot while a few new pairs score above it);
- entries that are not the pair's latest pushed key are outdated duplicates and are dropped.

Each merge is one pass over the pair's positions, as in `bpe_trainer`: gather, check, rewrite the
links, emit the pair deltas and group them — NumPy passes for large merges, plain Python over the
positions (`tiny_merge_pass`, same changes) when there are at most `TINY` of them (most merges:
likelihood scoring favours rare pairs). The loop merges one pair per pass; docs/architecture.md
("WordPiece") says why batching would not pay. Pairs live in dense slots (count, ids, latest
pushed key as NumPy arrays) and a token -> slots index, so that rescoring a token's pairs is a
gather, not a loop. docs/wordpiece.md has the details and measurements."""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..layout import Layout, id_limit, is_symbol
from ..progress import Progress
from .bpe import MergeRecord
from .passes import M32, NewPairs, group_pairs, summed_merge_pass
from .symbols import Initial, Vocab

NONE_SCORE = -1.0  # "no entry in the heap" (real scores are > 0)
HEAP_MIN = 1 << 15  # compact the heap once it holds 4x its live entries (and at least this)
SMALL = 16  # below this many heap entries, plain Python beats NumPy's per-call overhead
#: up to this many candidate positions, a merge pass in plain Python (`tiny_merge_pass`) beats
#: the NumPy pass's fixed cost (~25 NumPy calls); most likelihood merges touch 1-4 positions
TINY = 24
#: a hot pair goes back to the heap once it is far below the best of each of the last HOLD
#: merges (not of the last one only: see `_scan_hot`)
HOLD = 64


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

    score: array[float] = field(default_factory=lambda: array("d"))
    left_count: array[int] = field(default_factory=lambda: array("q"))
    right_count: array[int] = field(default_factory=lambda: array("q"))


def tiny_merge_pass(layout: Layout, positions: list[int], a: int, b: int, new: int
                    ) -> tuple[int, int, tuple[list[int], list[int]] | None, NewPairs | None]:
    """`LikelihoodTrainer._apply` for a few candidate positions (ascending), in plain Python:
    the same live test, link rewrite and pair-count changes as `live_occurrences` +
    `summed_merge_pass` (its changes summed, its new pairs sorted), one position after the other.

    Sequential left to right is the NumPy pass's semantics: an occurrence's left neighbour is
    read after the merges to its left (as the pass reads it after all merges, which never
    change a symbol to the left of theirs) and its right neighbour before the merges to its
    right; in a run `a a a` the merge at the first position removes the second symbol, so the
    second position fails the live test, as `live_occurrences` keeps every other one."""
    sym, next1, merge1 = layout.sym, layout.next1, layout.merge1
    limit = id_limit(sym.dtype)  # a symbol's id: in range(0, limit)
    word_of, word_count = layout.word, layout.word_count  # word_of(p): p's word
    merged = n_words = 0
    last_word = -1
    change: dict[int, int] = {}  # pair key -> summed count change
    created: dict[int, set[int]] = {}  # new pair key -> its left positions
    for p in positions:
        # live: the pair still sits here (stale positions of the index are skipped)
        if sym.item(p) != a:
            continue
        if sym.item(next1(p)) != b:
            continue
        word = word_of(p)
        w = word_count.item(word)
        merged += w
        if word != last_word:  # positions ascend, so a word's occurrences are adjacent
            n_words += 1
            last_word = word
        # rewrite the links as `Layout.merge_at`: p becomes `new`, its right neighbour leaves
        left_pos, right_sym = merge1(p, new)
        # the four changes of `merge_pass` (a boundary neighbour, no id, gives none)
        left_sym = sym.item(left_pos)
        if 0 <= left_sym < limit:
            k = (left_sym << 32) | a
            change[k] = change.get(k, 0) - w
            k = (left_sym << 32) | new
            change[k] = change.get(k, 0) + w
            created.setdefault(k, set()).add(left_pos)
        if 0 <= right_sym < limit:
            k = (b << 32) | right_sym
            change[k] = change.get(k, 0) - w
            k = (new << 32) | right_sym
            change[k] = change.get(k, 0) + w
            created.setdefault(k, set()).add(p)
    if not created:
        return merged, n_words, None, None
    keys = sorted(change)
    deltas = (keys, [change[k] for k in keys])
    new_keys = sorted(created)
    flat: list[int] = []
    starts, ends = [], []
    for k in new_keys:
        starts.append(len(flat))
        flat.extend(sorted(created[k]))
        ends.append(len(flat))
    return merged, n_words, deltas, NewPairs(np.array(flat, dtype=np.int32), new_keys, starts,
                                             ends)


class PairTable:
    """Pairs in dense slots: key, count, left, right id and the best key pushed to the heap,
    and where the pair's positions are: the first slice of the position bases holding them
    (`base`, -1 when none; `start`, `end`) in arrays, any further ones in `more` (few pairs:
    a pair gets its positions when it is created, and further ones only when a later merge
    makes it again). A dict of lists of tuples took ~250 bytes per pair, 12 here."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.n = 0
        self.count = np.zeros(capacity, dtype=np.int64)
        self.left = np.zeros(capacity, dtype=np.int64)
        self.right = np.zeros(capacity, dtype=np.int64)
        self.pscore = np.full(capacity, NONE_SCORE, dtype=np.float64)
        self.pcount = np.zeros(capacity, dtype=np.int64)
        self.hot = np.zeros(capacity, dtype=bool)
        self.base = np.full(capacity, -1, dtype=np.int32)
        self.start = np.zeros(capacity, dtype=np.int32)
        self.end = np.zeros(capacity, dtype=np.int32)
        self.more: dict[int, list[tuple[int, int, int]]] = {}
        self.slot_of: dict[int, int] = {}

    def _grow(self, need: int) -> None:
        cap = self.count.size
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        for name, fill in (("count", 0), ("left", 0), ("right", 0), ("pscore", NONE_SCORE),
                           ("pcount", 0), ("hot", False), ("base", -1), ("start", 0),
                           ("end", 0)):
            old = getattr(self, name)
            arr = np.full(new_cap, fill, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def add_slice(self, slot: int, base: int, start: int, end: int) -> None:
        """Positions `start:end` of position base `base` hold occurrences of the pair."""
        if self.base.item(slot) < 0:
            self.base[slot] = base
            self.start[slot] = start
            self.end[slot] = end
        else:
            self.more.setdefault(slot, []).append((base, start, end))

    def take_slices(self, slot: int) -> list[tuple[int, int, int]]:
        """The pair's slices (base, start, end), which it no longer has afterwards."""
        base = self.base.item(slot)
        if base < 0:
            return []
        self.base[slot] = -1
        first = (base, self.start.item(slot), self.end.item(slot))
        more = self.more.pop(slot, None)
        return [first] if more is None else [first, *more]

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
        self.settings = settings
        # ids to come: at most one per merge, and merges are bounded by the symbol positions
        room = max(settings.vocab_size - len(self.vocab), 0)
        if settings.max_merges is not None:
            room = min(room, settings.max_merges)
        cap = len(self.vocab) + min(room, int(np.count_nonzero(is_symbol(self.layout.sym)))) + 1
        self.token_count = np.zeros(cap, dtype=np.int64)
        # float64 token counts, inf for 0 (so dead pairs score 0)
        self.token_count_f = np.full(cap, np.inf)
        self.token_length = np.zeros(cap, dtype=np.int64)
        self.token_length[: len(self.vocab)] = self.vocab.base_len
        # ref[t]: the largest count of t since all its pairs were last rescored
        self.ref = np.zeros(cap, dtype=np.int64)
        self.stale: set[int] = set()  # tokens with ref > count
        self.slack = settings.slack
        # how far a heap entry's score may sit below its pair's exact score (stale tokens)
        self.phi = (1.0 + settings.slack) ** 2 * (1.0 + 1e-9)
        #: a pair is eligible when its count is > 0 (no --min-frequency above 1, no
        #: --max-token-length)
        self.count_only = settings.min_frequency <= 1 and settings.max_token_length is None
        self.pairs = PairTable()
        self.bases: list[np.ndarray] = []
        self.index: dict[int, set[int]] = {}  # token id -> slots of the pairs containing it
        self.heap: list[tuple[float, int, int, int]] = []
        self.heap_limit = HEAP_MIN
        self.rec = LikelihoodRecord()  # the merges made so far (the merges table's columns)
        self.hot = np.zeros(0, dtype=np.int64)  # slots rescored exactly at every selection
        self.recent: deque[float] = deque(maxlen=HOLD)  # the scores of the last merges

    # -- scoring ---------------------------------------------------------------------------
    def _scores(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact scores `c_ab / (float64(c_a) * float64(c_b))` (0 for dead pairs) and counts."""
        pairs = self.pairs
        c = pairs.count[slots]
        count_f = self.token_count_f
        return c / (count_f[pairs.left[slots]] * count_f[pairs.right[slots]]), c

    def _set_count(self, t: int, value: int) -> None:
        self.token_count[t] = value
        self.token_count_f[t] = float(value) if value > 0 else np.inf

    def _eligible_one(self, slot: int, c: int) -> bool:
        if c <= 0 or c < self.settings.min_frequency:
            return False
        if self.settings.max_token_length is not None:
            pairs, length = self.pairs, self.token_length
            return (length.item(pairs.left.item(slot)) + length.item(pairs.right.item(slot))
                    ) <= self.settings.max_token_length
        return True

    def _eligible(self, slots: np.ndarray, c: np.ndarray) -> np.ndarray:
        ok = c > 0
        if self.settings.min_frequency > 1:
            ok &= c >= self.settings.min_frequency
        if self.settings.max_token_length is not None:
            pairs = self.pairs
            ok &= (self.token_length[pairs.left[slots]] + self.token_length[pairs.right[slots]]
                   ) <= self.settings.max_token_length
        return ok

    def _push_better(self, slots: np.ndarray | list[int]) -> None:
        """Rescore `slots`; push those whose key beats the key they have in the heap (hot
        slots are rescored at every selection and have no heap entry)."""
        n = len(slots)
        if n == 0:
            return
        if n <= SMALL:
            self._push_better_py(slots.tolist() if isinstance(slots, np.ndarray) else slots)
            return
        if not isinstance(slots, np.ndarray):
            slots = np.array(slots, dtype=np.int64)
        score, c = self._scores(slots)
        pairs = self.pairs
        ps, pc = pairs.pscore[slots], pairs.pcount[slots]
        better = (self._eligible(slots, c) & ~pairs.hot[slots]
                  & ((score > ps) | ((score == ps) & (c > pc))))
        if not better.any():
            return
        slots, score, c = slots[better], score[better], c[better]
        pairs.pscore[slots] = score
        pairs.pcount[slots] = c
        keys = (pairs.left[slots] << 32) | pairs.right[slots]
        heap, push = self.heap, heapq.heappush
        for s, n, k, i in zip((-score).tolist(), (-c).tolist(), keys.tolist(), slots.tolist()):
            push(heap, (s, n, k, i))

    def _push_better_py(self, slots: list[int]) -> None:
        pairs = self.pairs
        count, left, right, hot = pairs.count, pairs.left, pairs.right, pairs.hot
        pscore, pcount, count_f = pairs.pscore, pairs.pcount, self.token_count_f
        heap, push = self.heap, heapq.heappush
        for i in slots:
            c = count.item(i)
            if hot.item(i) or not self._eligible_one(i, c):
                continue
            a, b = left.item(i), right.item(i)
            score = c / (count_f.item(a) * count_f.item(b))
            ps = pscore.item(i)
            if score > ps or (score == ps and c > pcount.item(i)):
                pscore[i] = score
                pcount[i] = c
                push(heap, (-score, -c, (a << 32) | b, i))

    def _rescore_token(self, t: int) -> None:
        """Rescore every pair of token t (dropping dead ones from its index); t is fresh."""
        self.ref[t] = self.token_count[t]
        self.stale.discard(t)
        s = self.index.get(t)
        if not s:
            return
        if len(s) <= SMALL:
            count = self.pairs.count
            dead = [i for i in s if count.item(i) <= 0]
            if dead:
                s.difference_update(dead)
                if not s:
                    del self.index[t]
                    return
            self._push_better_py(list(s))
            return
        ch = np.fromiter(s, dtype=np.int64, count=len(s))
        dead = self.pairs.count[ch] <= 0
        if dead.any():
            if dead.all():
                del self.index[t]
                return
            s.difference_update(ch[dead].tolist())
            ch = ch[~dead]
        self._push_better(ch)

    # -- initial state ---------------------------------------------------------------------
    def count_initial(self) -> None:
        """Token counts, pair counts and the pair positions of the initial layout; every
        eligible pair enters the heap with its exact score."""
        layout = self.layout
        live = is_symbol(layout.sym)
        n = len(self.vocab)
        counts = np.bincount(layout.sym[live], weights=layout.weights(np.flatnonzero(live)),
                             minlength=n).astype(np.int64)
        self.token_count[:n] = counts
        self.ref[:n] = counts
        self.token_count_f[:n] = np.where(counts > 0, counts.astype(np.float64), np.inf)
        groups = group_pairs(layout, n)
        keys = groups.keys
        slots = self.pairs.add_many(keys)
        self.pairs.count[slots] = groups.counts
        self.bases.append(groups.positions)
        self.pairs.base[slots] = 0
        self.pairs.start[slots] = groups.starts
        self.pairs.end[slots] = groups.ends
        # token -> the slots of the pairs it is part of
        by_token = (pl.DataFrame({"slot": np.concatenate([slots, slots]),
                                  "tok": np.concatenate([keys >> 32, keys & M32])}).unique()
                    .group_by("tok").agg("slot"))
        self.index = {t: set(s) for t, s in zip(by_token.get_column("tok").to_list(),
                                                by_token.get_column("slot").to_list())}
        score, c = self._scores(slots)
        ok = self._eligible(slots, c)
        slots, score, c, keys = slots[ok], score[ok], c[ok], keys[ok]
        self.pairs.pscore[slots] = score
        self.pairs.pcount[slots] = c
        self.heap = list(zip((-score).tolist(), (-c).tolist(), keys.tolist(), slots.tolist()))
        heapq.heapify(self.heap)
        self.heap_limit = max(HEAP_MIN, 4 * len(self.heap))

    # -- selection -------------------------------------------------------------------------
    def _pop_exact(self) -> tuple[float, int, int, int] | None:
        """Pop the next live entry and return the pair's exact (-score, -count, key, slot), or
        None when the heap is empty. The pair leaves the heap (pushed key cleared)."""
        heap, pairs, count_f = self.heap, self.pairs, self.token_count_f
        while heap:
            neg_score, neg_count, key, slot = heapq.heappop(heap)
            if -neg_score != pairs.pscore.item(slot) or -neg_count != pairs.pcount.item(slot):
                continue  # an outdated duplicate: the pair has a better entry (or none)
            pairs.pscore[slot] = NONE_SCORE
            pairs.pcount[slot] = 0
            c = pairs.count.item(slot)
            if c <= 0 or c < self.settings.min_frequency:
                continue
            score = c / (count_f.item(key >> 32) * count_f.item(key & M32))
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
        pairs = self.pairs
        score, c = self._scores(hot)
        if self.count_only:
            # eligible is c > 0, i.e. score > 0: the dead pairs (score 0) leave with the low
            # ones below (`_push_better` does not push them); a scan of a few NumPy calls, as
            # it runs before every merge
            m = score.max()
            if m <= 0:
                pairs.hot[hot] = False
                self.hot = hot[:0]
                return None
        else:
            ok = self._eligible(hot, c)
            if not ok.all():
                pairs.hot[hot[~ok]] = False
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
                keys = (pairs.left[hot[idx]] << 32) | pairs.right[hot[idx]]
                idx = idx[np.argmin(keys):]  # the smallest key first
        i = int(idx[0])
        slot = int(hot[i])
        key = (int(pairs.left[slot]) << 32) | int(pairs.right[slot])
        best = (-float(score[i]), -int(c[i]), key, slot)
        # the level a hot pair must stay near: the lowest best of the last HOLD merges, so
        # that a cluster of ties (below) is not sent back to the heap, and popped again in
        # full, when a few new pairs score far above it for a few merges
        level = min(m, min(self.recent)) if self.recent else m
        phi_squared = self.phi * self.phi
        low = score < level / phi_squared
        if low.any():
            out = hot[low]
            pairs.hot[out] = False
            self.hot = hot[~low]
            self._push_better(out)
        return best

    def _scan_hot_py(self) -> tuple[float, int, int, int] | None:
        pairs = self.pairs
        count, left, right, count_f = pairs.count, pairs.left, pairs.right, self.token_count_f
        best = None
        keep = []
        for i in self.hot.tolist():
            c = count.item(i)
            if not self._eligible_one(i, c):
                pairs.hot[i] = False
                continue
            keep.append(i)
            a, b = left.item(i), right.item(i)
            item = (-(c / (count_f.item(a) * count_f.item(b))), -c, (a << 32) | b, i)
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
                neg_score, neg_count, key, _ = heap[0]
                if exact:  # the top entry's key is exact: it cannot beat a greater key
                    if (neg_score, neg_count, key) > best[:3]:
                        break
                elif -neg_score * phi < -best[0]:  # even its bound times phi is below best
                    break
            item = self._pop_exact()
            if item is None:
                break
            popped.append(item[3])
            if best is None or item < best:
                best = item
        if popped:
            new_hot = np.array(popped, dtype=np.int64)
            self.pairs.hot[new_hot] = True
            self.hot = np.concatenate([self.hot, new_hot])
        if best is None:
            return None
        self.recent.append(-best[0])
        return -best[0], -best[1], best[3]

    # -- one merge -------------------------------------------------------------------------
    def _positions(self, slot: int) -> np.ndarray:
        pairs = self.pairs.take_slices(slot)
        if len(pairs) == 1:
            b, st, en = pairs[0]
            return self.bases[b][st:en]
        if not pairs:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate([self.bases[b][st:en] for b, st, en in pairs]))

    def _merge(self, slot: int, a: int, b: int, new: int) -> int:
        """Merge every occurrence of the pair in `slot`; returns the number of words touched.

        One pass over the pair's positions (`_apply`: NumPy, or plain Python when there are
        at most `TINY` of them, as for most merges: likelihood scoring favours rare pairs):
        sequential semantics, left to right, left neighbours as rewritten and right ones as
        they were."""
        merged, n_words, deltas, plus = self._apply(self._positions(slot), a, b, new)
        if merged == 0:  # the best pair's count is the weight of its live occurrences
            raise RuntimeError(f"pair ({a}, {b}) has no live occurrence")
        token_count = self.token_count
        self._set_count(a, token_count.item(a) - merged)
        self._set_count(b, token_count.item(b) - merged)  # a == b: both decrements apply
        self._set_count(new, token_count.item(new) + merged)
        pairs = self.pairs
        pairs.count[slot] -= merged  # every occurrence is merged: the pair is gone
        if deltas is not None:
            ukeys, delta = deltas
            get = pairs.slot_of.get
            uslots = [get(k, -1) for k in ukeys]
            fresh = [k for k, i in zip(ukeys, uslots) if i < 0]
            if fresh:
                it = iter(pairs.add_list(fresh) if len(fresh) <= SMALL else
                          pairs.add_many(np.array(fresh, dtype=np.int64)).tolist())
                uslots = [i if i >= 0 else next(it) for i in uslots]
            if len(uslots) <= SMALL:
                count = pairs.count
                for i, d in zip(uslots, delta):
                    count[i] += d
            else:
                pairs.count[np.array(uslots, dtype=np.int64)] += np.array(delta, dtype=np.int64)
            self._push_better(self._record_new_pairs(plus))
        # token counts changed: a and b went down (scores up), new went up (scores down)
        ref = self.ref
        if token_count.item(new) > ref.item(new):
            ref[new] = token_count.item(new)
        for t in ((a,) if a == b else (a, b)):
            c, r = token_count.item(t), ref.item(t)
            if c == 0 or c * (1.0 + self.slack) < r:
                self._rescore_token(t)
            elif c < r:
                self.stale.add(t)
        return n_words

    def _apply(self, pos: np.ndarray, a: int, b: int,
               new: int) -> tuple[int, int, tuple[list[int], list[int]] | None, NewPairs | None]:
        """The merge pass (`passes.summed_merge_pass`) over the live occurrences of (a, b). Returns
        the merged weight, the words touched, the summed pair-count changes and the new pairs
        (None when the merges left no neighbours). A pass over at most `TINY` positions runs
        as `tiny_merge_pass` (plain Python over those positions only)."""
        if pos.size <= TINY:
            return tiny_merge_pass(self.layout, pos.tolist(), a, b, new)
        pos = self.layout.live_occurrences(pos, a, b)
        if pos.size == 0:
            return 0, 0, None, None
        weight = self.layout.weights(pos)
        word = self.layout.words(pos)
        n_words = 1 + int(np.count_nonzero(word[1:] != word[:-1]))
        keys, sums, new_pairs = summed_merge_pass(self.layout, pos, a, b, new)
        if new_pairs is None:
            return int(weight.sum()), n_words, None, None
        positions, new_keys, bounds = new_pairs
        limits = bounds.tolist()
        return (int(weight.sum()), n_words, (keys.tolist(), sums.tolist()),
                NewPairs(positions, new_keys.tolist(), limits[:-1], limits[1:]))

    def _record_new_pairs(self, new: NewPairs) -> list[int]:
        """Index the positions of the pairs with the new token (one sorted array for the
        pass) and the token -> pair index. Returns the slots of those pairs that are alive."""
        base = len(self.bases)
        self.bases.append(new.positions)
        pairs = self.pairs
        slot_of = pairs.slot_of.__getitem__
        count = pairs.count
        add_slice, index = pairs.add_slice, self.index
        alive = []
        for key, start, end in zip(new.keys, new.starts, new.ends):
            slot = slot_of(key)
            if count.item(slot) <= 0:
                continue
            alive.append(slot)
            add_slice(slot, base, start, end)
            for t in (key >> 32, key & M32):
                token_slots = index.get(t)
                if token_slots is None:
                    index[t] = {slot}
                else:
                    token_slots.add(slot)
        return alive

    # -- the loop --------------------------------------------------------------------------
    def _new_token(self, a: int, b: int) -> str:
        return self.vocab.joined(a, b, self.settings.prefix)

    def _compact_heap(self) -> None:
        """Drop outdated duplicates (entries that are not their pair's pushed key)."""
        heap, pairs = self.heap, self.pairs
        slots = np.fromiter((e[3] for e in heap), dtype=np.int64, count=len(heap))
        neg_score = np.fromiter((e[0] for e in heap), dtype=np.float64, count=len(heap))
        neg_count = np.fromiter((e[1] for e in heap), dtype=np.int64, count=len(heap))
        keep = (-neg_score == pairs.pscore[slots]) & (-neg_count == pairs.pcount[slots])
        heap[:] = [e for e, k in zip(heap, keep.tolist()) if k]
        heapq.heapify(heap)
        self.heap_limit = max(HEAP_MIN, 4 * len(heap))

    def train(self, resumed: bool = False,
              on_pass: Callable[[LikelihoodTrainer], None] | None = None) -> LikelihoodRecord:
        """Run the loop (continue it, `resumed`, on a trainer restored from a checkpoint).
        `on_pass(self)` runs before each merge, when every field is the loop's state (the
        checkpoint writer of `--resume`)."""
        if not resumed:  # pair counts, token counts and the first scores (a resumed run has them)
            self.count_initial()
        settings, vocab, record, pairs = self.settings, self.vocab, self.rec, self.pairs
        target = settings.vocab_size - len(vocab)
        if settings.max_merges is not None:
            target = min(target, settings.max_merges)
        bar = Progress("merging", total=target, unit="merges", enabled=settings.show_progress)
        while len(vocab) < settings.vocab_size:
            # --max-merges: the merges made, not the tokens, are counted
            if settings.max_merges is not None and len(record.left) >= settings.max_merges:
                break
            # the state is whole here: the checkpoint writer may save it
            if on_pass is not None:
                on_pass(self)
            # outdated duplicates dropped once the heap has grown past its limit
            if len(self.heap) > self.heap_limit:
                self._compact_heap()
            # the pair with the best exact score (ties: higher count, then smaller key)
            best = self._next_best()
            if best is None:  # no eligible pair left
                break
            score, count, slot = best
            if settings.min_score is not None and score < settings.min_score:
                break
            # the new token: the two parts joined (the right one without its ## prefix)
            left, right = int(pairs.left[slot]), int(pairs.right[slot])
            new = vocab.add(self._new_token(left, right), "merge",
                            vocab.base_len[left] + vocab.base_len[right])
            self.token_length[new] = vocab.base_len[new]
            # the merge recorded with the counts its score was computed from
            record.left.append(left)
            record.right.append(right)
            record.new.append(new)
            record.count.append(count)
            record.score.append(score)
            record.left_count.append(int(self.token_count[left]))
            record.right_count.append(int(self.token_count[right]))
            # every occurrence merged (`_merge`, which updates the counts and scores); the number
            # of words it touched is recorded
            record.words.append(self._merge(slot, left, right, new))
            bar.update(len(record.left), pair=count)  # a clock check between lines
        bar.close(len(record.left))
        return record
