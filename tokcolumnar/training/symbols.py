"""Alphabet, token ids and initial symbols: the `words` table -> a vocabulary and a flat symbol
layout ready for the merge loop.

Ids (docs/architecture.md, "Ids"): special tokens in the given order; with byte fallback the
256 byte pieces `<0x00>` … `<0xFF>`; then the alphabet sorted by
code point; then the end-of-word token, then prefixed/suffixed variants (`##a`, `a</w>`) sorted by
string. Characters outside a limited alphabet are dropped from words, as HF does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import TokcolumnarError
from ..layout import Layout, code_points


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


#: `_weighted_counts` reads the weights of this many characters at a time.
ALPHABET_CHUNK = 1 << 22


def _weighted_counts(cps: np.ndarray, weights: Callable[[slice], np.ndarray]) -> np.ndarray:
    """The summed weights of each code point (float64, indexed by code point), the weights of
    `ALPHABET_CHUNK` characters at a time (`weights(part)`: those of `cps[part]`): the
    weights of every character at once, int64 then float64, were 16 bytes per character on
    the initial stage's peak (the sums are of integers, exact in float64 below 2**53, so the
    order of summing changes nothing)."""
    count = np.zeros(int(cps.max()) + 1 if cps.size else 0)
    for at in range(0, cps.size, ALPHABET_CHUNK):
        part = slice(at, at + ALPHABET_CHUNK)
        sums = np.bincount(cps[part], weights=weights(part))
        count[:sums.size] += sums
    return count


def select_alphabet(cps: np.ndarray, weights: Callable[[slice], np.ndarray],
                    limit: int | None, initial: list[str]) -> np.ndarray:
    """Code points of the alphabet, sorted: every character, or the `limit` most frequent
    (the initial alphabet first, ties by code point), as HF's `compute_alphabet`. Weighted
    `bincount`s over the code points (`weights(part)`: the weights of `cps[part]`, float64):
    no sort of the corpus."""
    count = _weighted_counts(cps, weights)
    uniq = np.flatnonzero(count > 0)
    count = count[uniq]
    if initial:
        extra = np.array(sorted({ord(c) for c in initial}), dtype=np.int64)
        count = np.concatenate([count[~np.isin(uniq, extra)], np.full(extra.size, np.inf)])
        uniq = np.concatenate([uniq[~np.isin(uniq, extra)], extra])
    if limit is not None and uniq.size > limit:
        uniq = uniq[np.lexsort((uniq, -count))[:limit]]
    return np.sort(uniq)


def build_initial(words: pl.DataFrame, special_tokens: list[str], limit_alphabet: int | None,
                  initial_alphabet: list[str], prefix: str | None, suffix: str | None,
                  eow_token: str | None, variant_order: list[str] | None = None,
                  byte_fallback: bool = False) -> Initial:
    """Assign ids and lay out every word's initial symbols (prefix/suffix variants included).

    Characters map to ids through a lookup table indexed by `code point << 2 | flags` (bit 0:
    not word-initial, for the prefix; bit 1: word-final, for the suffix), so the whole corpus
    is mapped by array gathers. `variant_order` puts the listed variants first, in that order
    (HF assigns variant ids in hash order; giving its order reproduces its tie-breaks).
    `byte_fallback`: the 256 byte pieces follow the special tokens (kind `byte`), as HF's
    BpeTrainer gives them when they are listed as its special tokens (docs/llama2.md)."""
    counts = words.get_column("count").to_numpy().astype(np.int64)
    cps, lengths = code_points(words.get_column("word"))
    word_index = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    vocab = Vocab()
    for t in special_tokens:
        vocab.add(t, "special", len(t))
    if byte_fallback:
        for b in range(256):
            vocab.add(f"<0x{b:02X}>", "byte", 0)
    def weights(part: slice, word_index: np.ndarray = word_index) -> np.ndarray:
        return counts[word_index[part]].astype(np.float64)

    alphabet = select_alphabet(cps, weights, limit_alphabet, initial_alphabet)
    del weights
    for c in alphabet.tolist():
        vocab.add(chr(c), "alphabet", 1)
    if eow_token is not None:
        vocab.add(eow_token, "special" if eow_token in special_tokens else "alphabet", 0)
    # characters kept: the alphabet plus any single-character token (e.g. a special "a")
    singles = sorted({ord(t) for t in vocab.ids if len(t) == 1})
    top = max([int(cps.max()) if cps.size else 0, *singles]) + 1
    kept_cp = np.zeros(top, dtype=bool)
    kept_cp[singles] = True
    # int32 keys (code points < 2**21, so key < 2**23): 4 bytes per character, shifted in place
    keys = cps.astype(np.int32)
    keys <<= 2
    if prefix is not None or suffix is not None:
        starts = (np.cumsum(lengths) - lengths)[lengths > 0]
        ends = starts + lengths[lengths > 0] - 1
        if prefix is not None:  # not word-initial (HF: by original position)
            keys |= 1
            keys[starts] &= ~1
        if suffix is not None:  # word-final
            keys[ends] |= 2
    keep = kept_cp[cps]
    del cps
    if not keep.all():
        keys, word_index = keys[keep], word_index[keep]
    del keep
    present = np.flatnonzero(np.bincount(keys, minlength=4 * top))

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
    ids = lut[keys]
    del keys
    if eow_token is not None:
        eow = vocab.ids[eow_token]
        ends = np.searchsorted(word_index, np.arange(len(lengths)), side="right")
        ids = np.insert(ids, ends, eow)
        word_index = np.insert(word_index, ends, np.arange(len(lengths)))
    sym_lengths = np.bincount(word_index, minlength=len(lengths)).astype(np.int64)
    del word_index
    # ids as int32: 4 bytes per symbol in the merge loop (a vocabulary stays far below 2**31)
    layout = Layout.from_symbols(sym_lengths, ids, counts, sym_dtype=np.int32,
                                 lean=True)
    return Initial(vocab, layout, len(words))


def check_vocab_size(vocab_size: int, n_initial: int) -> None:
    if vocab_size < n_initial:
        raise TokcolumnarError(
            f"--vocab-size {vocab_size} is below the initial vocabulary ({n_initial} special "
            "tokens, characters and variants); raise it or use --limit-alphabet")
