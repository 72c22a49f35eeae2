"""Alphabet, token ids and initial symbols: the `words` table -> a vocabulary and a flat symbol
layout ready for the merge loop.

Ids (docs/architecture.md, "Ids"): special tokens in the given order; with byte fallback the
256 byte pieces `<0x00>` … `<0xFF>`; then the alphabet sorted by
code point; then the end-of-word token, then prefixed/suffixed variants (`##a`, `a</w>`) sorted by
string. Characters outside a limited alphabet are dropped from words, as HF does."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import TokcolumnarError
from ..layout import Layout, code_points
from ..memory import NARROW_IDS


@dataclass
class Vocab:
    """Token strings by id, with kind, creation rank and base length (prefix/suffix excluded)."""

    tokens: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    base_len: list[int] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)

    def add(self, token: str, kind: str, base_len: int) -> int:
        found = self.ids.get(token)
        if found is not None:
            return found
        self.ids[token] = len(self.tokens)
        self.tokens.append(token)
        self.kinds.append(kind)
        self.base_len.append(base_len)
        return len(self.tokens) - 1

    def joined(self, a: int, b: int, prefix: str | None) -> str:
        """The token a merge of (a, b) makes: the continuing prefix leaves the right part
        (`##a` + `##b` -> `##ab`)."""
        right = self.tokens[b]
        if prefix and right.startswith(prefix):
            right = right[len(prefix):]
        return self.tokens[a] + right

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Initial:
    vocab: Vocab
    layout: Layout
    n_words: int


#: The initial stage reads the words about this many characters at a time (whole words): its
#: transients (the characters' code points, keys, flags and ids, and the Python strings that
#: give the code points: ~20 bytes a character) are one chunk's, not the corpus's (100 MB of
#: Chinese at once: ~1.3 GB beside the layout), and the layout is written chunk by chunk
#: (`Layout.lean_from_chunks`; into files when the loop runs on disk, `ondisk`).
ALPHABET_CHUNK = 1 << 22


def word_chunks(lengths: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """Row ranges `[lo, hi)` of consecutive words holding about `chunk` characters each (at
    least one word each; a longer word is a chunk alone)."""
    ends = np.cumsum(lengths)
    ranges, lo = [], 0
    while lo < lengths.size:
        done = int(ends[lo - 1]) if lo else 0
        hi = max(int(np.searchsorted(ends, done + chunk, side="right")), lo + 1)
        ranges.append((lo, hi))
        lo = hi
    return ranges


def select_alphabet(count: np.ndarray, limit: int | None, initial: list[str]) -> np.ndarray:
    """Code points of the alphabet, sorted, from `count` (the summed word counts of each code
    point, float64, indexed by code point): every character, or the `limit` most frequent
    (the initial alphabet first, ties by code point), as HF's `compute_alphabet`. No sort of
    the corpus."""
    uniq = np.flatnonzero(count > 0)
    count = count[uniq]
    if initial:
        extra = np.array(sorted({ord(c) for c in initial}), dtype=np.int64)
        count = np.concatenate([count[~np.isin(uniq, extra)], np.full(extra.size, np.inf)])
        uniq = np.concatenate([uniq[~np.isin(uniq, extra)], extra])
    if limit is not None and uniq.size > limit:
        uniq = uniq[np.lexsort((uniq, -count))[:limit]]
    return np.sort(uniq)


class _Chunks:
    """The words table read `ALPHABET_CHUNK` characters at a time (`word_chunks`)."""

    def __init__(self, words: pl.DataFrame) -> None:
        self.column = words.get_column("word")
        self.lengths = self.column.str.len_chars().to_numpy().astype(np.int64)
        self.ranges = word_chunks(self.lengths, ALPHABET_CHUNK)

    def code_points(self, lo: int, hi: int) -> np.ndarray:
        return code_points(self.column.slice(lo, hi - lo))[0]

    def weighted_counts(self, counts: np.ndarray) -> np.ndarray:
        """The summed word counts of each code point (float64, indexed by code point; the
        sums are of integers, exact in float64 below 2**53, so the order of summing changes
        nothing)."""
        total = np.zeros(0)
        for lo, hi in self.ranges:
            weights = np.repeat(counts[lo:hi].astype(np.float64), self.lengths[lo:hi])
            sums = np.bincount(self.code_points(lo, hi), weights=weights)
            if sums.size > total.size:
                total = np.pad(total, (0, sums.size - total.size))
            total[:sums.size] += sums
        return total

    def keys(self, lo: int, hi: int, kept_cp: np.ndarray, prefix: bool, suffix: bool
             ) -> tuple[np.ndarray, np.ndarray]:
        """The lookup keys (`code point << 2 | flags`, int32) of words lo..hi's kept
        characters, and each one's word index within the chunk (int32)."""
        cps, lengths = self.code_points(lo, hi), self.lengths[lo:hi]
        # int32 keys (code points < 2**21, so key < 2**23), shifted in place
        keys = cps.astype(np.int32)
        keys <<= 2
        if prefix or suffix:
            starts = (np.cumsum(lengths) - lengths)[lengths > 0]
            if prefix:  # not word-initial (HF: by original position)
                keys |= 1
                keys[starts] &= ~1
            if suffix:  # word-final
                keys[starts + lengths[lengths > 0] - 1] |= 2
        word = np.repeat(np.arange(hi - lo, dtype=np.int32), lengths)
        keep = kept_cp[cps]
        if not keep.all():
            keys, word = keys[keep], word[keep]
        return keys, word


