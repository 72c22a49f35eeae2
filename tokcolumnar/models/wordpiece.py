"""The WordPiece model: greedy longest-match-first, as HF's `models.WordPiece`, run columnar.

For every word: from the current start, the longest piece (prefixed with `##` when not at the
start of the word) that is in the vocabulary is taken; a word with a position where no piece
matches, or longer than `max_input_chars_per_word` characters, becomes a single `[UNK]`.

All distinct words of a batch are handled together: one join lists, for every position of
every word, the longest vocabulary piece starting there (candidates of every length up to the
longest token beginning with that character); the greedy walk through those positions then
advances all words at once, one NumPy step per piece."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import lists_from_flat, string_parts
from ..errors import TokcolumnarError, TokcolumnarValueError
from ..hfjson import HFObject
from .base import Model, vocab_from_hf

# Rust's `char::is_whitespace` (Unicode White_Space), what HF's `trim_end` removes; Python's
# `str.isspace` also counts U+001C..U+001F
RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                   "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
CHUNK_WORDS = 50_000  # words per candidate join (bounds the memory of the candidate table)
HASH_BASE = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """HASH_BASE**i and its inverse**i modulo 2**64, i < n."""
    inv = pow(HASH_BASE, -1, 1 << 64)
    pw = np.full(n, HASH_BASE, dtype=np.uint64)
    pw[0] = 1
    pinv = np.full(n, inv, dtype=np.uint64)
    pinv[0] = 1
    return np.cumprod(pw, dtype=np.uint64), np.cumprod(pinv, dtype=np.uint64)


def _prefix_sums(data: np.ndarray, pw: np.ndarray) -> np.ndarray:
    """S[i] = sum of data[j] * B**j for j < i (modulo 2**64)."""
    out = np.zeros(data.size + 1, dtype=np.uint64)
    np.cumsum(data.astype(np.uint64) * pw[:data.size], dtype=np.uint64, out=out[1:])
    return out


def _range_hash(sums: np.ndarray, pinv: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hash of bytes [a, b): sum of data[a + j] * B**j (the same for equal byte strings
    wherever they are)."""
    return (sums[b] - sums[a]) * pinv[a]


