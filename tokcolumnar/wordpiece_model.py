"""The WordPiece model: greedy longest-match-first, as HF's `models.WordPiece`, run columnar.

For every word: from the current start, the longest piece (prefixed with `##` when not at the
start of the word) that is in the vocabulary is taken; a word with a position where no piece
matches, or longer than `max_input_chars_per_word` characters, becomes a single `[UNK]`.

All distinct words of a batch advance together, one piece per round: a round lists, for every
unfinished word, its candidate pieces (every length from 1 to the longest vocabulary token
that fits), joins them with the vocabulary and keeps the longest match per word. The number of
rounds is the largest number of pieces of a word, not the number of words."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl

from .errors import TokcolumnarError
from .models import MODEL_TYPES, Model, lists_from_flat


@dataclass
class WordPieceModel(Model):
    """Vocabulary + unk token + continuing prefix + maximum word length (HF defaults)."""

    hf_type: ClassVar[str] = "WordPiece"
    vocab: dict[str, int]
    unk_token: str = "[UNK]"
    continuing_subword_prefix: str = "##"
    max_input_chars_per_word: int = 100
    _frame: pl.DataFrame | None = field(default=None, repr=False)
    _max_len: tuple[int, int] = field(default=(0, 0), repr=False)

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
    def _vocab_frame(self) -> pl.DataFrame:
        if self._frame is None:
            prefix = self.continuing_subword_prefix
            frame = pl.DataFrame({"piece": list(self.vocab), "id": list(self.vocab.values())},
                                 schema={"piece": pl.String, "id": pl.UInt32})
            lens = frame.get_column("piece").str.len_chars()
            cont = frame.get_column("piece").str.starts_with(prefix) if prefix else None
            first = int(lens.max() or 0)
            rest = first
            if prefix:
                rest = int((lens.filter(cont) - len(prefix)).max() or 0)
                # a piece after the start is looked up as prefix + text: only tokens with
                # the prefix can match there
            self._frame = frame
            self._max_len = (first, max(rest, 0))
        return self._frame

    def unk_id(self) -> int:
        uid = self.vocab.get(self.unk_token)
        if uid is None:
            raise TokcolumnarError(f"WordPiece: the unknown token {self.unk_token!r} is not in "
                                   "the vocabulary, and a word cannot be tokenized")
        return uid

    def tokenize_flat(self, words: pl.Series) -> tuple[np.ndarray, pl.Series]:
        """(word index per piece, piece ids), pieces in word order then position order."""
        vocab = self._vocab_frame()
        max_first, max_rest = self._max_len
        prefix = self.continuing_subword_prefix or ""
        n_words = len(words)
        frame = pl.DataFrame({"w": np.arange(n_words, dtype=np.int64),
                              "word": words.cast(pl.String)}).with_columns(
            pl.col("word").str.len_chars().cast(pl.Int64).alias("n"),
            pl.lit(0, dtype=pl.Int64).alias("s"))
        frame = frame.filter(pl.col("n") > 0)
        too_long = frame.filter(pl.col("n") > self.max_input_chars_per_word).get_column("w")
        active = frame.filter(pl.col("n") <= self.max_input_chars_per_word)
        pieces: list[pl.DataFrame] = []
        bad: list[pl.Series] = [too_long]
        first_round = True
        while active.height:
            cap = max_first if first_round else max_rest
            if cap <= 0:
                bad.append(active.get_column("w"))
                break
            text = pl.col("word").str.slice(pl.col("s"), pl.col("l"))
            piece = text if first_round else pl.lit(prefix) + text
            found = (active.lazy()
                     .with_columns(pl.int_ranges(
                         pl.min_horizontal(pl.col("n") - pl.col("s"), pl.lit(cap)), 0, -1,
                         dtype=pl.Int64).alias("l"))
                     .explode("l")
                     .with_columns(piece.alias("piece"))
                     .join(vocab.lazy(), on="piece", how="inner")
                     .group_by("w")
                     .agg(pl.col("l").max().alias("best"),
                          pl.col("id").sort_by("l").last(),
                          pl.col("s").first(), pl.col("n").first(), pl.col("word").first())
                     .collect())
            missed = active.join(found.select("w"), on="w", how="anti").get_column("w")
            if missed.len():
                bad.append(missed)
            pieces.append(found.select("w", "s", "id"))
            active = (found.with_columns((pl.col("s") + pl.col("best")).alias("s"))
                      .filter(pl.col("s") < pl.col("n"))
                      .select("w", "word", "n", "s"))
            first_round = False
        flat = (pl.concat(pieces) if pieces else
                pl.DataFrame(schema={"w": pl.Int64, "s": pl.Int64, "id": pl.UInt32}))
        bad_w = pl.concat(bad)
        if bad_w.len():
            flat = flat.filter(~pl.col("w").is_in(bad_w.implode()))
            unk = pl.DataFrame({"w": bad_w, "s": pl.Series([0] * bad_w.len(), dtype=pl.Int64),
                                "id": pl.Series([self.unk_id()] * bad_w.len(),
                                                dtype=pl.UInt32)})
            flat = pl.concat([flat, unk])
        flat = flat.sort("w", "s")
        return flat.get_column("w").to_numpy(), flat.get_column("id").rename("ids")

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
