"""Tokenization models: words -> token ids, applied columnar to the distinct words of a batch.

`BPEModel` applies merges exactly as HF's BPE model does: in every word, repeatedly merge the
adjacent pair with the lowest merge rank (leftmost first). All words advance together, one merge
per word per round, as NumPy passes over a flat layout; a round only visits words that still
have a mergeable pair."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from .alphabet import Layout
from .errors import TokcolumnarError


def explode_chars(words: pl.Series) -> pl.DataFrame:
    """One row per character: word index `w`, character, its index `i` and word length `n`."""
    return (words.to_frame("word").lazy()
            .select(pl.int_range(pl.len(), dtype=pl.Int64).alias("w"),
                    pl.col("word").str.split("").alias("char"))
            .with_columns(pl.col("char").list.len().alias("n"))
            .explode("char")
            .drop_nulls("char")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("w").alias("i"))
            .collect())


def lists_from_flat(n_rows: int, row: np.ndarray, values: pl.Series) -> pl.Series:
    """Group flat values (sorted by row) into one list per row, empty lists for absent rows."""
    lengths = np.bincount(row, minlength=n_rows)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    import pyarrow as pa

    arr = pa.LargeListArray.from_arrays(pa.array(offsets), values.to_arrow())
    return pl.Series(values.name, arr)


class Model:
    """Base class: `encode_words(words)` -> list[u32] per word; HF JSON (de)serialisation."""

    hf_type: ClassVar[str] = ""
    vocab: dict[str, int]

    def encode_words(self, words: pl.Series) -> pl.Series:
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        raise NotImplementedError

    def id_to_token(self) -> list[str]:
        out = [""] * (max(self.vocab.values(), default=-1) + 1)
        for t, i in self.vocab.items():
            out[i] = t
        return out


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

    def merge_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pair keys sorted, with the rank and the new id of each (the last rank wins for a
        pair listed twice, as in HF's merge map)."""
        if self._table is None:
            v, prefix = self.vocab, self.continuing_subword_prefix
            keys, ranks, new = [], [], []
            for rank, (a, b) in enumerate(self.merges):
                if a not in v or b not in v:
                    raise TokcolumnarError(f"merge {rank} ({a!r}, {b!r}) uses an unknown token")
                bb = b[len(prefix):] if prefix and b.startswith(prefix) else b
                t = a + bb
                if t not in v:
                    raise TokcolumnarError(f"merge {rank} produces {t!r}, not in the vocab")
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

    def initial_symbols(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """Per-word symbol ids before merging: (lengths, flat ids)."""
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
        if self.unk_token is not None and self.unk_token in self.vocab:
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

    def encode_words(self, words: pl.Series) -> pl.Series:
        lengths, ids = self.initial_symbols(words)
        lay = Layout.from_symbols(lengths, ids, np.ones(len(words), dtype=np.int64))
        self.apply_merges(lay)
        live = np.flatnonzero(lay.sym >= 0)
        return lists_from_flat(len(words), lay.word_of[live],
                               pl.Series("ids", lay.sym[live].astype(np.uint32)))

    def apply_merges(self, lay: Layout) -> None:
        """Merge, in every word at once, the lowest-rank pair (leftmost on ties), until no word
        has a pair left in the merge table."""
        keys, ranks, new = self.merge_table()
        if keys.size == 0:
            return
        sym, nxt = lay.sym, lay.nxt
        active = np.flatnonzero(sym >= 0)
        big = np.int64(1) << 40
        while active.size:
            active = active[sym[active] >= 0]
            right = sym[nxt[active]]
            has = right >= 0
            cand = active[has]
            k = (sym[cand] << 32) | right[has]
            idx = np.searchsorted(keys, k)
            idx[idx == keys.size] = 0
            found = keys[idx] == k
            if not found.any():
                break
            cand, idx = cand[found], idx[found]
            score = ranks[idx] * big + cand
            word = lay.word_of[cand]
            starts = np.flatnonzero(np.r_[True, word[1:] != word[:-1]])
            best = np.minimum.reduceat(score, starts)
            pos = best % big
            rank_pos = np.searchsorted(cand, pos)
            new_id = new[idx[rank_pos]]
            lay.merge_at(pos, new_id)
            active = active[np.isin(lay.word_of[active], word[starts])]

    def to_hf(self) -> dict[str, Any]:
        return {
            "type": "BPE", "dropout": None, "unk_token": self.unk_token,
            "continuing_subword_prefix": self.continuing_subword_prefix,
            "end_of_word_suffix": self.end_of_word_suffix, "fuse_unk": False,
            "byte_fallback": False, "ignore_merges": False,
            "vocab": self.vocab, "merges": [[a, b] for a, b in self.merges],
        }

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> BPEModel:
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
                  for m in d.get("merges", [])]
        return cls(vocab=dict(d["vocab"]), merges=merges,  # type: ignore[arg-type]
                   continuing_subword_prefix=d.get("continuing_subword_prefix"),
                   end_of_word_suffix=d.get("end_of_word_suffix"),
                   unk_token=d.get("unk_token"))


MODEL_TYPES: dict[str, Any] = {"BPE": BPEModel}


def model_from_hf(d: dict[str, Any]) -> Model:
    if d.get("type") == "WordPiece" and "WordPiece" not in MODEL_TYPES:
        from . import wordpiece_model  # noqa: F401 - registers WordPieceModel
    cls = MODEL_TYPES.get(d.get("type", ""))
    if cls is None:
        raise TokcolumnarError(f"unsupported model in tokenizer.json: {d.get('type')!r}")
    return cls.from_hf(d)