def _lookup(queries: np.ndarray, keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """vals[k] for each query equal to keys[k] (keys sorted, unique), -1 where absent."""
    if queries.size > 20_000:  # a hash join beats binary search on many queries
        table = pl.DataFrame({"k": keys, "v": vals})
        got = pl.DataFrame({"k": queries}).join(table, on="k", how="left",
                                                maintain_order="left")
        return got.get_column("v").fill_null(-1).to_numpy()
    j = np.searchsorted(keys, queries)
    j[j == keys.size] = 0
    return np.where(keys[j] == queries, vals[j], -1)


def _char_counts(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    starts = np.flatnonzero((data & 0xC0) != 0x80)
    n = offsets.size - 1
    return np.bincount(np.searchsorted(offsets, starts, side="right") - 1,
                       minlength=n).astype(np.int64)[:n]


@dataclass
class WordPieceModel(Model):
    """Vocabulary + unk token + continuing prefix + maximum word length (HF defaults)."""

    hf_type: ClassVar[str] = "WordPiece"
    vocab: dict[str, int]
    unk_token: str = "[UNK]"
    continuing_subword_prefix: str = "##"
    max_input_chars_per_word: int = 100
    _frame: pl.DataFrame | None = field(default=None, repr=False)
    _caps: pl.DataFrame | None = field(default=None, repr=False)
    _hashes: dict[str, Any] | None = field(default=None, repr=False)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> WordPieceModel:
        """The `model` object of a `tokenizer.json`, checked: HF requires every field. The
        unknown token need not be in the vocabulary (as in HF, encoding fails only when a word
        needs it)."""
        obj = HFObject(d, "model WordPiece")
        return cls(vocab=vocab_from_hf(obj), unk_token=obj.str("unk_token"),
                   continuing_subword_prefix=obj.str("continuing_subword_prefix"),
                   max_input_chars_per_word=obj.int("max_input_chars_per_word"))

    @classmethod
    def from_vocab_txt(cls, path: str | Path, **kw: Any) -> WordPieceModel:
        """Read a BERT `vocab.txt` (one token per line, line number = id) exactly as HF's
        `WordPiece.read_file`: lines end at `\n`, trailing whitespace is dropped, a repeated
        token keeps its last line."""
        try:
            text = Path(path).read_bytes().decode("utf-8")  # no newline translation
        except (OSError, UnicodeDecodeError) as e:
            raise TokcolumnarError(f"cannot read vocab file {path}: {e}") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocab: dict[str, int] = {}
        for i, line in enumerate(lines):
            vocab[line.rstrip(RUST_WHITESPACE)] = i
        return cls(vocab=vocab, **kw)

    def to_hf(self) -> dict[str, Any]:
        return {"type": "WordPiece", "unk_token": self.unk_token,
                "continuing_subword_prefix": self.continuing_subword_prefix,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                "vocab": self.vocab}

    # -- encoding --------------------------------------------------------------------------
    def _tables(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The vocabulary as (piece, id), and per (first character, continuation?) the
        longest piece length in characters (prefix excluded): candidates longer than that
        cannot match."""
        if self._frame is None:
            prefix = self.continuing_subword_prefix or ""
            frame = pl.DataFrame({"piece": list(self.vocab), "id": list(self.vocab.values())},
                                 schema={"piece": pl.String, "id": pl.UInt32})
            # at the start of a word any piece can match as written; after it, only the
            # prefixed pieces, by the text that follows the prefix
            first = frame.select(pl.lit(False).alias("cont"), pl.col("piece").alias("body"))
            rest = frame.filter(pl.col("piece").str.starts_with(prefix)
                                & (pl.col("piece").str.len_chars() > len(prefix))).select(
                pl.lit(True).alias("cont"), pl.col("piece").str.slice(len(prefix)).alias("body"))
            lens = (pl.concat([first, rest]).lazy()
                    .with_columns(pl.col("body").str.slice(0, 1).alias("c"),
                                  pl.col("body").str.len_chars().cast(pl.Int64).alias("cap"))
                    .group_by("cont", "c").agg(pl.col("cap").max()).collect())
            self._frame = frame
            self._caps = lens
        return self._frame, self._caps

    def unk_id(self) -> int:
        uid = self.vocab.get(self.unk_token)
        if uid is None:
            raise TokcolumnarValueError(f"WordPiece: the unknown token {self.unk_token!r} is not "
                                        "in the vocabulary, and a word cannot be tokenized")
        return uid

    def _longest(self, frame: pl.DataFrame) -> pl.DataFrame:
        """For every start position of every word: the longest vocabulary piece there
        (`l` characters, `id`), prefixed with the continuing prefix after the first position.
        Positions with no piece are absent."""
        vocab, caps = self._tables()
        prefix = self.continuing_subword_prefix or ""
        text = pl.col("word").str.slice(pl.col("s"), pl.col("l"))
        piece = pl.when(pl.col("s") == 0).then(text).otherwise(pl.lit(prefix) + text)
        return (frame.lazy()
                .with_columns(pl.int_ranges(0, pl.col("n"), dtype=pl.Int64).alias("s"))
                .explode("s")
                .with_columns(pl.col("word").str.slice(pl.col("s"), 1).alias("c"),
                              (pl.col("s") > 0).alias("cont"))
                .join(caps.lazy(), on=["cont", "c"], how="inner")
                .with_columns(pl.int_ranges(
                    pl.min_horizontal(pl.col("n") - pl.col("s"), pl.col("cap")), 0, -1,
                    dtype=pl.Int64).alias("l"))
                .explode("l")
                .select("w", "s", "l", piece.alias("piece"))
                .join(vocab.lazy(), on="piece", how="inner")
                .group_by("w", "s")
                .agg(pl.col("id").sort_by("l").last(), pl.col("l").max())
                .collect())

    # -- hashed candidate lookup ---------------------------------------------------------
    def _hash_tables(self) -> dict[str, Any]:
        """Polynomial hashes of every piece as written (usable at a word start) and of the
        text after the prefix of every prefixed piece (usable after it), sorted for
        `searchsorted`, with the pieces' UTF-8 bytes for the exact check."""
        if self._hashes is None:
            prefix = (self.continuing_subword_prefix or "").encode("utf-8")
            tokens = list(self.vocab)
            ids = np.array(list(self.vocab.values()), dtype=np.int64)
            offsets, data = string_parts(pl.Series(tokens, dtype=pl.String))
            pw = _powers(data.size + 1)
            sums = _prefix_sums(data, pw[0])
            start, end = offsets[:-1], offsets[1:]
            n_chars = _char_counts(data, offsets)
            full = _range_hash(sums, pw[1], start, end)
            is_cont = np.array([t.encode("utf-8").startswith(prefix) for t in tokens],
                               dtype=bool) & ((end - start) > len(prefix))
            body_start = start + np.where(is_cont, len(prefix), 0)
            body = _range_hash(sums, pw[1], body_start, end)
            n_prefix = len(self.continuing_subword_prefix or "")
            out: dict[str, Any] = {"data": data, "max_id": int(ids.max(initial=-1))}
            tok_start = np.zeros(out["max_id"] + 1, dtype=np.int64)
            tok_body = np.zeros(out["max_id"] + 1, dtype=np.int64)
            tok_end = np.zeros(out["max_id"] + 1, dtype=np.int64)
            tok_start[ids], tok_body[ids], tok_end[ids] = start, body_start, end
            out.update(tok_start=tok_start, tok_body=tok_body, tok_end=tok_end)
            for name, keys, sel, lens in (("first", full, np.ones(ids.size, dtype=bool),
                                           n_chars),
                                          ("cont", body, is_cont, n_chars - n_prefix)):
                k, i, ln = keys[sel], ids[sel], lens[sel]
                order = np.argsort(k, kind="stable")
                k, i = k[order], i[order]
                out[name] = (k, i, int(ln.max(initial=0)),
                             bool(k.size > 1 and (k[1:] == k[:-1]).any()))
            self._hashes = out
        return self._hashes

    def _walk_hashed(self, data: np.ndarray, sums: np.ndarray, pinv: np.ndarray,
                     char_byte: np.ndarray, char_start: np.ndarray, word_end: np.ndarray,
                     idx: np.ndarray, n_chars: np.ndarray) -> tuple[np.ndarray, ...]:
        """The greedy walk of the words `idx`, all at once, one round per piece: every
        candidate at each word's current position (every length up to the longest piece) is
        hashed and looked up in the vocabulary's hashes; the longest hit is the piece.
        Returns (word, start, length, id) per piece and the words with no piece somewhere.
        Hash hits are checked byte for byte afterwards (`_check`)."""
        h = self._hash_tables()
        out: list[tuple[np.ndarray, ...]] = []
        bad = []
        cur_w = idx
        cur_s = np.zeros(idx.size, dtype=np.int64)
        first = True
        while cur_w.size:
            keys, vals, cap, _ = h["first" if first else "cont"]
            rem = n_chars[cur_w] - cur_s
            m = np.minimum(rem, cap)
            rows = int(m.sum())
            step = np.zeros(cur_w.size, dtype=np.int64)
            pid = np.zeros(cur_w.size, dtype=np.int64)
            if rows and keys.size:
                cpos = np.repeat(np.arange(cur_w.size), m)
                ln = np.arange(rows) - np.repeat(np.cumsum(m) - m, m) + 1
                g = (char_start[cur_w] + cur_s)[cpos]
                a = char_byte[g]
                end = np.where(ln == rem[cpos], word_end[cur_w][cpos],
                               char_byte[np.minimum(g + ln, char_byte.size - 1)])
                got = _lookup(_range_hash(sums, pinv, a, end), keys, vals)
                hit = np.flatnonzero(got >= 0)
                if hit.size:
                    hp = cpos[hit]
                    last = np.ones(hp.size, dtype=bool)
                    last[:-1] = hp[1:] != hp[:-1]  # rows go by word, then length upwards
                    best = hit[last]
                    step[cpos[best]] = ln[best]
                    pid[cpos[best]] = got[best]
            miss = step == 0
            if miss.any():
                bad.append(cur_w[miss])
                keep = ~miss
                cur_w, cur_s, step, pid = cur_w[keep], cur_s[keep], step[keep], pid[keep]
            out.append((cur_w, cur_s, step, pid))
            cur_s = cur_s + step
            go_on = cur_s < n_chars[cur_w]
            cur_w, cur_s = cur_w[go_on], cur_s[go_on]
            first = False
        cols = [np.concatenate([o[k] for o in out]) if out else np.zeros(0, dtype=np.int64)
                for k in range(4)]
        return (*cols, np.concatenate(bad) if bad else np.zeros(0, dtype=np.int64))

    def _fill_exact(self, words: pl.Series, sel: np.ndarray, n_chars: np.ndarray,
                    base: np.ndarray, best_len: np.ndarray, best_id: np.ndarray) -> None:
        """The same by joining candidate strings with the vocabulary (no hashing)."""
        for lo in range(0, sel.size, CHUNK_WORDS):
            part = sel[lo:lo + CHUNK_WORDS]
            frame = pl.DataFrame({"w": part, "word": words.gather(part), "n": n_chars[part]})
            found = self._longest(frame)
            at = base[found.get_column("w").to_numpy()] + found.get_column("s").to_numpy()
            best_len[at] = found.get_column("l").to_numpy()
            best_id[at] = found.get_column("id").to_numpy()

    @staticmethod
    def _walk(idx: np.ndarray, n_chars: np.ndarray, base: np.ndarray, best_len: np.ndarray,
              best_id: np.ndarray) -> tuple[np.ndarray, ...]:
        """Greedy walk from position 0 of every word in `idx`, all words at once: returns
        (word, start, length, id) of every piece, and the words with an unmatched position."""
        out: list[tuple[np.ndarray, ...]] = []
        bad = []
        cur_w = idx
        cur_s = np.zeros(idx.size, dtype=np.int64)
        while cur_w.size:
            at = base[cur_w] + cur_s
            step = best_len[at]
            miss = step == 0
            if miss.any():
                bad.append(cur_w[miss])
                keep = ~miss
                cur_w, cur_s, at, step = cur_w[keep], cur_s[keep], at[keep], step[keep]
            out.append((cur_w, cur_s, step, best_id[at]))
            cur_s = cur_s + step
            go_on = cur_s < n_chars[cur_w]
            cur_w, cur_s = cur_w[go_on], cur_s[go_on]
        cols = [np.concatenate([o[k] for o in out]) if out else np.zeros(0, dtype=np.int64)
                for k in range(4)]
        return (*cols, np.concatenate(bad) if bad else np.zeros(0, dtype=np.int64))

    def tokenize_flat(self, words: pl.Series) -> tuple[np.ndarray, pl.Series]:
        """(word index per piece, piece ids), pieces in word order then position order.

        For every position of every word, the longest vocabulary piece starting there is
        found by hashing every candidate (every length up to the longest piece) and looking
        the hashes up in the vocabulary's sorted hashes; the greedy walk (start at 0, jump by
        the piece length) then runs for all words at once, one NumPy step per piece. Every
        piece the walk uses is compared byte for byte with its token; a word with a hash
        collision (never seen in practice) is redone by joining candidate strings."""
        words = words.cast(pl.String).fill_null("")
        n_words = len(words)
        offsets, data = string_parts(words)
        starts_mask = (data & 0xC0) != 0x80
        char_byte = np.flatnonzero(starts_mask).astype(np.int64)
        n_chars = np.bincount(np.searchsorted(offsets, char_byte, side="right") - 1,
                              minlength=n_words).astype(np.int64)[:n_words]
        char_start = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(n_chars, out=char_start[1:])
        ok = (n_chars > 0) & (n_chars <= self.max_input_chars_per_word)
        long_w = np.flatnonzero(n_chars > self.max_input_chars_per_word)
        base = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(np.where(ok, n_chars, 0), out=base[1:])
        best_len = np.zeros(int(base[-1]) + 1, dtype=np.int64)
        best_id = np.zeros(int(base[-1]) + 1, dtype=np.int64)
        idx = np.flatnonzero(ok)
        h = self._hash_tables()
        if h["first"][3] or h["cont"][3]:  # two vocabulary pieces share a hash: no hashing
            self._fill_exact(words, idx, n_chars, base, best_len, best_id)
            w, s, ln, ids, bad = self._walk(idx, n_chars, base, best_len, best_id)
        else:
            pw = _powers(data.size + 1)
            sums = _prefix_sums(data, pw[0])
            w, s, ln, ids, bad = self._walk_hashed(data, sums, pw[1], char_byte, char_start,
                                                   offsets[1:], idx, n_chars)
            wrong = self._check(data, char_byte, char_start, offsets, w, s, ln, ids)
            if wrong.size:  # redo those words exactly
                redo = np.unique(w[wrong])
                for x in redo.tolist():
                    best_len[base[x]:base[x + 1]] = 0
                self._fill_exact(words, redo, n_chars, base, best_len, best_id)
                keep = ~np.isin(w, redo)
                bad = bad[~np.isin(bad, redo)]
                w2, s2, ln2, ids2, bad2 = self._walk(redo, n_chars, base, best_len, best_id)
                w, s, ids = (np.concatenate([w[keep], w2]), np.concatenate([s[keep], s2]),
                             np.concatenate([ids[keep], ids2]))
                bad = np.concatenate([bad, bad2])
        bad_w = np.concatenate([long_w, bad])
        if bad_w.size:
            is_bad = np.zeros(n_words, dtype=bool)
            is_bad[bad_w] = True
            keep = ~is_bad[w]
            w = np.concatenate([w[keep], bad_w])
            s = np.concatenate([s[keep], np.zeros(bad_w.size, dtype=np.int64)])
            ids = np.concatenate([ids[keep], np.full(bad_w.size, self.unk_id(),
                                                     dtype=np.int64)])
        order = np.lexsort((s, w))
        return w[order], pl.Series("ids", ids[order].astype(np.uint32))

    def _check(self, data: np.ndarray, char_byte: np.ndarray, char_start: np.ndarray,
               offsets: np.ndarray, w: np.ndarray, s: np.ndarray, ln: np.ndarray,
               ids: np.ndarray) -> np.ndarray:
        """Indices of the walk's pieces whose bytes differ from their token's."""
        if not w.size:
            return np.zeros(0, dtype=np.int64)
        h = self._hash_tables()
        g = char_start[w] + s
        a = char_byte[g]
        e = char_start[w] + s + ln
        b = np.where(e < char_start[w + 1], char_byte[np.minimum(e, char_byte.size - 1)],
                     offsets[w + 1])
        ta = np.where(s == 0, h["tok_start"][ids], h["tok_body"][ids])
        tb = h["tok_end"][ids]
        n = b - a
        bad = n != (tb - ta)
        n = np.where(bad, 0, n)
        total = int(n.sum())
        if total:
            piece = np.repeat(np.arange(w.size), n)
            k = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
            diff = data[np.repeat(a, n) + k] != h["data"][np.repeat(ta, n) + k]
            if diff.any():
                bad[np.unique(piece[diff])] = True
        return np.flatnonzero(bad)

    def prepare(self) -> None:
        self._hash_tables()

    def encode_words(self, words: pl.Series) -> pl.Series:
        """One list of ids per word (list[u32])."""
        w, ids = self.tokenize_flat(words)
        return lists_from_flat(len(words), w, ids)

    def tokenize(self, word: str) -> list[str]:
        """One word -> its pieces (for inspection and tests)."""
        inv = self.id_to_token()
        ids = self.encode_words(pl.Series([word], dtype=pl.String)).to_list()[0]
        return [inv[i] for i in ids]

