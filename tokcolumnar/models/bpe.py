"""The BPE model (the encode side): `BPEModel` applies merges exactly as HF's BPE model does:
in every word, repeatedly merge the adjacent pair with the lowest merge rank (leftmost first).
All words advance together, one merge per word per round, as NumPy passes over a flat layout;
a round only visits words that still have a mergeable pair."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..errors import TokcolumnarError, TokcolumnarValueError
from ..hfjson import HFObject
from ..training.symbols import Layout
from .base import Model, explode_chars, lists_from_flat, vocab_from_hf


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

    def encode_words(self, words: pl.Series) -> pl.Series:
        lengths, ids = self.initial_symbols(words)
        layout = Layout.from_symbols(lengths, ids, np.ones(len(words), dtype=np.int64))
        self.apply_merges(layout)
        live = np.flatnonzero(layout.sym >= 0)
        return lists_from_flat(len(words), layout.word_of[live],
                               pl.Series("ids", layout.sym[live].astype(np.uint32)))

    def apply_merges(self, layout: Layout,
                     trace: list[tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        """Merge, in every word at once, the lowest-rank pair (leftmost on ties), until no word
        has a pair left in the merge table. `trace` (the report's bytes-per-token curve) gets,
        per round, the words that merged and the rank each applied."""
        keys, ranks, new = self.merge_table()
        if keys.size == 0:
            return
        sym, nxt = layout.sym, layout.nxt
        active = np.flatnonzero(sym >= 0)  # positions of words that may still merge
        # rank * rank_scale + position: the smallest is the lowest rank, leftmost on ties
        rank_scale = np.int64(1) << 40
        while active.size:
            # the pairs starting at live positions of the active words
            active = active[sym[active] >= 0]
            right = sym[nxt[active]]
            has_right = right >= 0
            candidates = active[has_right]
            pair = (sym[candidates] << 32) | right[has_right]
            # look each pair up in the sorted merge table
            slot = np.searchsorted(keys, pair)
            slot[slot == keys.size] = 0
            found = keys[slot] == pair
            if not found.any():
                break
            candidates, slot = candidates[found], slot[found]
            # per word, the best pair: one merge per word per round
            order_key = ranks[slot] * rank_scale + candidates
            word = layout.word_of[candidates]
            starts = np.flatnonzero(np.r_[True, word[1:] != word[:-1]])
            best = np.minimum.reduceat(order_key, starts)
            if trace is not None:
                trace.append((word[starts].astype(np.int64), best // rank_scale))
            pos = best % rank_scale
            new_id = new[slot[np.searchsorted(candidates, pos)]]
            layout.merge_at(pos, new_id)
            # only the words that merged this round can merge again
            active = active[np.isin(layout.word_of[active], word[starts])]

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
            pair = m.split(" ") if isinstance(m, str) else m
            if not (isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(x, str) for x in pair)):
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
