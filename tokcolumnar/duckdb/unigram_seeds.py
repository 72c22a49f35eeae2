"""The SQL twin of the Unigram trainer's seeding (sql/16_unigram_seeds.sql): the seed pieces
computed in DuckDB from the sentences the trainer seeded from, compared with the trainer's
`seed_pieces` (`tokcolumnar crosscheck --model unigram`, its first stage; docs/unigram.md,
"The SQL twin").

The pieces and their order must be the same and their values (counts, frequency × length)
equal; the scores, `log(value) - log(sum)` computed in double and rounded to float32 on both
sides, may differ by float32 rounding (`SCORE_ULPS`: NumPy's `log` and DuckDB's are different
implementations, which may round a double's last bit apart).

Example (`▁ab` and `ab` end both sentences, whose NULs are followed by different bytes: the
next sentence's `▁`, the end of the text; each is a candidate of frequency 2, valued 2 ×
its length)::

    >>> import polars as pl
    >>> from tokcolumnar.duckdb.engine import scripts
    >>> from tokcolumnar.training.unigram import UnigramOptions
    >>> with scripts() as sql:
    ...     seeds = sql_seeds(sql, pl.Series(["▁ab", "▁ab"]), None, UnigramOptions())
    >>> seeds.select("piece", "value").rows()
    [('a', 2.0), ('b', 2.0), ('▁', 2.0), ('▁ab', 6.0), ('ab', 4.0)]
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..text.unicode_scripts import SCRIPT_NAMES, SCRIPT_RANGES
from ..training.unigram_log import UnigramTrace
from ..training.unigram_options import UnigramOptions
from .runner import Scripts
from .unigram_rounds import StageCheck

#: Largest score difference between the trainer's seeds and SQL's, in float32 steps (ulps).
SCORE_ULPS = 1


def script_ranges() -> pl.DataFrame:
    """SentencePiece's Unicode 9.0 script table as tc_sd_scripts(lo, hi, script): the ranges
    of every script but `Common`."""
    return pl.DataFrame({"lo": [a for a, _, _ in SCRIPT_RANGES],
                         "hi": [b for _, b, _ in SCRIPT_RANGES],
                         "script": [SCRIPT_NAMES[s] for _, _, s in SCRIPT_RANGES]},
                        schema={"lo": pl.Int32, "hi": pl.Int32, "script": pl.String})


def sql_seeds(sql: Scripts, sentences: pl.Series, counts: np.ndarray | None,
              opts: UnigramOptions) -> pl.DataFrame:
    """The seed pieces in SQL: (piece, value, score) in SentencePiece's order, from the
    sentences the trainer seeds from (`▁` for spaces, rare characters as `▅`) and their
    counts (1 each when None)."""
    n = len(sentences)
    counts = np.ones(n, np.int64) if counts is None else np.asarray(counts, np.int64)
    sql.copy_in("tc_sd_sentences", pl.DataFrame({
        "i": np.arange(n, dtype=np.int64), "sentence": pl.Series(sentences, dtype=pl.String),
        "cnt": counts}))
    sql.copy_in("tc_sd_scripts", script_ranges())
    sql.run("unigram_seeds", "kinds")
    sql.run("unigram_seeds", "chars", split_by_unicode_script=opts.split_by_unicode_script,
            split_by_number=opts.split_by_number, split_digits=opts.split_digits)
    sql.run("unigram_seeds", "substrings", max_len=opts.max_sentencepiece_length)
    sql.run("unigram_seeds", "seeds", seed_size=opts.seed_sentencepiece_size)
    return sql.con.sql("SELECT piece, value, score FROM tc_sd_seeds ORDER BY rank").pl()


def compare_seeds(trainer: pl.DataFrame, sql_frame: pl.DataFrame) -> StageCheck:
    """The trainer's seeds (`seed_pieces`: piece, value, score) against SQL's: the same pieces
    in the same order, the same values, scores within SCORE_ULPS float32 steps."""
    name = "seeds"
    ours, theirs = trainer.get_column("piece"), sql_frame.get_column("piece")
    n = min(len(ours), len(theirs))
    differ = ours.head(n).ne_missing(theirs.head(n))
    if differ.any():
        i = int(differ.arg_max())
        return StageCheck(False, (
            f"{name}: {int(differ.sum()):,} of {n:,} positions hold different pieces; the "
            f"first, seed {i:,}: {ours[i]!r} (trainer) vs {theirs[i]!r} (SQL)"))
    if len(ours) != len(theirs):
        longer, side = (ours, "trainer") if len(ours) > len(theirs) else (theirs, "SQL")
        return StageCheck(False, (
            f"{name}: {len(ours):,} seeds (trainer) vs {len(theirs):,} (SQL); the first extra "
            f"one, in the {side}'s: {longer[n]!r}"))
    value = trainer.get_column("value").cast(pl.Float32).to_numpy()
    sql_value = sql_frame.get_column("value").cast(pl.Float32).to_numpy()
    bad = np.flatnonzero(value != sql_value)
    if len(bad):
        i = int(bad[0])
        return StageCheck(False, (
            f"{name}: {len(bad):,} values differ; the first, {ours[i]!r}: {value[i]:.9g} "
            f"(trainer) vs {sql_value[i]:.9g} (SQL)"))
    score = trainer.get_column("score").cast(pl.Float32).to_numpy()
    sql_score = sql_frame.get_column("score").cast(pl.Float32).to_numpy()
    ulps = np.abs(score.astype(np.float64) - sql_score.astype(np.float64)) \
        / np.spacing(np.abs(score)).astype(np.float64)
    worst = float(ulps.max(initial=0.0))
    if worst > SCORE_ULPS:
        i = int(ulps.argmax())
        return StageCheck(False, (
            f"{name}: the score of {ours[i]!r} is {score[i]:.9g} (trainer) vs "
            f"{sql_score[i]:.9g} (SQL), {worst:.3g} float32 steps apart > {SCORE_ULPS}"))
    chars = int((ours.str.len_chars() == 1).sum())
    same = int((score == sql_score).sum())
    scores = "every score bit for bit" if same == len(ours) else \
        f"{same:,} scores bit for bit, the others within {SCORE_ULPS} float32 step"
    return StageCheck(True, (
        f"identical: {name}: {len(ours):,} pieces ({chars:,} characters, "
        f"{len(ours) - chars:,} substrings) in the same order with the same values, {scores}"))


def check_seeds(sql: Scripts, trace: UnigramTrace) -> StageCheck:
    """The trainer's seeds (recorded in `trace`) against the SQL seeds of its sentences."""
    assert trace.sentences is not None and trace.options is not None
    assert trace.seed_table is not None
    frame = sql_seeds(sql, trace.sentences, trace.sentence_counts, trace.options)
    return compare_seeds(trace.seed_table, frame)
