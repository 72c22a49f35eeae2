"""The SQL twin of the Unigram trainer's EM iterations and pruning rounds (sql/14_unigram_em.sql,
sql/15_unigram_prune.sql), replayed stage by stage on the trainer's own trace
(`training.unigram_log.UnigramTrace`): `tokcolumnar crosscheck --model unigram` gives each EM
iteration the pieces and scores the trainer started it from and compares the pieces kept and
their new scores; it gives each pruning round the pieces and scores after the round's EM and
compares the frequencies, the losses and the pieces kept (docs/unigram.md, "The SQL twin").

SQL sums in float64 where SentencePiece (and the trainer) sums float32 in its thread order, so
the twin is not bit-exact: a score may differ by float32 rounding (`SCORE_TOL`), a loss by
`LOSS_TOL` of itself. A piece kept by one side only is a *near-tie*, reported and not a failure,
when the value that decided it is within those tolerances of the line: an expected count within
`EXPECTED_TOL` of 0.5, or a loss within `LOSS_TOL` of the cut (the last candidate the trainer
kept). Anything else is a difference."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..training.unigram_log import REASONS, EMStep, PruneStep, UnigramTrace
from .runner import Scripts

#: Largest |score difference| of an EM iteration (float32 rounding of log probabilities ~ -20).
SCORE_TOL = 1e-4
#: An expected count this close to 0.5 (relative) may fall on either side of it.
EXPECTED_TOL = 1e-4
#: Largest relative difference of a loss (and how close to the cut a near-tie is).
LOSS_TOL = 1e-4


@dataclass
class StageCheck:
    """One stage replayed: whether it agrees, and its one-line report."""

    ok: bool
    line: str


def load_words(sql: Scripts, words: pl.Series, counts: np.ndarray) -> int:
    """The distinct words and counts as tc_uwords(w, word, cnt); returns the longest word's
    length in characters."""
    frame = pl.DataFrame({"w": np.arange(len(words), dtype=np.int64), "word": words,
                          "cnt": counts.astype(np.int64)})
    sql.copy_in("tc_uwords", frame)
    return int(words.str.len_chars().max() or 0)


def _load_pieces(sql: Scripts, pieces: pl.Series, scores: np.ndarray) -> dict[str, float | int]:
    """The model as tc_pieces(id, piece, score) and stage 13's lattices of the words over it
    (the unknown node: id 0, SentencePiece's float32 min - 10); returns the parameters."""
    frame = pl.DataFrame({"id": pl.Series(np.arange(len(pieces)), dtype=pl.Int32),
                          "piece": pieces, "score": scores.astype(np.float64)})
    sql.copy_in("tc_pieces", frame)
    f32 = np.float32
    params: dict[str, float | int] = {
        "max_len": int(pieces.str.len_chars().max() or 1),
        "unk_score": float(f32(scores.astype(f32).min()) - f32(10.0))}
    sql.run("unigram_viterbi", "lattice", unk_id=0, **params)
    return params


def em_step(sql: Scripts, pieces: pl.Series, scores: np.ndarray, word_max: int
            ) -> pl.DataFrame:
    """One EM iteration in SQL over the loaded words: every piece (in order) with its
    expected count, whether it is kept and its new score (null when not)."""
    _load_pieces(sql, pieces, scores)
    sql.run("unigram_em", "macros")
    sql.run("unigram_em", "init")
    for k in range(1, word_max + 1):
        sql.run("unigram_em", "forward", k=k)
    for k in range(word_max - 1, -1, -1):
        sql.run("unigram_em", "backward", k=k)
    sql.run("unigram_em", "e_step")
    sql.run("unigram_em", "m_step")
    return sql.con.sql(
        "SELECT p.id, p.piece, e.expected, m.score FROM tc_pieces p "
        "JOIN tc_expected e USING (id) LEFT JOIN tc_em_model m USING (id) ORDER BY p.id").pl()


def prune_step(sql: Scripts, pieces: pl.Series, scores: np.ndarray, word_max: int,
               desired: int, shrinking_factor: float) -> pl.DataFrame:
    """One pruning round in SQL over the loaded words: every piece (in order) with why it goes
    (null: kept), its Viterbi frequency, its loss (candidates) and whether it is kept."""
    params = _load_pieces(sql, pieces, scores)
    sql.run("unigram_viterbi", "first")
    for k in range(1, word_max + 1):
        sql.run("unigram_viterbi", "step", k=k)
    sql.run("unigram_prune", "own_lattice", **params)
    sql.run("unigram_prune", "two_best_init")
    for d in range(1, int(params["max_len"]) + 1):
        sql.run("unigram_prune", "two_best_step", d=d)
    sql.run("unigram_prune", "freq")
    sql.run("unigram_prune", "prune", desired=desired,
            shrinking_factor=float(np.float32(shrinking_factor)))
    return sql.con.sql("SELECT id, piece, reason, freq, loss, kept FROM tc_pr_pieces "
                       "ORDER BY id").pl()


def _fmt_pieces(pieces: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(p) for p in pieces[:limit])
    return shown + (f" and {len(pieces) - limit:,} more" if len(pieces) > limit else "")


def compare_em(step: EMStep, trace: UnigramTrace, sql_frame: pl.DataFrame) -> StageCheck:
    """An EM iteration's SQL result against the trainer's: the same pieces kept (but
    near-ties at 0.5) and scores within SCORE_TOL."""
    name = f"round {step.round} EM iteration {step.iteration}"
    pieces = trace.pieces(step.seeds)
    ours = trace.pieces(step.seeds_after)
    kept_sql = sql_frame.get_column("score").is_not_null().to_numpy()
    kept_ours = np.isin(step.seeds, step.seeds_after)
    expected = sql_frame.get_column("expected").to_numpy()
    differ = np.flatnonzero(kept_sql != kept_ours)
    near = np.abs(expected[differ] - 0.5) <= EXPECTED_TOL * 0.5
    if not near.all():
        bad = differ[~near]
        return StageCheck(False, (
            f"{name}: {len(bad):,} pieces kept by one side only; the first, "
            f"{pieces[int(bad[0])]!r}: expected count {step.expected[bad[0]]:.9g} (trainer) vs "
            f"{expected[bad[0]]:.9g} (SQL)"))
    both = kept_sql & kept_ours
    by_piece = dict(zip(ours.to_list(), step.scores_after.tolist()))
    trainer = np.array([by_piece[p] for p in pieces.filter(pl.Series(both)).to_list()])
    delta = np.abs(trainer - sql_frame.get_column("score").to_numpy()[both]) if len(trainer) \
        else np.zeros(0)
    worst = float(delta.max(initial=0.0))
    if worst > SCORE_TOL:
        i = int(np.flatnonzero(both)[int(delta.argmax())])
        return StageCheck(False, (
            f"{name}: the score of {pieces[i]!r} is {trainer[int(delta.argmax())]:.9g} "
            f"(trainer) vs {sql_frame.get_column('score')[i]:.9g} (SQL), |difference| "
            f"{worst:.3g} > {SCORE_TOL:g}"))
    rel = np.abs(expected - step.expected.astype(np.float64)) / np.maximum(expected, 1e-30)
    ties = f"; near-ties at 0.5: {_fmt_pieces(pieces.gather(differ).to_list())}" \
        if len(differ) else ""
    return StageCheck(True, (
        f"identical: {name}: {int(both.sum()):,} of {len(pieces):,} pieces kept alike, scores "
        f"within {worst:.2g} (tolerance {SCORE_TOL:g}), expected counts within "
        f"{float(rel[expected >= 0.5].max(initial=0.0)):.2g} relative{ties}"))


def compare_prune(step: PruneStep, trace: UnigramTrace, sql_frame: pl.DataFrame,
                  after: np.ndarray) -> StageCheck:
    """A pruning round's SQL result against the trainer's (`after`: the seeds it kept): the
    same reasons and frequencies, losses within LOSS_TOL, the same pieces kept but near-ties
    at the cut."""
    name = f"round {step.round} pruning"
    p = step.pruning
    pieces = trace.pieces(step.seeds)
    codes = np.array(["kept", *REASONS], dtype=object)
    ours = codes[p.reason + 1]
    theirs = sql_frame.get_column("reason").fill_null("kept").to_numpy().astype(object)
    freq = sql_frame.get_column("freq").to_numpy()
    bad_freq = np.flatnonzero(freq != p.freq.astype(np.float64))
    if len(bad_freq):
        i = int(bad_freq[0])
        return StageCheck(False, (
            f"{name}: {len(bad_freq):,} Viterbi frequencies differ; the first, {pieces[i]!r}: "
            f"{p.freq[i]:g} (trainer) vs {freq[i]:g} (SQL)"))
    structural = np.flatnonzero((ours != theirs) & ((ours != "kept") & (ours != "loss")
                                                    | (theirs != "kept") & (theirs != "loss")))
    if len(structural):
        i = int(structural[0])
        return StageCheck(False, (
            f"{name}: {len(structural):,} pieces differ in why they go; the first, "
            f"{pieces[i]!r}: {ours[i]} (trainer) vs {theirs[i]} (SQL)"))
    loss = sql_frame.get_column("loss").to_numpy()
    cand = ~np.isnan(p.loss)
    if not np.array_equal(cand, ~np.isnan(loss)):
        i = int(np.flatnonzero(cand != ~np.isnan(loss))[0])
        return StageCheck(False, f"{name}: {pieces[i]!r} is a candidate on one side only")
    ours_loss = p.loss.astype(np.float64)
    rel = np.abs(loss[cand] - ours_loss[cand]) / np.maximum(np.abs(ours_loss[cand]), 1e-30)
    worst = float(rel.max(initial=0.0))
    if worst > LOSS_TOL:
        i = int(np.flatnonzero(cand)[int(rel.argmax())])
        return StageCheck(False, (
            f"{name}: the loss of {pieces[i]!r} is {ours_loss[i]:.9g} (trainer) vs "
            f"{loss[i]:.9g} (SQL), relative difference {worst:.3g} > {LOSS_TOL:g}"))
    kept_ours = np.isin(step.seeds, after)
    kept_sql = sql_frame.get_column("kept").to_numpy()
    differ = np.flatnonzero(kept_ours != kept_sql)
    cut_line = ""
    if len(differ):
        taken = cand & kept_ours
        cut = float(ours_loss[taken].min()) if taken.any() else float("inf")
        near = np.abs(ours_loss[differ] - cut) <= LOSS_TOL * abs(cut)
        if not near.all():
            i = int(differ[~near][0])
            return StageCheck(False, (
                f"{name}: {len(differ):,} pieces kept by one side only; the first, "
                f"{pieces[i]!r} ({'kept' if kept_ours[i] else 'dropped'} by the trainer), loss "
                f"{ours_loss[i]:.9g} (trainer) vs {loss[i]:.9g} (SQL), the cut at {cut:.9g}"))
        cut_line = f"; near-ties at the cut ({cut:.9g}): " \
                   f"{_fmt_pieces(pieces.gather(differ).to_list())}"
    return StageCheck(True, (
        f"identical: {name}: {int((kept_ours & kept_sql).sum()):,} of {len(pieces):,} pieces "
        f"kept alike (pruned size {p.pruned_size:,}), every Viterbi frequency and reason "
        f"equal, losses within {worst:.2g} relative (tolerance {LOSS_TOL:g}){cut_line}"))


def check_rounds(sql: Scripts, trace: UnigramTrace) -> Iterator[StageCheck]:
    """Every EM iteration and pruning round of `trace` replayed in SQL and compared, in the
    order the trainer ran them; the caller stops at the first that does not agree."""
    assert trace.words is not None and trace.counts is not None
    word_max = load_words(sql, trace.words, trace.counts)
    prunes = {s.round: s for s in trace.prunes}
    last_iteration = max((s.iteration for s in trace.em), default=0)
    for step in trace.em:
        frame = em_step(sql, trace.pieces(step.seeds), step.scores, word_max)
        yield compare_em(step, trace, frame)
        if step.iteration == last_iteration and step.round in prunes:
            ps = prunes[step.round]
            frame = prune_step(sql, trace.pieces(ps.seeds), ps.scores, word_max,
                               trace.desired, trace.shrinking_factor)
            yield compare_prune(ps, trace, frame, ps.seeds[ps.pruning.kept])
