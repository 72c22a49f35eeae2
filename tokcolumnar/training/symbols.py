"""Alphabet, token ids and initial symbols: the `words` table -> a vocabulary and a flat symbol
layout ready for the merge loop.

Ids (docs/architecture.md, "Ids"): special tokens in the given order; then the alphabet sorted by
code point; then the end-of-word token, then prefixed/suffixed variants (`##a`, `a</w>`) sorted by
string. Characters outside a limited alphabet are dropped from words, as HF does."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import TokcolumnarError

SEP = -1  # word boundary in the flat layout
REMOVED = -2  # right half of a merged pair


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
class Layout:
    """All words in one flat array: `[SEP] w0 symbols [SEP] w1 symbols ... [SEP]`.

    `nxt`/`prv` link the live symbols of each word; `word_of` gives each position's word
    index and `word_count` each word's count (`weights(pos)`: the count of each position's
    word). A pair is named by the position of its left symbol.

    Memory (docs/architecture.md, "Memory"): `sym`, `nxt`, `prv` and `word_of` are int32, so
    16 bytes per position (a symbol, or the SEP before each word) plus 8 per word for its
    count; a training layout keeps ids as int32 (`sym_dtype`), the encoders' int64."""

    sym: np.ndarray
    nxt: np.ndarray
    prv: np.ndarray
    word_of: np.ndarray
    word_count: np.ndarray

    @classmethod
    def from_symbols(cls, lengths: np.ndarray, ids: np.ndarray, counts: np.ndarray,
                     sym_dtype: type = np.int64) -> Layout:
        """Lay out words given their symbol counts, the flat symbol ids and the word counts.
        Symbol k of the flat array (word w) sits at position k + w + 1: one SEP before each
        word. Links and word indexes are int32 (positions must stay below 2**31)."""
        n_words = len(lengths)
        size = int(lengths.sum()) + n_words + 1
        if size >= 1 << 31:
            raise TokcolumnarError(
                f"the corpus has {size:,} symbols in its distinct words, over the 2**31 the "
                "merge loop's int32 positions hold")
        word_index = np.repeat(np.arange(n_words, dtype=np.int32), lengths)
        positions = np.arange(1, len(ids) + 1, dtype=np.int32)
        positions += word_index
        sym = np.full(size, SEP, dtype=sym_dtype)
        sym[positions] = ids
        nxt = np.arange(1, size + 1, dtype=np.int32)
        nxt[-1] = size - 1
        prv = np.arange(-1, size - 1, dtype=np.int32)
        prv[0] = 0
        word_of = np.full(size, -1, dtype=np.int32)
        word_of[positions] = word_index
        return cls(sym, nxt, prv, word_of, np.asarray(counts, dtype=np.int64))

    def weights(self, pos: np.ndarray) -> np.ndarray:
        """The count of the word of each of `pos` (int64; positions of symbols, not SEPs)."""
        return self.word_count[self.word_of[pos]]

    def live_occurrences(self, pos: np.ndarray, a: int, b: int) -> np.ndarray:
        """The positions among `pos` (sorted) where the pair (a, b) still occurs; in runs
        `a a a` only every other one, left to right, as HF merges them."""
        sym, nxt = self.sym, self.nxt
        live = sym[pos] == a
        live &= sym[nxt[pos]] == b
        pos = pos[live]
        del live
        if a == b and pos.size > 1:
            # int32 and in place: a run of one symbol in a long word (`aaaa...`) makes this
            # the size of the word (positions are below 2**31)
            n = pos.size
            chained = np.zeros(n, dtype=bool)
            chained[1:] = nxt[pos[:-1]] == pos[1:]
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
        sym, nxt, prv = self.sym, self.nxt, self.prv
        q = nxt[pos]
        r = nxt[q]
        rs = sym[r]
        sym[pos] = new
        sym[q] = REMOVED
        nxt[pos] = r
        prv[r] = pos
        return prv[pos], rs

    def segmentation(self, n_words: int) -> tuple[np.ndarray, np.ndarray]:
        """Final symbols: (offsets per word, flat ids in the layout's id dtype) in word order.
        A boolean mask selects them, not int64 positions: 1 byte per position instead of 8,
        and no int64 copy of the ids (medium/en bert: 462k final tokens, ~5 MiB less)."""
        live = self.sym >= 0
        lengths = np.bincount(self.word_of[live], minlength=n_words)
        offsets = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets, self.sym[live]


@dataclass
class Initial:
    vocab: Vocab
    layout: Layout
    n_words: int


def code_points(words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every character of every word as one flat array of code points, and each word's length
    in characters (UTF-32 of the concatenation: one C-level pass, no per-word Python)."""
    lengths = words.str.len_chars().to_numpy().astype(np.int64)
    flat = np.frombuffer("".join(words.to_list()).encode("utf-32-le"), dtype=np.int32)
    return flat, lengths


def select_alphabet(cps: np.ndarray, weights: np.ndarray, limit: int | None,
                    initial: list[str]) -> np.ndarray:
    """Code points of the alphabet, sorted: every character, or the `limit` most frequent
    (the initial alphabet first, ties by code point), as HF's `compute_alphabet`. One weighted
    `bincount` over the code points: no sort of the corpus."""
    count = np.bincount(cps, weights=weights) if cps.size else np.zeros(0)
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
                  eow_token: str | None, variant_order: list[str] | None = None) -> Initial:
    """Assign ids and lay out every word's initial symbols (prefix/suffix variants included).

    Characters map to ids through a lookup table indexed by `code point << 2 | flags` (bit 0:
    not word-initial, for the prefix; bit 1: word-final, for the suffix), so the whole corpus
    is mapped by array gathers. `variant_order` puts the listed variants first, in that order
    (HF assigns variant ids in hash order; giving its order reproduces its tie-breaks)."""
    counts = words.get_column("count").to_numpy().astype(np.int64)
    cps, lengths = code_points(words.get_column("word"))
    word_index = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    vocab = Vocab()
    for t in special_tokens:
        vocab.add(t, "special", len(t))
    alphabet = select_alphabet(cps, counts[word_index].astype(np.float64), limit_alphabet,
                               initial_alphabet)
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
    layout = Layout.from_symbols(sym_lengths, ids, counts, sym_dtype=np.int32)
    return Initial(vocab, layout, len(words))


def check_vocab_size(vocab_size: int, n_initial: int) -> None:
    if vocab_size < n_initial:
        raise TokcolumnarError(
            f"--vocab-size {vocab_size} is below the initial vocabulary ({n_initial} special "
            "tokens, characters and variants); raise it or use --limit-alphabet")
