"""The crossing filter: where a long word may be cut before the BPE merge loop. Long words are
cut where the merge table proves that no merge can ever join the two sides (`CrossingFilter`):
the pieces merge exactly as the whole word would, and they repeat across words (a run of CJK
characters, one byte-level pre-token, is mostly a handful of short pieces seen many times), so
only the distinct pieces go through the merge loop (`model.BPEModel.encode_symbols`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...buffers import run_index

CROSSING_FILTER_BITS = 22  # the crossing filter's table: 4 Mi flags (4 MiB)
SIDE_TABLE_MAX_BITS = 22  # the crossing filter's tables of one side: at most 4 Mi flags each
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing of the packed windows


@dataclass
class CrossingFilter:
    """Where a word may be cut: before symbol p, if no merge `(a, b)` can have `a` ending and
    `b` starting there. Such a merge needs `a`'s last characters right before p and `b`'s
    first ones from p on; with `a`'s last `k <= K` and `b`'s first `m <= K` characters (all of
    them when shorter than K) as the pattern of class (k, m), a boundary that matches no
    pattern of any class can never be crossed, and cutting there changes no merge: each side
    merges alone exactly as inside the word (the lowest-rank pair of a side is the lowest of
    the word whenever the word merges on that side).

    The patterns sit in a hashed table of flags: a false positive only keeps a boundary uncut,
    so the table needs no exact check. Characters are packed `bits` each into 64-bit windows
    of K symbols left and K right of the boundary (code 0: outside the word, or a symbol no
    merge uses, which no pattern contains)."""

    code: np.ndarray  # symbol id -> code (0 when no merge pattern has it)
    bits: int
    k: int  # K: characters kept on each side
    classes: list[tuple[int, int]]  # (k, m) present, the shortest first
    table: np.ndarray  # bool, 2**CROSSING_FILTER_BITS flags
    # [k]: per packed k symbols, whether they are the last k of some pattern's left side of
    # length k (`tails`) or the first k of its right side of length k (`heads`); None where
    # 2**(bits*k) flags would be too many (the side is then not tested alone)
    tails: list[np.ndarray | None] = field(default_factory=list)
    heads: list[np.ndarray | None] = field(default_factory=list)
    # per class, the boundaries it closed so far (the order classes are tried in)
    closed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if len(self.closed) != len(self.classes):
            # the static order first: shortest patterns, then the most numerous
            self.closed = -np.arange(1, len(self.classes) + 1, dtype=np.int64)

    @classmethod
    def build(cls, vocab: dict[str, int], merges: list[tuple[str, str]]
              ) -> CrossingFilter | None:
        """The filter of a BPE without prefix, suffix or end-of-word token (the initial
        symbols are then the characters); None when the characters are too many to pack.
        NumPy over the merges' edge characters (built before the first batch: a Python loop
        over the merges was a tenth of a second of every encoding run's start-up)."""
        single = {t: i for t, i in vocab.items() if len(t) == 1}
        # each merge's last 3 characters of its left part and first 3 of its right part, as
        # code points in (n, 3) arrays: the tails right-aligned, the heads left-aligned, 0
        # where a part is shorter (no character is U+0000 in both a merge and the padding's
        # place: the lengths say which cells are characters)
        tail_cps, tail_len = _edge_code_points([a[-3:] for a, _ in merges], right=True)
        head_cps, head_len = _edge_code_points([b[:3] for _, b in merges], right=False)
        # code point -> symbol id of the one-character token (-1: none), over the code
        # points the edges hold
        cps = np.array([ord(t) for t in single], dtype=np.int64)
        ids = np.array(list(single.values()), dtype=np.int64)
        order = np.argsort(cps)
        cps, ids = cps[order], ids[order]

        def symbol_of(cp: np.ndarray) -> np.ndarray:
            if not len(cps):
                return np.full(cp.shape, -1, dtype=np.int64)
            at = np.minimum(np.searchsorted(cps, cp), len(cps) - 1)
            return np.where(cps[at] == cp, ids[at], -1)

        tail_sym, head_sym = symbol_of(tail_cps), symbol_of(head_cps)
        in_tail = np.arange(3) >= 3 - tail_len[:, None]  # the cells holding a character
        in_head = np.arange(3) < head_len[:, None]
        used = np.unique(np.concatenate([tail_sym[in_tail & (tail_sym >= 0)],
                                         head_sym[in_head & (head_sym >= 0)]]))
        bits = max(1, len(used).bit_length())
        k_max = min(3, 63 // (2 * bits))
        if k_max == 0 or not len(used):
            return None
        code = np.zeros(max(vocab.values(), default=0) + 1, dtype=np.uint64)
        code[used] = np.arange(1, len(used) + 1, dtype=np.uint64)
        # the last k_max characters of the tail, the first k_max of the head
        tail_sym, in_tail = tail_sym[:, 3 - k_max:], in_tail[:, 3 - k_max:]
        head_sym, in_head = head_sym[:, :k_max], in_head[:, :k_max]
        k = np.minimum(tail_len, k_max)
        m = np.minimum(head_len, k_max)
        tail_code = np.where(in_tail & (tail_sym >= 0), code[np.maximum(tail_sym, 0)],
                             np.uint64(0))
        head_code = np.where(in_head & (head_sym >= 0), code[np.maximum(head_sym, 0)],
                             np.uint64(0))
        # a character that is not a symbol (code 0 inside a part): the merge never applies
        valid = ~(((tail_code == 0) & in_tail).any(axis=1) | ((head_code == 0) & in_head).any(
            axis=1))
        # packed most significant first: tail then head, `bits` per character
        key = np.zeros(len(merges), dtype=np.uint64)
        for j in range(k_max):
            key = (key << np.uint64(bits)) | tail_code[:, j]
        head_key = np.zeros(len(merges), dtype=np.uint64)
        for j in range(k_max):
            head_key = (head_key << np.uint64(bits)) | head_code[:, j]
        head_key >>= (np.uint64(bits) * (k_max - m).astype(np.uint64))
        key = (key << (np.uint64(bits) * m.astype(np.uint64))) | head_key
        key, k, m = key[valid], k[valid], m[valid]
        tags = np.array([_class_tag(kk, mm) for kk in range(4) for mm in range(4)],
                        dtype=np.uint64)[k * 4 + m]
        table = np.zeros(1 << CROSSING_FILTER_BITS, dtype=bool)
        table[_window_hash(key, tags)] = True
        # short patterns first: they match most boundaries (inside characters, for a
        # byte-level BPE), so fewer boundaries are left for the longer classes; then the most
        # numerous, then the first seen
        present, first, count = np.unique(k * 4 + m, return_index=True, return_counts=True)
        ranked = sorted(range(len(present)), key=lambda c: (
            int(present[c]) // 4 + int(present[c]) % 4, -int(count[c]), int(first[c])))
        classes = [(int(present[c]) // 4, int(present[c]) % 4) for c in ranked]
        # each side alone, as direct tables: a boundary whose k symbols on the left end no
        # pattern's left side of length k cannot match a class (k, m), whatever the right
        tails: list[np.ndarray | None] = [None] * (k_max + 1)
        heads: list[np.ndarray | None] = [None] * (k_max + 1)
        for n in range(1, k_max + 1):
            if bits * n > SIDE_TABLE_MAX_BITS:
                continue
            tails[n] = np.zeros(1 << (bits * n), dtype=bool)
            tails[n][(key[k == n] >> (np.uint64(bits) * m[k == n].astype(np.uint64))
                      ).astype(np.int64)] = True
            heads[n] = np.zeros(1 << (bits * n), dtype=bool)
            heads[n][(key[m == n] & np.uint64((1 << (bits * n)) - 1)).astype(np.int64)] = True
        return cls(code, bits, k_max, classes, table, tails=tails, heads=heads)

    def piece_starts(self, lengths: np.ndarray, ids: np.ndarray, eligible: np.ndarray,
                     cuttable: np.ndarray | None = None,
                     symbol_word: np.ndarray | None = None) -> np.ndarray:
        """Per flat symbol, True where a piece starts: each word's first symbol, and the
        boundaries of `eligible` words that no merge can cross. `cuttable` (per flat symbol,
        optional): only the boundaries before a True symbol are tested (leaving a boundary
        uncut never changes the ids, so any subset is exact). `symbol_word`: each symbol's
        word (`run_index(lengths)`), when the caller has it."""
        n_words, k_max, bits = len(lengths), self.k, np.uint64(self.bits)
        word_start = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths, out=word_start[1:])
        starts = np.zeros(len(ids), dtype=bool)
        starts[word_start[:-1][lengths > 0]] = True
        # the boundaries to test: before every (cuttable) symbol but a word's first, in the
        # eligible words
        boundary = np.flatnonzero(~starts if cuttable is None else cuttable & ~starts)
        word = (run_index(lengths) if symbol_word is None else symbol_word)[boundary]
        if not eligible.all():
            in_eligible = eligible[word]
            boundary, word = boundary[in_eligible], word[in_eligible]
        # each boundary's window, K symbols left of it and K from it on, most significant
        # first, over the codes with K zeros at both ends (`padded[b + j]` is symbol
        # b - K + j): where boundaries are few (byte-level BPE on CJK text: one per 3 bytes)
        # gathered at the boundaries, else built at every position from contiguous slices
        # (no gathers) and then picked
        padded = np.zeros(len(ids) + 2 * k_max, dtype=np.uint64)
        padded[k_max:k_max + len(ids)] = self.code[ids]
        if 2 * len(boundary) < len(ids):
            window = np.zeros(len(boundary), dtype=np.uint64)
            for j in range(2 * k_max):
                window <<= bits
                window |= padded[boundary + j]
        else:
            size = len(ids) + 1
            window = np.zeros(size, dtype=np.uint64)
            for j in range(2 * k_max):
                window <<= bits
                window |= padded[j:j + size]
            window = window[boundary]
        # without the symbols of the words before and after it (a mask by the symbols its
        # word has on each side, up to K)
        left = np.minimum(boundary - word_start[word], k_max)
        right = np.minimum(word_start[word + 1] - boundary, k_max)
        window &= self.edge_masks()[left, right]
        # a boundary matched by a pattern of some class may be crossed: not cut. The open
        # boundaries and their windows are compressed after a class that closed a quarter of
        # them or more; a class closing few only clears their flags, as compressing would
        # cost more than testing them once more. The classes that closed the most boundaries
        # so far go first (which is first depends on the text and on `cuttable`: inside
        # characters, for a byte-level BPE tested everywhere, the shortest; between CJK
        # characters the longest), so that fewer boundaries are left for the others
        still_open = np.ones(len(boundary), dtype=bool)
        # each side tested alone first, with the direct tables (one gather per side and
        # length, made when a class first needs it): a class (k, m) is looked up in the
        # hashed table only where both of its sides can match
        tail_ok: dict[int, np.ndarray] = {}
        head_ok: dict[int, np.ndarray] = {}
        order = np.argsort(-self.closed, kind="stable")
        for c in order:
            k, m = self.classes[c]
            if k not in tail_ok:
                tail_ok[k] = self._side_ok(window, k, tail=True)
            if m not in head_ok:
                head_ok[m] = self._side_ok(window, m, tail=False)
            at = np.flatnonzero(still_open & tail_ok[k] & head_ok[m])
            if not len(at):
                continue
            key = (window[at] >> (bits * np.uint64(k_max - m))) & np.uint64(
                (1 << (self.bits * (k + m))) - 1)
            crossed = at[self.table[_window_hash(key, _class_tag(k, m))]]
            still_open[crossed] = False
            self.closed[c] += len(crossed)  # racing threads may lose a count: harmless
            n_open = np.count_nonzero(still_open)
            if 4 * n_open <= 3 * len(still_open):
                window, boundary = window[still_open], boundary[still_open]
                tail_ok = {n: ok[still_open] for n, ok in tail_ok.items()}
                head_ok = {n: ok[still_open] for n, ok in head_ok.items()}
                still_open = np.ones(n_open, dtype=bool)
        starts[boundary[still_open]] = True
        return starts

    def _side_ok(self, window: np.ndarray, n: int, tail: bool) -> np.ndarray:
        """Per boundary (its window), whether its `n` symbols on the left can end a pattern's
        left side of length n (`tail`), or its `n` on the right start a right side of length
        n; all True where that side has no direct table."""
        tables = self.tails if tail else self.heads
        table = tables[n] if n < len(tables) else None
        if table is None:
            return np.ones(len(window), dtype=bool)
        shift = self.bits * self.k if tail else self.bits * (self.k - n)
        return table[((window >> np.uint64(shift)) & np.uint64((1 << (self.bits * n)) - 1)
                      ).astype(np.int64)]

    def edge_masks(self) -> np.ndarray:
        """[l, r]: the bits of a window's last `l` symbols left of its boundary and first `r`
        from it on (l, r in 0..K; the window's symbols sit `bits` apart, the leftmost most
        significant)."""
        k_max, bits = self.k, self.bits
        masks = np.zeros((k_max + 1, k_max + 1), dtype=np.uint64)
        for left in range(k_max + 1):
            for right in range(k_max + 1):
                mask = 0
                for j in range(k_max - left, k_max + right):  # symbol j of 2K
                    mask |= ((1 << bits) - 1) << (bits * (2 * k_max - 1 - j))
                masks[left, right] = mask
        return masks



def _edge_code_points(parts: list[str], right: bool) -> tuple[np.ndarray, np.ndarray]:
    """Strings of at most 3 characters as an (n, 3) array of code points (int64), each
    right-aligned (`right`) or left-aligned, 0 in the other cells; and their lengths."""
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    flat = np.frombuffer("".join(parts).encode("utf-32-le", "surrogatepass"),
                         dtype=np.uint32).astype(np.int64)
    row = np.repeat(np.arange(len(parts), dtype=np.int64), lengths)
    within = np.arange(len(flat), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths,
                                                               lengths)
    out = np.zeros((len(parts), 3), dtype=np.int64)
    out[row, within + (3 - lengths[row]) if right else within] = flat
    return out, lengths


def _class_tag(k: int, m: int) -> np.uint64:
    """The hash tag of class (k, m) (a 64-bit odd multiple: classes land apart)."""
    return np.uint64(((k * 4 + m) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF)


def _window_hash(keys: np.ndarray, tags: np.ndarray | np.uint64) -> np.ndarray:
    """Slot of each (packed characters, class tag) in the crossing filter's table."""
    mixed = (keys ^ tags) * _HASH_MUL  # wraps modulo 2**64, as hashing wants
    return (mixed >> np.uint64(64 - CROSSING_FILTER_BITS)).astype(np.int64)

