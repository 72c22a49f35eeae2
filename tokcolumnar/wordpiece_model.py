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

from .errors import TokcolumnarError
from .models import MODEL_TYPES, Model, lists_from_flat

CHUNK_WORDS = 50_000  # words per candidate join (bounds the memory of the candidate table)


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

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> WordPieceModel:
        return cls(vocab=dict(d["vocab"]), unk_token=d.get("unk_token", "[UNK]"),
                   continuing_subword_prefix=d.get("continuing_subword_prefix", "##"),
                   max_input_chars_per_word=int(d.get("max_input_chars_per_word", 100)))

    @classmethod
    def from_vocab_txt(cls, path: str | Path, **kw: Any) -> WordPieceModel:
        """Read a BERT `vocab.txt` (one token per line, line number = id), as HF's
        `WordPiece.from_file`."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise TokcolumnarError(f"cannot read vocab file {path}: {e}") from None
        vocab: dict[str, int] = {}
        for i, line in enumerate(text.splitlines()):
            vocab[line.rstrip("\r\n")] = i
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
            cont = (pl.col("piece").str.starts_with(prefix) & (pl.col("piece").str.len_chars()
                                                                > len(prefix))
                    if prefix else pl.lit(False))
            body = pl.when(cont).then(pl.col("piece").str.slice(len(prefix))).otherwise(
                pl.col("piece"))
            lens = (frame.lazy().select(cont.alias("cont"), body.alias("body"))
                    .with_columns(pl.col("body").str.slice(0, 1).alias("c"),
                                  pl.col("body").str.len_chars().cast(pl.Int64).alias("cap"))
                    .group_by("cont", "c").agg(pl.col("cap").max()).collect())
            # a piece that is exactly the prefix (or starts with it without being a
            # continuation) is still a candidate at the start of a word
            self._frame = frame
            self._caps = lens
        return self._frame, self._caps

    def unk_id(self) -> int:
        uid = self.vocab.get(self.unk_token)
        if uid is None:
            raise TokcolumnarError(f"WordPiece: the unknown token {self.unk_token!r} is not in "
                                   "the vocabulary, and a word cannot be tokenized")
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

    def tokenize_flat(self, words: pl.Series) -> tuple[np.ndarray, pl.Series]:
        """(word index per piece, piece ids), pieces in word order then position order.

        One join gives the longest piece at every position of every word; the greedy walk
        (start at 0, jump by the piece length) then runs for all words at once in NumPy,
        one step per piece."""
        n_words = len(words)
        n_chars = words.cast(pl.String).str.len_chars().cast(pl.Int64).fill_null(0).to_numpy()
        ok = (n_chars > 0) & (n_chars <= self.max_input_chars_per_word)
        long_w = np.flatnonzero(n_chars > self.max_input_chars_per_word)
        base = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(np.where(ok, n_chars, 0), out=base[1:])
        best_len = np.zeros(int(base[-1]) + 1, dtype=np.int64)
        best_id = np.zeros(int(base[-1]) + 1, dtype=np.int64)
        idx = np.flatnonzero(ok)
        for lo in range(0, idx.size, CHUNK_WORDS):
            sel = idx[lo:lo + CHUNK_WORDS]
            frame = pl.DataFrame({"w": sel, "word": words.gather(sel).cast(pl.String),
                                  "n": n_chars[sel]})
            found = self._longest(frame)
            at = base[found.get_column("w").to_numpy()] + found.get_column("s").to_numpy()
            best_len[at] = found.get_column("l").to_numpy()
            best_id[at] = found.get_column("id").to_numpy()
        # the greedy walk
        out_w: list[np.ndarray] = []
        out_s: list[np.ndarray] = []
        out_id: list[np.ndarray] = []
        bad = [long_w]
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
            out_w.append(cur_w)
            out_s.append(cur_s)
            out_id.append(best_id[at])
            cur_s = cur_s + step
            go_on = cur_s < n_chars[cur_w]
            cur_w, cur_s = cur_w[go_on], cur_s[go_on]
        w = np.concatenate(out_w) if out_w else np.zeros(0, dtype=np.int64)
        s = np.concatenate(out_s) if out_s else np.zeros(0, dtype=np.int64)
        ids = np.concatenate(out_id) if out_id else np.zeros(0, dtype=np.int64)
        bad_w = np.concatenate(bad)
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

    def encode_words(self, words: pl.Series) -> pl.Series:
        """One list of ids per word (list[u32])."""
        w, ids = self.tokenize_flat(words)
        return lists_from_flat(len(words), w, ids)

    def tokenize(self, word: str) -> list[str]:
        """One word -> its pieces (for inspection and tests)."""
        inv = self.id_to_token()
        ids = self.encode_words(pl.Series([word], dtype=pl.String)).to_list()[0]
        return [inv[i] for i in ids]


MODEL_TYPES["WordPiece"] = WordPieceModel
