"""The flat symbol layout: every word's symbols in one array, with the links the merge loops
follow (docs/architecture.md, "The flat layout"). The trainer (`training.symbols`,
`training.passes`, the loops) and the encoder (`models.bpe`) both merge over it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from . import ondisk
from .errors import TokcolumnarError

SEP = -1  # word boundary in the flat layout
REMOVED = -2  # right half of a merged pair
M64 = (1 << 64) - 1
# the longest span each span type holds, by item size (uint8, uint16, int32: `_widen_span`);
# a dict read: `np.iinfo` per merged position cost ~2 us (medium/en bert: 58k positions)
_SPAN_MAX = {1: 255, 2: 65535, 4: 2**31 - 1}


def marks(dtype: np.dtype | type) -> tuple[int, int]:
    """(SEP, REMOVED) as a layout of id type `dtype` holds them: -1 and -2 in a signed type;
    in an unsigned one (a training layout's uint16: ids up to 65,533) its two largest values,
    the same bits. Ids are the values below both (`is_symbol`).

    >>> marks(np.int64), marks(np.uint16)
    ((-1, -2), (65535, 65534))
    """
    found = _MARKS.get(dtype)  # (a dict read: `merge1` asks once per merged position)
    if found is None:
        dt = np.dtype(dtype)
        top = (1 << (8 * dt.itemsize)) - 1
        found = _MARKS[dtype] = (top, top - 1) if dt.kind == "u" else (SEP, REMOVED)
    return found


_MARKS: dict[object, tuple[int, int]] = {}


def is_symbol(values: np.ndarray) -> np.ndarray:
    """Which of `values` (a layout's ids, any id type) are symbols, not a SEP or a removed
    position (`marks`)."""
    if values.dtype.kind == "u":
        return values < marks(values.dtype)[1]
    return values >= 0


def id_limit(dtype: np.dtype | type) -> int:
    """The values of a layout of id type `dtype` read as Python ints (`.item()`) are symbols
    when in `range(0, id_limit(dtype))`."""
    dtype = np.dtype(dtype)
    return marks(dtype)[1] if dtype.kind == "u" else 1 << (8 * dtype.itemsize - 1)


@dataclass
class Layout:
    """All words in one flat array: `[SEP] w0 symbols [SEP] w1 symbols ... [SEP]`.

    `next_of`/`prev_of` link the live symbols of each word; `words(pos)` gives each
    position's word index and `word_count` each word's count (`weights(pos)`: the count of
    each position's word). A pair is named by the position of its left symbol.

    Two forms (docs/architecture.md, "Memory"). The encoders' (`lean=False`): `nxt`/`prv`
    (int32) per position, and `word_of`, each position's word (int32). The training form
    (`lean=True`, 16 -> ~5-6 bytes per position): `span`, the length of each live token in
    positions, kept at its first and at its last position (so the next token starts at
    `p + span[p]`, the previous one at `p - span[p - 1]`; the interior positions of a
    merged token hold stale values), uint8 until a merge makes a longer token
    (`_widen_span`); and a position's word is its rank among the SEPs (one before each word):
    `sep_bits`, a bit per position, and `sep_rank`, the SEPs before each 64 positions
    (int32) — 0.19 bytes per position. Ids are uint16 or int32 in a training layout
    (`sym_dtype`, `training.symbols.symbol_dtype`; SEP and removed positions as `marks`
    gives them), int64 in the encoders'; plus 8 bytes per word for its count."""

    sym: np.ndarray
    nxt: np.ndarray | None
    prv: np.ndarray | None
    word_of: np.ndarray | None
    word_count: np.ndarray
    span: np.ndarray | None = None
    sep_bits: np.ndarray | None = None
    sep_rank: np.ndarray | None = None

    @classmethod
    def from_symbols(cls, lengths: np.ndarray, ids: np.ndarray, counts: np.ndarray,
                     sym_dtype: type = np.int64, lean: bool = False) -> Layout:
        """Lay out words given their symbol counts, the flat symbol ids and the word counts.
        Symbol k of the flat array (word w) sits at position k + w + 1: one SEP before each
        word. Links and word indexes are int32 (positions must stay below 2**31).
        `lean`: the training form (spans and SEP ranks, no `nxt`/`prv`/`word_of`)."""
        n_words = len(lengths)
        size = int(lengths.sum()) + n_words + 1
        _check_positions(size)
        counts = np.asarray(counts, dtype=np.int64)
        if lean:
            return cls.lean_from_chunks(lengths, counts, [(0, n_words, ids)], sym_dtype)
        word_of = np.repeat(np.arange(n_words, dtype=np.int32), lengths)
        positions = np.arange(1, len(ids) + 1, dtype=np.int32)
        positions += word_of
        sym = np.full(size, marks(sym_dtype)[0], dtype=sym_dtype)
        sym[positions] = ids
        word_of, per_word = np.full(size, -1, dtype=np.int32), word_of
        word_of[positions] = per_word
        del per_word, positions
        nxt = np.arange(1, size + 1, dtype=np.int32)
        nxt[-1] = size - 1
        prv = np.arange(-1, size - 1, dtype=np.int32)
        prv[0] = 0
        return cls(sym, nxt, prv, word_of, counts)

    @classmethod
    def lean_from_chunks(cls, lengths: np.ndarray, counts: np.ndarray,
                         chunks: Iterable[tuple[int, int, np.ndarray]],
                         sym_dtype: type = np.int32) -> Layout:
        """The training form of `from_symbols`, its ids given a chunk of words at a time:
        `(lo, hi, ids)`, the flat ids of words lo..hi, chunks in word order. Each chunk is
        written in place, with a SEP before each word (and one at the end), into arrays that
        are files when the loop runs on disk (`ondisk`): the transients are one chunk's."""
        n_words = len(lengths)
        size = int(lengths.sum()) + n_words + 1
        _check_positions(size)
        # each word's SEP: its position (8 bytes per word)
        sep_at = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths, out=sep_at[1:])
        sep_at += np.arange(n_words + 1)
        sym = ondisk.empty(size, sym_dtype)
        sep = marks(sym_dtype)[0]
        for lo, hi, ids in chunks:
            part = sym[sep_at[lo]:sep_at[hi]]
            is_symbol = np.ones(part.size, dtype=bool)
            is_symbol[sep_at[lo:hi] - sep_at[lo]] = False
            part[is_symbol] = ids
            part[~is_symbol] = sep
        sym[-1] = sep
        del sep_at
        # (uint8 spans, widened when a merge makes a token of 256 positions: `_widen_span`)
        layout = cls(sym, None, None, None, ondisk.kept(np.asarray(counts, dtype=np.int64)),
                     span=ondisk.full(size, 1, np.uint8))
        layout.sep_bits, layout.sep_rank = _sep_ranks(sym)
        return layout

    def next_of(self, pos: np.ndarray) -> np.ndarray:
        """The position of the token after each of `pos` (live tokens' first positions)."""
        if self.span is None:
            return self.nxt[pos]
        return pos + self.span[pos]

    def prev_of(self, pos: np.ndarray) -> np.ndarray:
        """The position of the token before each of `pos` (live tokens' first positions)."""
        if self.span is None:
            return self.prv[pos]
        return pos - self.span[pos - 1]

    def next1(self, p: int) -> int:
        """`next_of` of one position (plain Python)."""
        return self.nxt.item(p) if self.span is None else p + self.span.item(p)

    def words(self, pos: np.ndarray) -> np.ndarray:
        """The word index of each of `pos` (int32; positions of symbols, not SEPs)."""
        if self.word_of is not None:
            return self.word_of[pos]
        block = pos >> 6
        bits = self.sep_bits[block]
        # keep the bits of the positions up to each one (its bit moves to the top): their
        # count is the SEPs up to it in its block
        shift = (pos & 63).astype(np.uint64)
        np.bitwise_xor(shift, np.uint64(63), out=shift)
        bits <<= shift
        del shift
        word = self.sep_rank[block]
        del block
        word += np.bitwise_count(bits)
        word -= 1
        return word

    def word(self, p: int) -> int:
        """`words` of one position (plain Python: cheaper than array calls for one)."""
        if self.word_of is not None:
            return self.word_of.item(p)
        block = p >> 6
        bits = (self.sep_bits.item(block) << (63 - (p & 63))) & M64
        return self.sep_rank.item(block) + bits.bit_count() - 1

    def weights(self, pos: np.ndarray) -> np.ndarray:
        """The count of the word of each of `pos` (int64; positions of symbols, not SEPs)."""
        return self.word_count[self.words(pos)]

    def live_occurrences(self, pos: np.ndarray, a: int, b: int) -> np.ndarray:
        """The positions among `pos` (sorted) where the pair (a, b) still occurs; in runs
        `a a a` only every other one, left to right, as HF merges them."""
        sym = self.sym
        # the left symbol first: the next position of a stale one (inside a merged token:
        # its span is stale) is not read
        pos = pos[sym[pos] == a]
        pos = pos[sym[self.next_of(pos)] == b]
        if a == b and pos.size > 1:
            # int32 and in place: a run of one symbol in a long word (`aaaa...`) makes this
            # the size of the word (positions are below 2**31)
            n = pos.size
            chained = np.zeros(n, dtype=bool)
            chained[1:] = self.next_of(pos[:-1]) == pos[1:]
            idx = np.arange(n, dtype=np.int32)
            step = np.where(chained, np.int32(0), idx)  # each run's start, carried forward:
            del chained
            np.maximum.accumulate(step, out=step)
            np.subtract(idx, step, out=step)  # the place of each position in its run
            del idx
            step &= 1
            pos = pos[step == 0]
        return pos

    def merge_at(self, pos: np.ndarray, new: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Merge the symbol at each of `pos` (non-overlapping) with its right neighbour into
        `new`. Returns each merged symbol's left neighbour position (as it stands after the
        merge) and its right neighbour's symbol as it stood before."""
        sym, span = self.sym, self.span
        if span is None:
            nxt, prv = self.nxt, self.prv
            q = nxt[pos]
            r = nxt[q]
            rs = sym[r]
            sym[pos] = new
            sym[q] = marks(sym.dtype)[1]
            nxt[pos] = r
            prv[r] = pos
            return prv[pos], rs
        left_len = span[pos]
        q = pos + left_len
        length = span[q]
        r = q + length
        rs = sym[r]
        length += left_len  # the merged token's length, at its first and last position
        if length.size and span.dtype.kind == "u" and (length < left_len).any():
            # it passed the spans' type (an unsigned sum that wraps is below its terms)
            span = self._widen_span()
            length = span[q] + span[pos]
        del left_len
        sym[pos] = new
        sym[q] = marks(sym.dtype)[1]
        del q
        span[pos] = length
        r -= 1
        span[r] = length
        del r, length
        # read after the writes: a left neighbour merged in this pass ends with its new span
        return self.prev_of(pos), rs

    def merge1(self, p: int, new: int) -> tuple[int, int]:
        """`merge_at` of one position (plain Python): its left neighbour's position after
        the merge and its right neighbour's symbol before."""
        sym, span = self.sym, self.span
        if span is None:
            nxt, prv = self.nxt, self.prv
            q = nxt.item(p)
            r = nxt.item(q)
            rs = sym.item(r)
            sym[p] = new
            sym[q] = marks(sym.dtype)[1]
            nxt[p] = r
            prv[r] = p
            return prv.item(p), rs
        length = span.item(p)
        q = p + length
        length += span.item(q)
        if length > _SPAN_MAX[span.itemsize]:
            span = self._widen_span()
        rs = sym.item(p + length)
        sym[p] = new
        sym[q] = marks(sym.dtype)[1]
        span[p] = length
        span[p + length - 1] = length
        return p - span.item(p - 1), rs

    def _widen_span(self) -> np.ndarray:
        """`span` in the next wider type (uint8 -> uint16 -> int32), for a merged token longer
        than the current one holds; returns it. A training layout's spans start as uint8
        whatever its words' lengths: tokens of 256 positions or more are rare, and a byte per
        position is ~1 byte per symbol of the loop's memory (100 MB of byte-level Chinese:
        100 MB)."""
        wider = np.uint16 if self.span.dtype == np.uint8 else np.int32
        span = ondisk.empty(self.span.size, wider)
        np.copyto(span, self.span, casting="safe")
        self.span = span
        return span

    def segmentation(self, n_words: int) -> tuple[np.ndarray, np.ndarray]:
        """Final symbols: (offsets per word, flat ids in the layout's id dtype) in word order.
        A boolean mask selects them, not int64 positions: 1 byte per position instead of 8,
        and no int64 copy of the ids (medium/en bert: 462k final tokens, ~5 MiB less)."""
        if self.word_of is None:
            return self._lean_segmentation(n_words)
        live = is_symbol(self.sym)
        lengths = np.bincount(self.word_of[live], minlength=n_words)
        offsets = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, self.sym[live]

    def _lean_segmentation(self, n_words: int) -> tuple[np.ndarray, np.ndarray]:
        """`segmentation` of a training layout, `SEGMENT_CHUNK` positions at a time (each
        position's word is the SEPs up to it, minus one), the ids into an `ondisk` array: a
        mask or a copy of the whole layout at once took ~2 bytes per position beyond the ids
        (5 GB of text: ~0.8 GB)."""
        sym = self.sym
        sep = marks(sym.dtype)[0]
        total = 0
        for lo in range(0, sym.size, SEGMENT_CHUNK):
            total += int(np.count_nonzero(is_symbol(sym[lo:lo + SEGMENT_CHUNK])))
            ondisk.drop_pages()
        ids = ondisk.empty(total, sym.dtype)
        lengths = np.zeros(n_words + 1, dtype=np.int64)
        at = seps = 0  # ids written; SEPs before the chunk
        for lo in range(0, sym.size, SEGMENT_CHUNK):
            part = sym[lo:lo + SEGMENT_CHUNK]
            live = is_symbol(part)
            word = np.cumsum(part == sep, dtype=np.int32)  # SEPs up to each position
            n_seps = int(word[-1]) if part.size else 0
            kept = part[live]
            ids[at:at + kept.size] = kept
            at += kept.size
            if kept.size:
                word = word[live]
                first = seps + int(word[0]) - 1
                counts = np.bincount(word - word[0])
                lengths[first:first + counts.size] += counts
            seps += n_seps
            del part, live, word, kept
            ondisk.drop_pages()
        offsets = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths[:n_words], out=offsets[1:])
        return offsets, ids


def _check_positions(size: int) -> None:
    if size >= 1 << 31:
        raise TokcolumnarError(
            f"the corpus has {size:,} symbols in its distinct words, over the 2**31 the "
            "merge loop's int32 positions hold")


#: `Layout.segmentation` of a training layout reads this many positions at a time.
SEGMENT_CHUNK = 1 << 22
#: `_sep_ranks` reads this many positions at a time (a multiple of 64).
SEP_CHUNK = 1 << 22


def _sep_ranks(sym: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The SEPs of a fresh layout as bits (uint64 words, bit i of word k: position
    64k + i) and, per word of bits, the SEPs before it (int32); `SEP_CHUNK` positions at a
    time (a whole layout's `sym == SEP` was a byte per position at once)."""
    bits = ondisk.empty(-(-sym.size // 64), np.uint64)
    sep = marks(sym.dtype)[0]
    for at in range(0, sym.size, SEP_CHUNK):
        packed = np.packbits(sym[at:at + SEP_CHUNK] == sep, bitorder="little")
        pad = -packed.size % 8
        if pad:
            packed = np.append(packed, np.zeros(pad, dtype=np.uint8))
        # bit i of byte k: position 8k + i
        bits[at // 64:at // 64 + packed.size // 8] = packed.view("<u8")
    rank = ondisk.empty(bits.size, np.int32)
    rank[0] = 0
    np.cumsum(np.bitwise_count(bits)[:-1], dtype=np.int32, out=rank[1:])
    return bits, rank


def code_points(words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every character of every word as one flat array of code points, and each word's length
    in characters (UTF-32 of the concatenation, joined by Polars: no Python string per word,
    which took half of the initial stage on 100 MB of byte-level Chinese)."""
    lengths = words.str.len_chars().to_numpy().astype(np.int64)
    joined = words.str.join("").item() if len(words) else ""
    flat = np.frombuffer(joined.encode("utf-32-le"), dtype=np.int32)
    return flat, lengths
