"""The encode side of a Unigram model: HF's `models.Unigram` (`encode_optimized`), columnar over
the distinct words of a batch.

Each word's best segmentation is the Viterbi path of its lattice (every vocabulary piece that
occurs in it, an unknown node of score `min_score - 10` wherever no piece of one character
starts), scores summed in float64 from the left as HF sums them; of two paths of equal score
the one whose last piece starts first wins (HF's strict `>` over candidates arriving by start
position). The lattices of all words are flat arrays (`training.unigram_lattice`), the
Viterbi a fold over positions. As in HF, consecutive unknown nodes are fused into one token
whose string is looked up again in the vocabulary, else spelled as `<0xXX>` byte pieces with
`byte_fallback`, else the unknown id."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import gather_table, lists_at
from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, is_json_int, json_kind
from ..training.unigram_lattice import LatticeBase, SeedTrie
from .base import Model

UNK_PENALTY = 10.0  # HF's K_UNK_PENALTY and SentencePiece's kUnkPenalty
MAX_KEPT_SPANS = 1 << 22  # tokens whose spans a SpanStore keeps (~100 MB at most)
_SPANS_LOCK = threading.Lock()


class SpanStore:
    """The token spans (start, length in characters) of the words a Unigram model segmented
    with an unknown token or byte pieces, whose spans their ids do not tell (several runs of
    unknown characters in one word): kept as they are segmented, so that offsets need not
    segment them again. Bounded (`MAX_KEPT_SPANS` tokens, first come first kept); a word
    not found is segmented again."""

    def __init__(self) -> None:
        self.words = pl.Series("w", [], dtype=pl.String)
        self.offsets = np.zeros(1, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.start = np.zeros(0, dtype=np.int64)
        self.length = np.zeros(0, dtype=np.int64)
        self.lock = threading.Lock()

    def add(self, words: pl.Series, ids: np.ndarray, offsets: np.ndarray, start: np.ndarray,
            length: np.ndarray, unsure: np.ndarray) -> None:
        n_tok = np.diff(offsets)
        word_of = np.repeat(np.arange(len(words), dtype=np.int64), n_tok)
        keep = np.unique(word_of[unsure[ids]])
        if not len(keep):
            return
        with self.lock:
            # a word another batch kept meanwhile is not kept twice
            keep = keep[~words.gather(keep).is_in(self.words.implode()).to_numpy()]
            if not len(keep):
                return
            sub_off, sub_ids = gather_table(offsets, ids, keep)
            at = np.repeat(offsets[:-1][keep] - sub_off[:-1], np.diff(sub_off)) + np.arange(
                int(sub_off[-1]), dtype=np.int64)
            room = int(np.searchsorted(sub_off, MAX_KEPT_SPANS - len(self.ids), side="right"))
            if room <= 1:
                return
            keep, sub_off = keep[:room - 1], sub_off[:room]
            n = int(sub_off[-1])
            self.words = pl.concat([self.words, words.gather(keep).rename("w")], rechunk=True)
            self.offsets = np.concatenate([self.offsets, self.offsets[-1] + sub_off[1:]])
            self.ids = np.concatenate([self.ids, sub_ids[:n]])
            self.start = np.concatenate([self.start, start[at[:n]]])
            self.length = np.concatenate([self.length, length[at[:n]]])

    def find(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray]:
        """Each word's entry (-1: not kept), and the kept table (offsets, ids, starts,
        lengths) as it is now."""
        with self.lock:
            table = (self.offsets, self.ids, self.start, self.length)
            kept = self.words.to_frame().with_row_index("entry")
        entry = (words.rename("w").to_frame().join(kept, on="w", how="left",
                                                  maintain_order="left")["entry"])
        return (entry.fill_null(-1).to_numpy().astype(np.int64),) + table


class UnigramModel(Model):
    """Pieces with their log-probability scores (id = position), the unknown piece's id."""

    hf_type: ClassVar[str] = "Unigram"

    def __init__(self, pieces: list[tuple[str, float]], unk_id: int | None = 0,
                 byte_fallback: bool = False) -> None:
        if unk_id is not None and not 0 <= unk_id < len(pieces):
            raise TokcolumnarValueError(f"model Unigram: unk_id {unk_id} is not a piece id "
                                        f"(0..{len(pieces) - 1})")
        self.pieces = pieces
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        # HF's token -> id map: a repeated piece keeps its last id
        self.vocab = {p: i for i, (p, _) in enumerate(pieces)}
        self.scores = np.array([s for _, s in pieces], dtype=np.float64)
        self.min_score = float(self.scores.min()) if len(pieces) else 0.0
        self._table: pl.DataFrame | None = None
        self._piece_lengths: np.ndarray | None = None
        self.spans: SpanStore | None = None

    @property
    def unk_token(self) -> str | None:
        return None if self.unk_id is None else self.pieces[self.unk_id][0]

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> UnigramModel:
        obj = HFObject(d, "model Unigram")
        items = obj.list("vocab")
        pieces = []
        for k, item in enumerate(items):
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str)
                    or isinstance(item[1], bool) or not isinstance(item[1], (int, float))):
                raise obj.error(f"vocab[{k}] must be [piece, score], got {json_kind(item)}")
            pieces.append((item[0], float(item[1])))
        if not pieces:
            raise obj.error("vocab is empty (HF needs at least the unknown piece)")
        unk = obj.raw("unk_id", None)
        if unk is not None and not is_json_int(unk):
            raise obj.error(f"unk_id must be an integer or null, got {json_kind(unk)}")
        return cls(pieces, unk, obj.bool("byte_fallback", False))

    def to_hf(self) -> dict[str, Any]:
        return {"type": "Unigram", "unk_id": self.unk_id,
                "vocab": [[p, s] for p, s in self.pieces], "byte_fallback": self.byte_fallback}

    def prepare(self) -> None:
        self.table()

    def table(self) -> pl.DataFrame:
        """(piece, id, score): the pieces the lattices are built from, each string once."""
        if self._table is None:
            ids = np.fromiter(self.vocab.values(), dtype=np.int64, count=len(self.vocab))
            self._table = pl.DataFrame({"piece": list(self.vocab), "id": ids,
                                        "score": self.scores[ids]})
            self._trie = SeedTrie.build(self._table["piece"])
        return self._table

    def viterbi(self, words: pl.Series) -> tuple[np.ndarray, ...]:
        """Each word's best path (`LatticeBase.viterbi` over the vocabulary's trie, float64):
        its nodes' words, ids, starts and lengths, word after word, left to right."""
        table = self.table()
        base = LatticeBase.build(words, self._trie, begin=False, folds="forward")
        if self.unk_id is None:
            lone = np.flatnonzero(base.forward.code == 2 * base.n_seeds)  # a character no
            if len(lone):                                              # piece covers
                at = int(np.min(base.forward.start[lone]))  # its position -> its word
                word = words[int(np.searchsorted(base.pos_off, at, side="right")) - 1]
                raise TokcolumnarValueError(f"model Unigram: {word!r} has a character no "
                                            "piece covers, and the model has no unk_id")
        return base.viterbi(table["id"].to_numpy(), table["score"].to_numpy(),
                            unk_id=self.unk_id or 0, unk_score=self.min_score - UNK_PENALTY,
                            dtype=np.float64)

    def tokenize_flat(self, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """The ids of every word end to end, and each word's offset into them."""
        ids, offsets, _, _ = self.token_spans(words)
        return ids, offsets

    def token_spans(self, words: pl.Series
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`tokenize_flat`'s ids and offsets, and each token's start and length in characters
        of its word, as HF's `Unigram::tokenize` gives them: an unknown token spans its whole
        run of unknown characters, and each of the `<0xXX>` pieces spelling such a run spans
        all of it."""
        w, ids, b, ln = self.viterbi(words)
        # fuse runs of unknown nodes (HF compares the node's id, so a piece that is the
        # unknown piece itself fuses too)
        unk = ids == self.unk_id if self.unk_id is not None else np.zeros(len(ids), bool)
        starts_run = ~(unk & np.r_[False, unk[:-1]] & np.r_[False, w[1:] == w[:-1]])
        run = np.cumsum(starts_run) - 1
        first = np.flatnonzero(starts_run)
        run_w, run_b = w[first], b[first]
        run_len = np.bincount(run, weights=ln).astype(np.int64)
        run_ids = ids[first].copy()
        run_unk = unk[first]
        per_run = np.ones(len(first), dtype=np.int64)
        extra: dict[int, list[int]] = {}
        if run_unk.any():
            idx = np.flatnonzero(run_unk)
            text = words.gather(run_w[idx]).str.slice(run_b[idx], run_len[idx])
            found = (text.to_frame("piece").join(self.table().select("piece", "id"),
                                                  on="piece", how="left",
                                                  maintain_order="left")["id"])
            hit = found.is_not_null().to_numpy()
            run_ids[idx[hit]] = found.to_numpy()[hit]
            if self.byte_fallback:
                for k, s in zip(idx[~hit].tolist(), text.filter(~hit).to_list()):
                    spelled = [self.vocab.get(f"<0x{x:02X}>") for x in s.encode("utf-8")]
                    if all(i is not None for i in spelled):
                        extra[k] = spelled  # type: ignore[assignment]
                        per_run[k] = len(spelled)
        if extra:
            out = np.repeat(run_ids, per_run)
            at = np.r_[0, np.cumsum(per_run)]
            for k, spelled in extra.items():
                out[at[k]:at[k + 1]] = spelled
            token_w = np.repeat(run_w, per_run)
            run_b, run_len = np.repeat(run_b, per_run), np.repeat(run_len, per_run)
        else:
            out, token_w = run_ids, run_w
        offsets = np.r_[0, np.cumsum(np.bincount(token_w, minlength=len(words)))]
        return out, offsets.astype(np.int64), run_b.astype(np.int64), run_len

    def piece_lengths(self) -> np.ndarray:
        """Per id, its piece's length in characters."""
        if self._piece_lengths is None:
            self._piece_lengths = (pl.Series([p for p, _ in self.pieces], dtype=pl.String)
                                   .str.len_chars().to_numpy().astype(np.int64))
        return self._piece_lengths

    def unsure_pieces(self) -> list[str]:
        """The pieces of `spans_unsure`."""
        return [self.pieces[i][0] for i in np.flatnonzero(self.spans_unsure()).tolist()]

    def spans_unsure(self) -> np.ndarray:
        """Per id, whether a token of that id may span other than its piece's characters: the
        unknown piece (a fused run) and, with byte fallback, the `<0xXX>` pieces."""
        unsure = np.zeros(len(self.pieces), dtype=bool)
        if self.unk_id is not None:
            unsure[self.unk_id] = True
        if self.byte_fallback:
            unsure |= (pl.Series([p for p, _ in self.pieces], dtype=pl.String)
                       .str.contains(r"^<0x[0-9A-F]{2}>$").to_numpy())
        return unsure

    def encode_words(self, words: pl.Series) -> pl.Series:
        ids, offsets, start, length = self.token_spans(words)
        if self.spans is not None:
            self.spans.add(words, ids, offsets, start, length, self.spans_unsure())
        return lists_at(pl.Series("ids", ids, dtype=pl.UInt32), offsets)

    def keep_spans(self) -> SpanStore:
        """From now on, keep the spans of the words `encode_words` segments with a token of
        `spans_unsure` (for offsets: the ids do not tell them)."""
        with _SPANS_LOCK:
            if self.spans is None:
                self.spans = SpanStore()
        return self.spans

    def tokenize(self, word: str) -> list[str]:
        ids, _ = self.tokenize_flat(pl.Series([word]))
        return [self.pieces[i][0] for i in ids.tolist()]
