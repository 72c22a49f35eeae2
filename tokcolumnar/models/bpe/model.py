"""The BPE model (the encode side): `BPEModel` applies merges exactly as HF's BPE model does:
in every word, repeatedly merge the adjacent pair with the lowest merge rank (leftmost first).
All words advance together in rounds, as NumPy passes over a flat layout: a round merges every
occurrence of each word's lowest-rank pair when the merge table is well formed (one merge per
word otherwise), and only visits the positions that start a pair with a merge, whose ranks are
kept and looked up again (in a hashed `PairIndex`) only where a merge changed them.

Long words are first cut where the merge table proves that no merge can ever join the two
sides (`CrossingFilter`): the pieces merge exactly as the whole word would, and they repeat
across words (a run of CJK characters, one byte-level pre-token, is mostly a handful of short
pieces seen many times), so only the distinct pieces go through the merge loop."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import (
    gather_runs,
    lists_from_flat,
    repeat_runs,
    run_index,
    series_from_arrow,
    string_parts,
    strings_from_parts,
    utf8_chars,
)
from ..errors import TokcolumnarError, TokcolumnarValueError
from ..hfjson import HFObject
from ..text.bytelevel import BYTES_TO_UNICODE, UNICODE_TO_BYTES
from ..training.symbols import Layout, code_points
from .base import Model, explode_chars, vocab_from_hf
from .cache import WordCache, distinct_words, group_hashes

NO_PAIR = np.int64(np.iinfo(np.int64).max)  # rank of a pair no merge joins
PAIR_INDEX_SLOTS_PER_KEY = 8  # the pair index's load: 1/8, lookups mostly one probe
SPLIT_MIN_SYMBOLS = 8  # words with fewer initial symbols go through the merge loop whole
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


@dataclass
class CharTokens:
    """Which multi-byte characters a byte-level BPE may start from as one token: the pieces'
    bytes of such a character become its token before the merge loop, which then skips the
    rounds that join the bytes of every character (two of a CJK character's three bytes).

    Exact when the merge table is well formed (`merges_well_formed`), for a character c whose
    bytes alone merge into one token T, if every merge whose right part is a proper prefix of
    c's bytes, or whose left part a proper suffix, has a rank above `made[T]` (the highest rank
    producing T). In a well-formed table the ranks a word merges in never decrease (a merge of
    rank r creates only pairs of higher rank), so inside any word the pair c's own merges are
    at (rank <= made[T]) always comes before a merge joining a part of c with a neighbour
    (whose left or right part is then such a prefix or suffix: rank > made[T]): c becomes T
    exactly as alone, before anything crosses its edges; the other merges below made[T] do
    not touch c, and every merge with T has a rank above made[T]. So starting from T gives
    the same merges. `tests/models/test_bpe_bytes.py` checks the ids against HF.

    `token[cp]`: T for such a character, -1 for another (or a one-byte one), -2 not yet
    looked at (characters are looked at the first time a batch holds them)."""

    token: np.ndarray  # int32 per code point
    made: np.ndarray  # per token id, the highest rank producing it (-1: none)
    min_as_left: np.ndarray  # per token id, the lowest rank of a merge with it on the left
    min_as_right: np.ndarray  # ... on the right (NO_PAIR when none)
    short_keys: np.ndarray  # sorted packed byte strings (1-3 bytes) that are tokens
    short_ids: np.ndarray  # their token ids

    @staticmethod
    def pack(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """The byte strings `data[start:start+length]` (length 1-3) as int64 keys."""
        key = length.astype(np.int64) << 24
        for j in range(3):
            inside = j < length
            key[inside] |= data[(start + j)[inside]].astype(np.int64) << (16 - 8 * j)
        return key

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The token id of each packed byte string, -1 when it is no token."""
        at = np.minimum(np.searchsorted(self.short_keys, keys), len(self.short_keys) - 1)
        return np.where(self.short_keys[at] == keys, self.short_ids[at], -1) if len(
            self.short_keys) else np.full(len(keys), -1, dtype=np.int64)

    def tokens_of(self, bpe: BPEModel, code: np.ndarray) -> np.ndarray:
        """`token` of each code point, looking at the characters not seen before (a race
        only writes the same values twice)."""
        found = self.token[code]
        new = np.unique(code[found == -2])
        if len(new):
            self.token[new] = self._look_at(bpe, new)
            found = self.token[code]
        return found

    def _look_at(self, bpe: BPEModel, new: np.ndarray) -> np.ndarray:
        """`token` of the code points `new` (see the class's docstring)."""
        data = np.frombuffer("".join(map(chr, new.tolist())).encode("utf-8", "surrogatepass"),
                             dtype=np.uint8)
        length = np.where(new < 0x80, 1, np.where(new < 0x800, 2, np.where(new < 0x10000, 3, 4)))
        start = np.zeros(len(new), dtype=np.int64)
        np.cumsum(length[:-1], out=start[1:])
        byte_ids = bpe.byte_ids()
        assert byte_ids is not None
        word_of, ids = bpe.merge_symbols(length.astype(np.int64), byte_ids[data])
        alone = np.bincount(word_of, minlength=len(new)) == 1
        token = np.full(len(new), -1, dtype=np.int64)
        token[word_of[alone[word_of]]] = ids[alone[word_of]]
        ok = (token >= 0) & (length > 1)
        limit = np.where(ok, self.made[np.maximum(token, 0)], -1)
        # every proper prefix that is a token: merges with it on the right above the limit;
        # every proper suffix that is a token: merges with it on the left above the limit
        for n in range(1, 4):
            # (where there is no such part, a one-byte string stands in and is ignored)
            has = ok & (length > n)
            prefix = self.lookup(self.pack(data, start, np.where(has, n, 1)))
            bad = has & (prefix >= 0) & (self.min_as_right[np.maximum(prefix, 0)] <= limit)
            suffix = self.lookup(self.pack(data, np.where(has, start + length - n, start),
                                           np.where(has, n, 1)))
            bad |= has & (suffix >= 0) & (self.min_as_left[np.maximum(suffix, 0)] <= limit)
            ok &= ~bad
        return np.where(ok, token, -1)


