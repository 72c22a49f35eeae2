"""WordPiece in DuckDB (docs/architecture.md, "WordPiece"): the likelihood merge loop over the
tables of `sql/10_wordpiece_scores.sql` and `sql/11_wordpiece_merge.sql`, and the frequency scoring
(HF `WordPieceTrainer` = BPE with the `##` prefix) through the BPE merge loop of `bpe.py`. Both
give the same tables as the Polars engine.

Likelihood passes. All data stays in DuckDB; Python only binds the pass limits and reads how many
merges a pass made. A pass is two statements and a few writes:

* `candidates` (stage 10) stores the best 256 eligible pairs, with exact scores, in order;
* `chain` (stage 11) is one recursive query that makes merges one after the other, each the
  best pair at its moment: a merge of `(a, b)` into `n` changes the counts of `a`, `b`, `n`, so
  only the pairs holding a token the chain changed are rescored (from the counts before the
  pass plus the chain's changes); every other pair is as it was before the pass, where the
  first candidate holding no changed token is the best of them (and when every candidate
  holds one, a rescored pair above the last candidate is still known to be the best;
  otherwise the chain stops). It also stops at the vocabulary size, `max_merges`,
  `min_score`, `STEPS` merges or once it has touched `MAX_WORDS` words;
* `apply` writes the chain's state (words' new symbols, pair and token count changes, new
  tokens, the merges) into the tables.

A pass that makes no merge ends training (no eligible pair left, or the best scores below
min_score). Tests compare every table with the Polars engine (which is checked against a
plain-Python oracle that rescans all pairs at every merge), also with one merge per pass, tiny word
limits and a single candidate."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from ..config import TrainConfig
from ..progress import StageTimer
from ..training.checkpoint import MergeCheckpoint
from ..training.tables import TrainTables
from .bpe import initial_symbols, run_passes
from .checkpoint import checkpointed
from .runner import Scripts

CANDIDATES = 256  # candidates read per pass
STEPS = 256  # merges per pass at most
MAX_WORDS = 4096  # a pass stops once its merges have touched more words than this


class LikelihoodLoop:
    """Drives stages 10-11: one SQL pass per chain of merges until the vocabulary is full, the
    merge limit is reached, no eligible pair is left or the best score is below min_score."""

    #: What a checkpoint saves besides the tables (`duckdb.checkpoint`).
    COUNTERS = ("vocab_n", "merges_n", "passes")

    def __init__(self, sql: Scripts, cfg: TrainConfig, vocab_n: int, order: str = "likelihood"):
        self.sql = sql
        self.cfg = cfg
        self.vocab_n = vocab_n
        self.merges_n = 0
        self.passes = 0
        self.max_merges = cfg.max_merges if cfg.max_merges is not None else 1 << 62
        self.min_score = cfg.min_score if order == "likelihood" else None
        self.params = {"minimum": max(1, cfg.min_frequency),
                       "max_token_length": cfg.max_token_length, "n": CANDIDATES,
                       "order": order}
        sql.run("wordpiece_scores", "init")

    def step(self) -> bool:
        """One pass; False when training is over."""
        cfg, sql = self.cfg, self.sql
        if self.vocab_n >= cfg.vocab_size or self.merges_n >= self.max_merges:
            return False
        self.passes += 1
        sql.run("wordpiece_scores", "candidates", **self.params)
        sql.run("wordpiece_merge", "chain", vocab_n=self.vocab_n, merges_n=self.merges_n,
                room_vocab=cfg.vocab_size - self.vocab_n,
                room_merges=min(self.max_merges - self.merges_n, 1 << 62), steps=STEPS,
                max_words=MAX_WORDS, min_score=self.min_score,
                prefix=cfg.continuing_subword_prefix, **self.params)
        (merges, fresh), = sql.rows("wordpiece_merge", "made")
        if merges == 0:  # no pair left, or the best scores below min_score
            return False
        sql.run("wordpiece_merge", "apply")
        self.merges_n += merges
        self.vocab_n += fresh
        return True

    def restored(self) -> None:
        """The counters are back from a checkpoint (no bound state depends on them)."""

    def run(self, on_pass: Callable[[], None] | None = None) -> None:
        run_passes(self, "merging (duckdb wordpiece)", on_pass)


def train_wordpiece(sql: Scripts, cfg: TrainConfig, timer: StageTimer,
                    order: str = "likelihood", checkpoint: MergeCheckpoint | None = None
                    ) -> TrainTables:
    """Stages 4-5 and 10-11 on the words in tc_words; the result tables. `order` is
    'likelihood' (WordPiece) or a BPE tie-break that keeps one entry per pair and merges every
    occurrence ('lexical-max', 'first-seen': docs/architecture.md, "The chain for lexical-max
    and first-seen"), with the BPE merges table."""
    with timer.stage("initial"):
        n_initial = initial_symbols(sql, cfg)
    with timer.stage("merge"):
        loop = LikelihoodLoop(sql, cfg, n_initial, order)
        loop.run(checkpointed(sql, checkpoint, loop))
    timer.seconds["passes"] = float(loop.passes)
    with timer.stage("tables"):
        words, merges, vocab = (sql.table("wordpiece_merge", s)
                                for s in ("words_out", "merges_out", "vocab_out"))
    if order != "likelihood":
        # the BPE orders' merges schema: no score, no token counts
        merges = merges.drop("left_count", "right_count").with_columns(
            pl.lit(None, pl.Float64).alias("score"))
    return TrainTables(words, merges, vocab)
