"""What the Unigram trainer's rounds did, piece by piece: the `pruned` table (pruned.parquet:
one row per piece dropped, with the step and the reason) and, on request, the trace of the
seeding (the sentences, the options and the seeds) and of every EM iteration and pruning round
(the pieces and scores before and after, the expected counts, the Viterbi frequencies and
losses) that `tokcolumnar crosscheck --model unigram` replays in SQL (docs/unigram.md, "The
pruning table" and "The SQL twin").

Both record seed indices (a piece is its index in the seed list, its string `seeds[i]`) and
the model's float32 arrays as they are; the strings are gathered once, at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from .unigram_options import UnigramOptions

#: Why a piece was dropped, in the order the steps run (docs/unigram.md, "The pruning table").
REASONS = ("em", "never_best", "unused", "loss", "unreachable", "final_cut")
EM, NEVER_BEST, UNUSED, LOSS, UNREACHABLE, FINAL_CUT = range(len(REASONS))
KEPT = -1  # a piece the step keeps

SCHEMA = {"round": pl.UInt32, "iteration": pl.UInt8, "reason": pl.String, "id": pl.UInt32,
          "piece": pl.String, "score": pl.Float64, "expected": pl.Float64,
          "freq": pl.Float64, "loss": pl.Float64}


@dataclass
class Pruning:
    """One pruning round (`PruneSentencePieces`), per piece of the model it prunes: its Viterbi
    frequency over the words (float32), its loss (float32, NaN when it is no candidate), what
    happens to it (`KEPT` or a reason code), and the kept pieces' positions in the new order
    (kept without a loss first, then the candidates by loss); `pruned_size` is the size asked."""

    freq: np.ndarray
    loss: np.ndarray
    reason: np.ndarray
    kept: np.ndarray
    pruned_size: int


@dataclass
class EMStep:
    """One EM iteration: the pieces (seed indices) and scores before, the expected counts of the
    E-step (float32, per piece before), and the pieces and scores after the M-step."""

    round: int
    iteration: int
    seeds: np.ndarray
    scores: np.ndarray
    expected: np.ndarray
    seeds_after: np.ndarray
    scores_after: np.ndarray


@dataclass
class PruneStep:
    """One pruning round: the pieces and scores it starts from and what it did (`Pruning`)."""

    round: int
    seeds: np.ndarray
    scores: np.ndarray
    pruning: Pruning


@dataclass
class UnigramTrace:
    """Every EM iteration and pruning round of a run, with the words (distinct, with their
    counts) and the seed strings they refer to, and what the seeds came from: the sentences
    (rare characters as `▅`) with their counts, the options, and the seed table (piece,
    value, score); filled by `train_unigram(..., trace=...)`."""

    desired: int = 0
    shrinking_factor: float = 0.75
    options: UnigramOptions | None = None
    sentences: pl.Series | None = None
    sentence_counts: np.ndarray | None = None
    seed_table: pl.DataFrame | None = None
    seeds: pl.Series | None = None
    words: pl.Series | None = None
    counts: np.ndarray | None = None
    em: list[EMStep] = field(default_factory=list)
    prunes: list[PruneStep] = field(default_factory=list)

    def pieces(self, seeds: np.ndarray) -> pl.Series:
        """The strings of seed indices."""
        assert self.seeds is not None
        return self.seeds.gather(seeds)


class DropLog:
    """The pieces each step drops, collected as the trainer runs; `table` gives pruned.parquet."""

    def __init__(self) -> None:
        self._parts: list[dict[str, np.ndarray]] = []

    def add(self, round_: int, reason: np.ndarray, seeds: np.ndarray, scores: np.ndarray,
            iteration: int | None = None, expected: np.ndarray | None = None,
            freq: np.ndarray | None = None, loss: np.ndarray | None = None) -> None:
        """The pieces of a model (`seeds`, `scores`: its arrays) whose `reason` is not `KEPT`;
        the optional columns are per piece of the model, kept for the dropped ones."""
        drop = np.flatnonzero(reason != KEPT)
        if not len(drop):
            return
        nan = np.full(len(drop), np.nan)

        def column(values: np.ndarray | None) -> np.ndarray:
            return nan if values is None else values[drop].astype(np.float64)

        self._parts.append({
            "round": np.full(len(drop), round_, np.int64),
            "iteration": np.full(len(drop), -1 if iteration is None else iteration, np.int64),
            "reason": reason[drop].astype(np.int64), "id": drop, "seed": seeds[drop],
            "score": scores[drop].astype(np.float64), "expected": column(expected),
            "freq": column(freq), "loss": column(loss)})

    def table(self, seeds: pl.Series) -> pl.DataFrame:
        """One row per dropped piece, in the order of the drops (`SCHEMA`); a float column is
        null where the step computed no such value (NaN never stands for "none": a loss is
        never NaN)."""
        if not self._parts:
            return pl.DataFrame(schema=SCHEMA)
        cols = {k: np.concatenate([p[k] for p in self._parts]) for k in self._parts[0]}
        frame = pl.DataFrame({
            "round": cols["round"], "iteration": cols["iteration"],
            "reason": pl.Series(np.array(REASONS, dtype=object)[cols["reason"]].tolist(),
                                dtype=pl.String),
            "id": cols["id"], "piece": seeds.gather(cols["seed"]),
            "score": cols["score"], "expected": cols["expected"], "freq": cols["freq"],
            "loss": cols["loss"]})
        return frame.select(
            pl.col("round").cast(pl.UInt32),
            pl.when(pl.col("iteration") >= 0).then(pl.col("iteration")).cast(pl.UInt8),
            "reason", pl.col("id").cast(pl.UInt32), "piece", "score",
            *(pl.col(c).fill_nan(None) for c in ("expected", "freq", "loss")))