def build_initial(words: pl.DataFrame, special_tokens: list[str], limit_alphabet: int | None,
                  initial_alphabet: list[str], prefix: str | None, suffix: str | None,
                  eow_token: str | None, variant_order: list[str] | None = None,
                  byte_fallback: bool = False, vocab_size: int | None = None) -> Initial:
    """Assign ids and lay out every word's initial symbols (prefix/suffix variants included).

    Characters map to ids through a lookup table indexed by `code point << 2 | flags` (bit 0:
    not word-initial, for the prefix; bit 1: word-final, for the suffix), so the whole corpus
    is mapped by array gathers, a chunk of words at a time (`ALPHABET_CHUNK`): one read for
    the alphabet, one for the keys present (the variants) and the symbols per word, one for
    the ids into the layout. `variant_order` puts the listed variants first, in that order
    (HF assigns variant ids in hash order; giving its order reproduces its tie-breaks).
    `byte_fallback`: the 256 byte pieces follow the special tokens (kind `byte`), as HF's
    BpeTrainer gives them when they are listed as its special tokens (docs/llama2.md)."""
    counts = words.get_column("count").to_numpy().astype(np.int64)
    chunks = _Chunks(words)
    vocab = Vocab()
    for t in special_tokens:
        vocab.add(t, "special", len(t))
    if byte_fallback:
        for b in range(256):
            vocab.add(f"<0x{b:02X}>", "byte", 0)
    # 1. the alphabet
    weighted = chunks.weighted_counts(counts)
    alphabet = select_alphabet(weighted, limit_alphabet, initial_alphabet)
    for c in alphabet.tolist():
        vocab.add(chr(c), "alphabet", 1)
    if eow_token is not None:
        vocab.add(eow_token, "special" if eow_token in special_tokens else "alphabet", 0)
    # characters kept: the alphabet plus any single-character token (e.g. a special "a")
    singles = sorted({ord(t) for t in vocab.ids if len(t) == 1})
    top = max([weighted.size, *(c + 1 for c in singles)])
    del weighted
    kept_cp = np.zeros(top, dtype=bool)
    kept_cp[singles] = True
    # 2. the keys present (their variants get ids) and each word's kept characters
    seen = np.zeros(4 * top, dtype=bool)
    sym_lengths = np.zeros(len(counts), dtype=np.int64)
    flags = (prefix is not None, suffix is not None)
    for lo, hi in chunks.ranges:
        keys, word = chunks.keys(lo, hi, kept_cp, *flags)
        seen[keys] = True
        sym_lengths[lo:hi] = np.bincount(word, minlength=hi - lo)
    present = np.flatnonzero(seen)
    del seen

    def spell(key: int) -> str:
        t = chr(key >> 2)
        return (prefix if key & 1 else "") + t + (suffix if key & 2 else "")

    spelled = [spell(k) for k in present.tolist()]
    variants = sorted(set(spelled) - set(vocab.ids))
    if variant_order:  # ids fixed by a given order (e.g. to mirror another tokenizer's ids)
        rank = {t: i for i, t in enumerate(variant_order)}
        variants.sort(key=lambda v: (rank.get(v, len(rank)), v))
    for v in variants:
        vocab.add(v, "variant", 1)
    lut = np.full(4 * top, -1, dtype=np.int32)  # ids as int32, as the layout holds them
    lut[present] = [vocab.ids[t] for t in spelled]
    eow = vocab.ids[eow_token] if eow_token is not None else None
    if eow is not None:
        sym_lengths += 1

    # 3. the ids, chunk by chunk, into the layout
    def ids_of_chunks() -> Iterator[tuple[int, int, np.ndarray]]:
        for lo, hi in chunks.ranges:
            keys, word = chunks.keys(lo, hi, kept_cp, *flags)
            ids = lut[keys]
            if eow is not None:  # after each word's last kept character
                ends = np.searchsorted(word, np.arange(hi - lo), side="right")
                ids = np.insert(ids, ends, eow)
            yield lo, hi, ids

    layout = Layout.lean_from_chunks(sym_lengths, counts, ids_of_chunks(),
                                     sym_dtype=symbol_dtype(len(vocab), vocab_size))
    return Initial(vocab, layout, len(words))


def symbol_dtype(n_initial: int, vocab_size: int | None) -> type:
    """The layout's id type: uint16 when every id the loop can make fits below its two marks
    (`layout.marks`: a vocabulary of at most 65,534 tokens, GPT-2's 50k and 64k ones included:
    2 bytes per symbol of the merge loop, not 4; 100 MB of Chinese at 30k: ~200 MB less), else
    int32 (a vocabulary stays far below 2**31). Ids are below the vocab size, and the initial
    vocabulary's below its own size."""
    largest = max(n_initial, vocab_size if vocab_size is not None else 1 << 31)
    return np.uint16 if largest <= NARROW_IDS else np.int32


def check_vocab_size(vocab_size: int, n_initial: int) -> None:
    if vocab_size < n_initial:
        raise TokcolumnarError(
            f"--vocab-size {vocab_size} is below the initial vocabulary ({n_initial} special "
            "tokens, characters and variants); raise it or use --limit-alphabet")
