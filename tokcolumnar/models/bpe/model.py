"""The BPE model (the encode side): `BPEModel` applies merges exactly as HF's BPE model does:
in every word, repeatedly merge the adjacent pair with the lowest merge rank (leftmost first).
All words advance together in rounds, as NumPy passes over a flat layout (`tokcolumnar.layout`):
a round merges every occurrence of each word's lowest-rank pair when the merge table is well
formed (one merge per word otherwise), and only visits the positions that start a pair with a
merge, whose ranks are kept and looked up again (in a hashed `pair_index.PairIndex`) only where
a merge changed them.

Long words are first cut where the merge table proves that no merge can ever join the two
sides (`crossing.CrossingFilter`), and only their distinct pieces go through the merge loop;
a byte-level model starts from whole characters where that is exact (`char_tokens`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ...buffers import (
    gather_runs,
    lists_from_flat,
    repeat_runs,
    run_index,
    series_from_arrow,
    string_parts,
    strings_from_parts,
    utf8_chars,
)
from ...errors import TokcolumnarError, TokcolumnarValueError
from ...hfjson import HFObject
from ...layout import Layout, code_points
from ...text.bytelevel import BYTES_TO_UNICODE, UNICODE_TO_BYTES
from ..base import Model, explode_chars
from ..cache import WordCache, distinct_words, group_hashes
from .char_tokens import CharTokens
from .crossing import CrossingFilter
from .hf import fields_from_hf, hf_object
from .pair_index import NO_PAIR, PairIndex

SPLIT_MIN_SYMBOLS = 8  # words with fewer initial symbols go through the merge loop whole


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



def byte_fallback_symbols(lengths: np.ndarray, ids: np.ndarray, cps: np.ndarray,
                          unknown: np.ndarray, fallback: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Initial symbols (lengths, flat ids) with each `unknown` character replaced by its UTF-8
    bytes' pieces (`fallback`: byte -> id, all 256 present)."""
    cp = cps[unknown]
    n_bytes = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)
    per_symbol = np.ones(len(ids), dtype=np.int64)
    per_symbol[unknown] = n_bytes
    out = np.repeat(ids, per_symbol)
    # the unknown characters are rare: their bytes by Python's encoder (surrogates cannot
    # occur in a Polars string)
    data = np.frombuffer("".join(map(chr, cp.tolist())).encode("utf-8"), dtype=np.uint8)
    out[np.repeat(unknown, per_symbol)] = fallback[data]
    word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return np.bincount(word, weights=per_symbol, minlength=len(lengths)).astype(np.int64), out


def fuse_runs(lengths: np.ndarray, ids: np.ndarray, unknown: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """HF's `fuse_unk`: of each run of `unknown` symbols within a word, only the first."""
    word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    run = np.zeros(len(ids), dtype=bool)
    run[1:] = unknown[1:] & unknown[:-1] & (word[1:] == word[:-1])
    return np.bincount(word[~run], minlength=len(lengths)).astype(np.int64), ids[~run]


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
    #: HF's `fuse_unk`: a run of unknown characters is one unknown token
    fuse_unk: bool = False
    #: HF's `byte_fallback`: a character outside the vocabulary is spelled in the byte pieces
    #: `<0x00>` … `<0xFF>` of its UTF-8 bytes (all 256 must be in the vocabulary: `hf.py`)
    byte_fallback: bool = False
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

    def fallback_ids(self) -> np.ndarray:
        """Byte value -> id of its byte piece `<0xNN>` (-1 where the vocabulary lacks it)."""
        return np.array([self.vocab.get(f"<0x{b:02X}>", -1) for b in range(256)],
                        dtype=np.int64)

    def initial_symbols(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """Per-word symbol ids before merging: (lengths, flat ids). A character outside the
        vocabulary is, as in HF's `merge_word`: its UTF-8 bytes' pieces with byte fallback,
        else the unknown token (a run of them one token with `fuse_unk`), else dropped."""
        plain = (self.continuing_subword_prefix is None and self.end_of_word_suffix is None
                 and self.end_of_word_token is None)
        if plain and (self.unk_token is None or self.unk_token in self.vocab
                      or self.byte_fallback):
            # the symbols are the characters: code points through a lookup table
            cps, lengths = code_points(words)
            table = self.char_ids()
            ids = np.full(len(cps), -1, dtype=np.int64)
            inside = cps < len(table)
            ids[inside] = table[cps[inside]]
            unknown = ids < 0
            if not unknown.any():
                return lengths, ids
            if self.byte_fallback:
                return byte_fallback_symbols(lengths, ids, cps, unknown, self.fallback_ids())
            if self.unk_token is not None:  # unknown characters become the unknown token
                ids[unknown] = self.vocab[self.unk_token]
                if self.fuse_unk:
                    return fuse_runs(lengths, ids, unknown)
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
                unknown = ex.get_column("id").is_null().to_numpy()
                ex = ex.with_columns(pl.col("id").fill_null(self.vocab[self.unk_token]))
                if self.fuse_unk and unknown.any():  # a run of them: one (no suffix here)
                    w = ex.get_column("w").to_numpy()
                    run = np.zeros(len(unknown), dtype=bool)
                    run[1:] = unknown[1:] & unknown[:-1] & (w[1:] == w[:-1])
                    ex = ex.filter(pl.Series(~run))
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
        if self.byte_fallback:
            # a byte piece stands for part of a character: as the unknown token below
            fallback = self.fallback_ids()
            eligible &= np.bincount(symbol_word[np.isin(ids, fallback[fallback >= 0])],
                                    minlength=len(lengths)) == 0
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
        return hf_object(self.vocab, self.merges, self.continuing_subword_prefix,
                         self.end_of_word_suffix, self.end_of_word_token, self.unk_token,
                         fuse_unk=self.fuse_unk, byte_fallback=self.byte_fallback)

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
        """The `model` object of a `tokenizer.json`, checked (`hf.fields_from_hf`), every merge
        naming known tokens and producing one."""
        obj = HFObject(d, "model BPE")
        model = cls(**fields_from_hf(obj))
        try:
            model.merge_table()
        except TokcolumnarError as e:
            raise obj.error(str(e)) from None
        return model