_PIECE_CACHE_LOCK = threading.Lock()  # one piece cache per model, however many threads ask


class _PieceMerger(Model):
    """The piece cache's model: pieces (lists of initial symbols, or with `byte_ids` the
    UTF-8 bytes of byte-level pieces) through the merge loop."""

    def __init__(self, bpe: BPEModel, byte_ids: np.ndarray | None = None):
        self.bpe = bpe
        self.vocab = bpe.vocab
        self.byte_ids = byte_ids

    def encode_words(self, words: pl.Series) -> pl.Series:
        if self.byte_ids is not None:  # binary pieces: their bytes are the initial symbols
            offsets, data = string_parts(words)
            lengths, ids = self.bpe.byte_symbols(offsets, data)
        else:
            lengths = words.list.len().to_numpy().astype(np.int64)
            ids = words.explode().to_numpy().astype(np.int64)
        word_of, values = self.bpe.merge_symbols(lengths, ids)
        return lists_from_flat(len(words), word_of, pl.Series("ids", values.astype(np.uint32)))


def symbol_lists(lengths: np.ndarray, ids: np.ndarray) -> pl.Series:
    """Runs of symbol ids (lengths, flat ids) as a list[i64] Series (through Polars: NumPy
    into `pa.array` would import pandas)."""
    import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return series_from_arrow("piece", pa.LargeListArray.from_arrays(pl.Series(offsets).to_arrow(),
                                                            pl.Series(ids).to_arrow()))


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 values (wrapping, as hashing wants)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def distinct_pieces(offsets: np.ndarray, ids: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The distinct runs `ids[offsets[i]:offsets[i+1]]` (each non-empty, ids < 2**32): each
    distinct run's first index, its 64-bit hash (in order of first occurrence) and each
    run's index among them; None if two different runs share a hash. NumPy over the flat
    ids: no list column is hashed or compared."""
    starts, lengths = offsets[:-1], np.diff(offsets)
    # each symbol mixed with its place in its run, summed per run: the order counts
    within = np.arange(len(ids), dtype=np.int64) - np.repeat(starts, lengths)
    mixed = _mix64(ids.astype(np.uint64) | (within.astype(np.uint64) << np.uint64(32)))
    hashes = _mix64(np.add.reduceat(mixed, starts) ^ lengths.astype(np.uint64))
    first, index = group_hashes(hashes)
    uniq_hash = hashes[first]
    # exact: every run has its group's first run's length and symbols
    rep = first[index]
    if not np.array_equal(lengths[rep], lengths):
        return None
    rep_symbol = np.repeat(starts[rep] - starts, lengths) + np.arange(len(ids), dtype=np.int64)
    if not np.array_equal(ids[rep_symbol], ids):
        return None
    return first, uniq_hash, index


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


@dataclass
class BPEModel(Model):
    """BPE: vocab, merges in rank order, optional prefix/suffix/end-of-word token."""

    hf_type: ClassVar[str] = "BPE"
    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None
    end_of_word_token: str | None = None
    unk_token: str | None = None
    _table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _crossing: CrossingFilter | bool | None = field(default=None, repr=False)
    _char_ids: np.ndarray | None = field(default=None, repr=False)
    _pieces: WordCache | None = field(default=None, repr=False)
    _byte_pieces: WordCache | None = field(default=None, repr=False)
    _well_formed: bool | None = field(default=None, repr=False)
    _pair_index: PairIndex | None = field(default=None, repr=False)
    _byte_ids: np.ndarray | bool | None = field(default=None, repr=False)
    _char_tokens: CharTokens | bool | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        # the piece cache (and its lock) stays behind, as the tokenizer's word cache does, and
        # so does the pair index (8 slots per merge, rebuilt in milliseconds)
        state = self.__dict__.copy()
        state["_pieces"] = None
        state["_byte_pieces"] = None
        state["_pair_index"] = None
        state["_char_tokens"] = None  # 4 MiB per model, rebuilt on first use
        return state

    def merge_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pair keys sorted, with the rank and the new id of each (the last rank wins for a
        pair listed twice, as in HF's merge map). A merge naming an unknown token, producing a
        string that is not in the vocabulary, or (with a continuing prefix) whose right token
        lacks the prefix is refused (HF refuses the first two; the third never occurs in a
        trained BPE, and HF would cut the prefix's length off the token anyway)."""
        if self._table is None:
            v, prefix = self.vocab, self.continuing_subword_prefix
            keys, ranks, new = [], [], []
            for rank, (a, b) in enumerate(self.merges):
                if a not in v or b not in v:
                    unknown = a if a not in v else b
                    raise TokcolumnarValueError(f"merge {rank} ({a!r}, {b!r}) uses {unknown!r}, "
                                                "which is not in the vocabulary")
                # the trainer's rule (training.symbols.Vocab.joined): a right part starting
                # with the prefix loses it, any other is appended whole (the end-of-word token,
                # never prefixed, is the one such right part in a trained BPE)
                if (not prefix or not b.startswith(prefix)) and b == self.end_of_word_token:
                    t = a + b
                elif prefix and not b.startswith(prefix):
                    raise TokcolumnarValueError(
                        f"merge {rank} ({a!r}, {b!r}): the right token lacks the continuing "
                        f"prefix {prefix!r}")
                else:
                    t = a + b[len(prefix):] if prefix else a + b
                if t not in v:
                    raise TokcolumnarValueError(f"merge {rank} ({a!r}, {b!r}) produces {t!r}, "
                                                "which is not in the vocabulary")
                keys.append((v[a] << 32) | v[b])
                ranks.append(rank)
                new.append(v[t])
            k = np.array(keys, dtype=np.int64)
            r = np.array(ranks, dtype=np.int64)
            n = np.array(new, dtype=np.int64)
            order = np.lexsort((-r, k))  # by key, last rank first
            k, r, n = k[order], r[order], n[order]
            first = np.ones(k.size, dtype=bool)
            first[1:] = k[1:] != k[:-1]
            self._table = (k[first], r[first], n[first])
        return self._table

    def char_ids(self) -> np.ndarray:
        """Code point -> id of the one-character token (-1 when not in the vocabulary)."""
        if self._char_ids is None:
            singles = {ord(t): i for t, i in self.vocab.items() if len(t) == 1}
            table = np.full(max(singles, default=0) + 1, -1, dtype=np.int64)
            table[list(singles)] = list(singles.values())
            self._char_ids = table
        return self._char_ids

    def byte_ids(self) -> np.ndarray | None:
        """Byte value -> id of its GPT-2 character's token, when the initial symbols of a
        byte-level word are its bytes: a model without prefix, suffix or end-of-word token
        whose vocabulary has all 256 byte characters (None otherwise)."""
        if self._byte_ids is None:
            plain = (self.continuing_subword_prefix is None and self.end_of_word_suffix is None
                     and self.end_of_word_token is None)
            ids = [self.vocab.get(BYTES_TO_UNICODE[b]) for b in range(256)]
            self._byte_ids = (np.array(ids, dtype=np.int64)
                              if plain and None not in ids else False)
        return None if self._byte_ids is False else self._byte_ids

    def encode_byte_words(self, words: pl.Series) -> pl.Series:
        """`encode_words` of the byte-level form of `words` (each UTF-8 byte as its GPT-2
        character), read from the text's bytes: the bytes through `byte_ids` are the initial
        symbols (no string of byte characters is made, nor decoded back to code points)."""
        return self.encode_byte_words_kept(words)[0]

    def encode_byte_words_kept(self, words: pl.Series) -> tuple[pl.Series, np.ndarray]:
        """`encode_byte_words`, and which words the word cache should keep: the words left
        whole. A word cut into pieces is not kept: its pieces are, in the piece cache, and
        such words (runs of CJK characters) rarely repeat whole, so keeping them only grew
        the word cache (662k of the 663k words it held after medium/zh.txt, ~0.1 CPU-s of
        inserts) for hits that the piece cache gives anyway."""
        byte_ids = self.byte_ids()
        if byte_ids is None:
            raise TokcolumnarValueError("encode_byte_words: the vocabulary lacks some of the "
                                        "256 byte characters")
        offsets, data = string_parts(words)
        # cuts are tested only before a character's first byte (not before a UTF-8
        # continuation byte, 10xxxxxx): a byte-level merge table joins the bytes of every
        # character it has seen, so the boundaries inside characters were almost never cut
        # (0.2% of the cuts of medium/zh.txt), and testing them was half of the filter's
        # time on CJK text
        word_of, values, cut = self._encode_cut(np.diff(offsets), byte_ids[data],
                                                cuttable=(data & 0xC0) != 0x80, data=data)
        ids = lists_from_flat(len(words), word_of, pl.Series("ids", values.astype(np.uint32)))
        return ids, ~cut

    def byte_symbols(self, offsets: np.ndarray, data: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The initial symbols (lengths, flat ids) of byte-level words given as UTF-8 bytes:
        their bytes through `byte_ids`, a multi-byte character `CharTokens` allows as its
        token (pieces hold whole characters: they are cut only before a character's first
        byte)."""
        byte_ids = self.byte_ids()
        assert byte_ids is not None
        chars = self.char_tokens()
        code, char_byte = utf8_chars(data)
        if chars is None or char_byte is None:  # all ASCII: a character per byte
            return np.diff(offsets), byte_ids[data]
        token = chars.tokens_of(self, code)
        if not (token >= 0).any():
            return np.diff(offsets), byte_ids[data]
        first = char_byte[:-1]
        # a byte is kept unless it is inside a character that becomes its token (the
        # character's first byte stands for it)
        drop = np.zeros(len(data) + 1, dtype=np.int64)
        whole = np.flatnonzero(token >= 0)
        drop[first[whole] + 1] += 1  # from its second byte (distinct positions: no add.at)
        drop[char_byte[whole + 1]] -= 1  # to the next character's first
        keep = np.cumsum(drop[:-1]) == 0
        ids = byte_ids[data]
        ids[first[whole]] = token[whole]
        # each word keeps its bytes minus those dropped inside it
        kept_before = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum(keep, out=kept_before[1:])
        return np.diff(kept_before[offsets]), ids[keep]

    def char_tokens(self) -> CharTokens | None:
        """The characters a byte-level BPE may start from as one token (`CharTokens`); None
        unless the initial symbols are the bytes (`byte_ids`) and the table is well formed."""
        with _PIECE_CACHE_LOCK:
            if self._char_tokens is None:
                self._char_tokens = self._build_char_tokens() or False
        return self._char_tokens or None

    def _build_char_tokens(self) -> CharTokens | None:
        if self.byte_ids() is None or not self.merges_well_formed():
            return None
        keys, ranks, _ = self.merge_table()
        made = self.producing_ranks()
        n_tokens = len(made)
        min_as_left = np.full(n_tokens, NO_PAIR, dtype=np.int64)
        np.minimum.at(min_as_left, keys >> 32, ranks)
        min_as_right = np.full(n_tokens, NO_PAIR, dtype=np.int64)
        np.minimum.at(min_as_right, keys & 0xFFFFFFFF, ranks)
        # the tokens of 1-3 bytes, by their bytes (a byte-level token is one character a byte)
        short = [(t, i) for t, i in self.vocab.items() if len(t) <= 3]
        text = "".join(t for t, _ in short)
        if any(c not in UNICODE_TO_BYTES for c in text):  # not all bytes: no such characters
            return None
        data = np.array([UNICODE_TO_BYTES[c] for c in text], dtype=np.uint8)
        length = np.array([len(t) for t, _ in short], dtype=np.int64)
        start = np.zeros(len(short), dtype=np.int64)
        np.cumsum(length[:-1], out=start[1:])
        short_keys = CharTokens.pack(data, start, length)
        order = np.argsort(short_keys)
        short_ids = np.array([i for _, i in short], dtype=np.int64)[order]
        return CharTokens(np.full(0x110000, -2, dtype=np.int32), made, min_as_left,
                          min_as_right, short_keys[order], short_ids)

    def initial_symbols(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """Per-word symbol ids before merging: (lengths, flat ids)."""
        plain = (self.continuing_subword_prefix is None and self.end_of_word_suffix is None
                 and self.end_of_word_token is None)
        if plain and (self.unk_token is None or self.unk_token in self.vocab):
            # the symbols are the characters: code points through a lookup table
            cps, lengths = code_points(words)
            table = self.char_ids()
            ids = np.full(len(cps), -1, dtype=np.int64)
            inside = cps < len(table)
            ids[inside] = table[cps[inside]]
            unknown = ids < 0
            if not unknown.any():
                return lengths, ids
            if self.unk_token is not None:  # unknown characters become the unknown token
                ids[unknown] = self.vocab[self.unk_token]
                return lengths, ids
            # no unknown token: unknown characters are dropped (as HF does)
            word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
            return (np.bincount(word[~unknown], minlength=len(lengths)).astype(np.int64),
                    ids[~unknown])
        return self.joined_symbols(words)

    def joined_symbols(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """`initial_symbols` in general: the characters exploded, with the prefix / suffix
        variants, joined to the vocabulary (raises when an unknown character has no unknown
        token in the vocabulary)."""
        ex = explode_chars(words)
        tok = pl.col("char")
        if self.continuing_subword_prefix is not None:
            tok = pl.when(pl.col("i") > 0).then(
                pl.lit(self.continuing_subword_prefix) + tok).otherwise(tok)
        if self.end_of_word_suffix is not None:
            tok = pl.when(pl.col("i") == pl.col("n") - 1).then(
                tok + pl.lit(self.end_of_word_suffix)).otherwise(tok)
        mapping = pl.DataFrame({"tok": list(self.vocab), "id": list(self.vocab.values())},
                               schema={"tok": pl.String, "id": pl.Int64})
        ex = ex.with_columns(tok.alias("tok")).join(mapping, on="tok", how="left",
                                                     maintain_order="left")
        if self.unk_token is not None:
            if self.unk_token not in self.vocab and ex.get_column("id").null_count():
                char = ex.filter(pl.col("id").is_null()).get_column("tok").item(0)
                raise TokcolumnarValueError(  # as HF: "Unk token ... not found in the vocabulary"
                    f"BPE: {char!r} is not in the vocabulary and neither is the unknown token "
                    f"{self.unk_token!r}")
            if self.unk_token in self.vocab:
                ex = ex.with_columns(pl.col("id").fill_null(self.vocab[self.unk_token]))
        ex = ex.drop_nulls("id")
        w = ex.get_column("w").to_numpy()
        ids = ex.get_column("id").to_numpy()
        if self.end_of_word_token is not None and self.end_of_word_token in self.vocab:
            n = len(words)
            eow = self.vocab[self.end_of_word_token]
            w = np.concatenate([w, np.arange(n)])
            ids = np.concatenate([ids, np.full(n, eow, dtype=ids.dtype)])
            order = np.argsort(w, kind="stable")
            w, ids = w[order], ids[order]
        return np.bincount(w, minlength=len(words)).astype(np.int64), ids.astype(np.int64)

    def prepare(self) -> None:
        self.merge_table()
        self.merges_well_formed()
        self.pair_index()
        self.crossing_filter()
        self.char_ids()
        self.byte_ids()

    def crossing_filter(self) -> CrossingFilter | None:
        """Where long words may be cut (None when the initial symbols are not the bare
        characters: with a prefix, a suffix or an end-of-word token a piece would start
        or end with other symbols than inside its word)."""
        if self._crossing is None:
            plain = (self.continuing_subword_prefix is None and self.end_of_word_suffix is None
                     and self.end_of_word_token is None)
            self._crossing = (plain and CrossingFilter.build(self.vocab, self.merges)) or False
        return self._crossing or None

    def encode_words(self, words: pl.Series) -> pl.Series:
        lengths, ids = self.initial_symbols(words)
        word_of, values = self.encode_symbols(lengths, ids)
        return lists_from_flat(len(words), word_of, pl.Series("ids", values.astype(np.uint32)))

    def encode_symbols(self, lengths: np.ndarray, ids: np.ndarray,
                       cuttable: np.ndarray | None = None, data: np.ndarray | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The merged ids of words given as initial symbols (lengths, flat ids): (word of each
        id, ids), in word order. Long words are cut where no merge can cross (see
        `CrossingFilter`; only before the symbols `cuttable` marks, when given) and each
        distinct piece is merged once. `data`: the words' UTF-8 bytes when the symbols are
        their bytes (`byte_ids`): pieces are then grouped and cached as byte strings."""
        word_of, values, _ = self._encode_cut(lengths, ids, cuttable, data)
        return word_of, values

    def _encode_cut(self, lengths: np.ndarray, ids: np.ndarray,
                    cuttable: np.ndarray | None = None, data: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`encode_symbols`, and per word whether it was cut into two pieces or more."""
        crossing = self.crossing_filter()
        eligible = lengths >= SPLIT_MIN_SYMBOLS
        if crossing is None or not eligible.any():
            return (*self.merge_symbols(lengths, ids), np.zeros(len(lengths), dtype=bool))
        symbol_word = run_index(lengths)
        if self.unk_token in self.vocab:
            # an unknown character's symbol is the unknown token, not the character: the
            # patterns (characters) do not describe it, so its words stay whole
            eligible &= np.bincount(symbol_word[ids == self.vocab[self.unk_token]],
                                    minlength=len(lengths)) == 0
        starts = crossing.piece_starts(lengths, ids, eligible, cuttable, symbol_word)
        piece_at = np.flatnonzero(starts)
        piece_word = symbol_word[piece_at]
        # a word's pieces are consecutive: it was cut when its last piece is not its first
        cut = np.zeros(len(lengths), dtype=bool)
        cut[piece_word[1:][piece_word[1:] == piece_word[:-1]]] = True
        # the distinct pieces (compared by their symbols), merged once each
        offsets = np.append(piece_at, len(ids))
        if data is not None:
            # byte-level: a piece is its bytes, hashed and compared as a byte string by
            # Polars (cheaper than hashing and comparing symbol runs with NumPy)
            pieces = strings_from_parts("piece", offsets, data, binary=True)
            uniq, uniq_hash, index = distinct_words(pieces)
            merged_offsets, merged = self.piece_cache(bytes_=True).lookup(uniq, uniq_hash)
            per_piece, values = gather_runs(merged_offsets, merged.astype(np.int64), index)
            return repeat_runs(piece_word, per_piece), values, cut
        distinct = distinct_pieces(offsets, ids)
        if distinct is not None:
            first, uniq_hash, index = distinct
            uniq_lengths, uniq_ids = gather_runs(offsets, ids, first)
            uniq = symbol_lists(uniq_lengths, uniq_ids)
        else:  # two distinct pieces with one hash: grouped by Polars instead
            uniq, uniq_hash, index = distinct_words(symbol_lists(np.diff(offsets), ids))
        # pieces merged in earlier batches come from the piece cache, new ones are merged
        merged_offsets, merged = self.piece_cache().lookup(uniq, uniq_hash)
        # every piece's ids in order: the pieces of a word are consecutive
        per_piece, values = gather_runs(merged_offsets, merged.astype(np.int64), index)
        return repeat_runs(piece_word, per_piece), values, cut

    def piece_cache(self, bytes_: bool = False) -> WordCache:
        """Pieces of long words (lists of initial symbols; with `bytes_`, the byte strings of
        a byte-level BPE's pieces) -> merged ids, across batches (a CJK run splits into
        pieces a corpus repeats)."""
        with _PIECE_CACHE_LOCK:
            if bytes_:
                if self._byte_pieces is None:
                    self._byte_pieces = WordCache(_PieceMerger(self, self.byte_ids()),
                                                  lambda piece: piece, key_dtype=pl.Binary)
                return self._byte_pieces
            if self._pieces is None:
                self._pieces = WordCache(_PieceMerger(self), lambda piece: piece,
                                         key_dtype=pl.List(pl.Int64))
        return self._pieces

    def merge_symbols(self, lengths: np.ndarray, ids: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """`apply_merges` on whole words: (word of each resulting id, ids), in word order."""
        layout = Layout.from_symbols(lengths, ids, np.ones(len(lengths), dtype=np.int64))
        self.apply_merges(layout)
        live = np.flatnonzero(layout.sym >= 0)
        return layout.word_of[live].astype(np.int64), layout.sym[live]

    def merges_well_formed(self) -> bool:
        """Whether every merge comes after the merges that make its parts: each pair in the
        merge table has a higher rank than every rank that produces its left or its right
        token (characters are produced by none). Then merging pair P of rank r creates only
        pairs of rank > r, so in a word the lowest-rank pair after merging P's leftmost
        occurrence is P's next occurrence: `apply_merges` may merge all of them in one round.
        A trained BPE is well formed; a hand-made table need not be."""
        if self._well_formed is None:
            keys, ranks, _ = self.merge_table()
            made = self.producing_ranks()
            left, right = keys >> 32, keys & 0xFFFFFFFF
            self._well_formed = bool(((ranks > made[left]) & (ranks > made[right])).all())
        return self._well_formed

    def producing_ranks(self) -> np.ndarray:
        """Per token id, the highest rank of a merge producing it (-1: none does)."""
        _, ranks, new = self.merge_table()
        made = np.full(int(max(self.vocab.values(), default=0)) + 1, -1, dtype=np.int64)
        np.maximum.at(made, new, ranks)
        return made

    def pair_index(self) -> PairIndex:
        """The merge table's pairs -> ranks, hashed (see `PairIndex`)."""
        if self._pair_index is None:
            keys, ranks, _ = self.merge_table()
            self._pair_index = PairIndex.build(keys, ranks)
        return self._pair_index

    def pair_ranks(self, layout: Layout, pos: np.ndarray) -> np.ndarray:
        """The rank of the pair starting at each of `pos` (live symbols, or SEPs) in the merge
        table; NO_PAIR where there is none (no right neighbour, or a pair with no merge)."""
        sym = layout.sym
        # a SEP or removed symbol (negative) on either side makes the key negative: no pair
        return self.pair_index().lookup((sym[pos] << 32) | sym[layout.nxt[pos]])

    def apply_merges(self, layout: Layout,
                     trace: list[tuple[np.ndarray, np.ndarray]] | None = None,
                     every_occurrence: bool | None = None) -> None:
        """Merge, in every word at once, the lowest-rank pair (leftmost on ties), until no word
        has a pair left in the merge table. With a well-formed table (`merges_well_formed`;
        `every_occurrence`=None asks it) a round merges every occurrence of the word's
        lowest-rank pair, leftmost first (in a run `a a a` of the pair (a, a), every other
        one): exactly the merges HF makes one by one, in fewer rounds; otherwise one merge per
        word per round. `trace` (the report's bytes-per-token curve) gets, per round, the word
        and the rank of each merge made."""
        keys, ranks, new = self.merge_table()
        if keys.size == 0:
            return
        if every_occurrence is None:
            every_occurrence = self.merges_well_formed()
        new_of_rank = np.zeros(int(ranks.max()) + 1, dtype=np.int64)
        new_of_rank[ranks] = new
        sym, nxt, word_of = layout.sym, layout.nxt, layout.word_of
        # the rank of the pair at each position, kept up to date: a merge changes only the
        # pairs at the merged position and at its left neighbour, so a round looks up those
        # instead of every pair
        active = np.flatnonzero(sym >= 0)
        rank_at = np.full(sym.size, NO_PAIR, dtype=np.int64)
        rank_at[active] = self.pair_ranks(layout, active)
        # rank * rank_scale + position: the smallest is the lowest rank, leftmost on ties
        rank_scale = np.int64(1) << 40
        while active.size:
            # the positions (sorted) that start a pair with a merge: a word with one merges
            # this round, a word with none never will
            rank = rank_at[active]
            has_pair = rank != NO_PAIR
            active, rank = active[has_pair], rank[has_pair]
            if not active.size:
                break
            word = word_of[active]
            starts = np.flatnonzero(np.r_[True, word[1:] != word[:-1]])
            if every_occurrence:
                # per word, every occurrence of its lowest-rank pair (left to right)
                best = np.minimum.reduceat(rank, starts)
                pos = active[rank == np.repeat(best, np.diff(np.r_[starts, word.size]))]
                # a pair (a, a) in a run a a a overlaps its neighbours: the leftmost merges
                # first, so every other one in each chain of consecutive occurrences
                chained = np.zeros(pos.size, dtype=bool)
                chained[1:] = nxt[pos[:-1]] == pos[1:]
                if chained.any():
                    at = np.arange(pos.size)
                    chain_start = np.maximum.accumulate(np.where(chained, 0, at))
                    pos = pos[((at - chain_start) & 1) == 0]
                applied = rank_at[pos]
            else:
                # per word, the best pair: one merge per word per round
                best = np.minimum.reduceat(rank * rank_scale + active, starts)
                pos, applied = best % rank_scale, best // rank_scale
            if trace is not None:
                trace.append((word_of[pos].astype(np.int64), applied))
            removed = nxt[pos]
            left, _ = layout.merge_at(pos, new_of_rank[applied])
            rank_at[removed] = NO_PAIR  # dropped from `active` next round
            # the pairs that changed: the merged symbol's (with its new right neighbour) and
            # its left neighbour's (whose right symbol is the merged one); a left neighbour
            # that had no pair and now has one joins `active` (`left` is sorted: the left
            # neighbours of sorted positions)
            was_none = rank_at[left] == NO_PAIR
            rank_at[pos] = self.pair_ranks(layout, pos)
            rank_at[left] = self.pair_ranks(layout, left)
            fresh = left[was_none & (rank_at[left] != NO_PAIR)]
            if fresh.size:
                active = np.insert(active, np.searchsorted(active, fresh), fresh)

    def to_hf(self) -> dict[str, Any]:
        return {
            "type": "BPE", "dropout": None, "unk_token": self.unk_token,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "end_of_word_suffix": self.end_of_word_suffix, "fuse_unk": False,
            "byte_fallback": False, "ignore_merges": False,
            "vocab": self.vocab, "merges": [[a, b] for a, b in self.merges],
            # not an HF field: only in the tokenizer file of an --end-of-word-token run, which
            # is never written as tokenizer.json (export.inexact_side_files)
            **({"end_of_word_token": self.end_of_word_token}
               if self.end_of_word_token is not None else {}),
        }

    def tokens_needing_merges(self) -> list[str]:
        """Vocabulary tokens that are not an initial symbol (one character, with the prefix
        and/or suffix the model puts on it): without merges, nothing produces them."""
        prefix, suffix = self.continuing_subword_prefix or "", self.end_of_word_suffix or ""
        out = []
        for t in self.vocab:
            # one character, alone or with the prefix and/or the suffix (a token such as "▁"
            # with the prefix "▁" is a character, not an empty core)
            cores = {t}
            for c in list(cores):
                if prefix and c.startswith(prefix):
                    cores.add(c[len(prefix):])
            for c in list(cores):
                if suffix and c.endswith(suffix):
                    cores.add(c[:-len(suffix)])
            if not any(len(c) == 1 for c in cores):
                out.append(t)
        return out

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> BPEModel:
        """The `model` object of a `tokenizer.json`, checked: the fields HF requires (vocab,
        merges) and their types; every merge as HF reads it (`"a b"` split on its one space,
        or `["a", "b"]`) naming known tokens and producing one; the options that change
        encoding and that this encoder does not implement (dropout, byte_fallback, fuse_unk,
        ignore_merges) refused rather than ignored."""
        obj = HFObject(d, "model BPE")
        vocab = vocab_from_hf(obj)
        merges = []
        for rank, m in enumerate(obj.list("merges")):
            text = isinstance(m, str)
            pair = m.split(" ") if text else m
            # (a split string holds strings: only lists need their items checked; the
            # checks run once per merge, tens of thousands, before the first batch)
            if not (isinstance(pair, list) and len(pair) == 2
                    and (text or (isinstance(pair[0], str) and isinstance(pair[1], str)))):
                raise obj.error(f"merge {rank} must be \"left right\" or [left, right], "
                                f"got {m!r}")
            merges.append((pair[0], pair[1]))
        dropout = obj.number("dropout", None, nullable=True)
        if dropout is not None and not 0 <= dropout <= 1:
            raise obj.error(f"'dropout' must be between 0 and 1, got {dropout}")
        if dropout:
            raise obj.error(f"dropout {dropout} is not supported (tokcolumnar encodes "
                            "deterministically; set it to null)")
        for name in ("fuse_unk", "byte_fallback", "ignore_merges"):
            if obj.bool(name, False):
                raise obj.error(f"{name}=true is not supported by tokcolumnar's encoder")
        model = cls(vocab=vocab, merges=merges,
                    continuing_subword_prefix=obj.str("continuing_subword_prefix", None,
                                                      nullable=True),
                    end_of_word_suffix=obj.str("end_of_word_suffix", None, nullable=True),
                    end_of_word_token=obj.str("end_of_word_token", None, nullable=True),
                    unk_token=obj.str("unk_token", None, nullable=True))
        try:
            model.merge_table()
        except TokcolumnarError as e:
            raise obj.error(str(e)) from None
        return model
