"""Stages 4-9 of BPE in DuckDB: the alphabet, the initial symbols and pair counts, the merge loop
and the result tables. All data stays in DuckDB tables (the words, each word's symbols, the pair
counts and the merge queue); Python only drives the loop: it reads the best queue entries, picks the
batch of merges for the next pass (docs/architecture.md, "Exact batching": members that share no
symbol the wrong way round; SQL then cuts the batch where a new pair or a deferred candidate would
overtake a member) and runs the pass's statements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import duckdb

from ..config import TrainConfig
from ..errors import TokcolumnarError
from ..progress import Progress, StageTimer
from ..training.checkpoint import MergeCheckpoint
from ..training.symbols import check_vocab_size
from ..training.tables import TrainTables
from .checkpoint import checkpointed
from .runner import Scripts, duck_error

# merge loop tuning
CANDIDATES = 256  # queue entries read per pass
HOT_SIZE = 4096  # entries moved from cold to hot per refill
MAX_CONFLICTS = 48  # candidates sharing a symbol with an earlier one, per batch


@dataclass
class _Cand:
    eid: int
    key: int
    a: int
    b: int
    stale: int
    cnt: int
    eff: int
    tok: str
    blen: int
    reuse_id: int | None
    reuse_blen: int | None
    multi: bool
    ltok: str
    rtok: str


class MergeLoop:
    """Drives stages 7-8 for the `id` and `lexical-max` orders (first-seen runs through the
    chain of stages 10-11, engine.runs_as_chain): one SQL pass per batch of merges, until the
    vocabulary is full, no pair is left, or the best count is below min_frequency."""

    #: What a checkpoint saves besides the tables (`duckdb.checkpoint`).
    COUNTERS = ("vocab_n", "merges_n", "theta", "passes", "cold_left")

    def __init__(self, sql: Scripts, cfg: TrainConfig, vocab_n: int):
        if cfg.tie_break not in ("id", "lexical-max"):
            raise ValueError(f"the merge loop of stages 7-8 does not run {cfg.tie_break}")
        self.sql = sql
        self.cfg = cfg
        self.hf = cfg.tie_break == "id"
        self.vocab_n = vocab_n
        self.merges_n = 0
        self.theta = 1 << 62  # everything starts cold
        self.passes = 0
        self.minimum = max(1, cfg.min_frequency)
        self.max_merges = cfg.max_merges if cfg.max_merges is not None else 1 << 62
        self.cold_left = True
        sql.bind(n=CANDIDATES, prefix=cfg.continuing_subword_prefix, theta=self.theta)
        sql.run_vars("merge_pass", "views")
        section = "candidates_id" if self.hf else "candidates_lexical"
        self.q_candidates = "; ".join(sql.prepare("merge_pass", "clear")
                                      + sql.prepare("merge_pass", section))
        self.q_apply = "; ".join(sql.prepare("merge_pass", "apply"))
        self.q_reuse = "; ".join(sql.prepare("merge_pass", "reuse_counts") + sql.prepare(
            "merge_pass", "mark_multi" if self.hf else "fold_old"))

    def restored(self) -> None:
        """The counters are back from a checkpoint: bind the queue's threshold again."""
        self.sql.bind(theta=self.theta)

    # -- queue ------------------------------------------------------------------------------
    def refill(self) -> bool:
        """Lower theta and move the next cold entries to hot. False when cold was empty."""
        sql = self.sql
        if not self.cold_left:
            return False
        sql.run("queue", "flush")
        row = sql.rows("queue", "threshold", h=HOT_SIZE)
        theta = row[0][0] if row else -(1 << 62)
        sql.run("queue", "refill", theta=theta)
        self.theta = theta
        sql.bind(theta=theta)
        if not row:
            self.cold_left = False
        if not self.hf:
            sql.run("queue", "drop_dead")
        return True

    def candidates(self) -> list[_Cand]:
        return [_Cand(*r) for r in self.sql.con.execute(self.q_candidates).fetchall()]

    # -- one pass ---------------------------------------------------------------------------
    def step(self) -> bool:
        """One pass; False when training is over."""
        cfg = self.cfg
        if self.vocab_n >= cfg.vocab_size or self.merges_n >= self.max_merges:
            return False
        cands = self.candidates()
        while not cands or cands[0].eff < self.theta:
            if not self.refill():
                break
            cands = self.candidates()
        if not cands:
            return False
        first = cands[0]
        if first.cnt < self.minimum:
            return False
        room = min(cfg.vocab_size - self.vocab_n, self.max_merges - self.merges_n)
        picked: list[tuple[_Cand, bool]] = [(first, False)]
        if first.reuse_id is None and not first.multi:  # both orders batch
            lefts, rights, made = {first.a}, {first.b}, {first.tok}
            conflicts = 0
            for c in cands[1:]:
                if len(picked) >= room or c.eff < self.theta or c.cnt < self.minimum:
                    break
                if c.reuse_id is not None or c.multi or c.tok in made:
                    break
                conflict = c.a in rights or c.b in lefts
                if conflict:
                    conflicts += 1
                    if conflicts > MAX_CONFLICTS:
                        break
                picked.append((c, conflict))
                lefts.add(c.a)
                rights.add(c.b)
                made.add(c.tok)
        self._pass(picked)
        return True

    def _pass(self, picked: list[tuple[_Cand, bool]]) -> None:
        """Run stage 7 on the picked candidates (in queue order, with their conflict flag)."""
        sql = self.sql
        cs = [c for c, _ in picked]
        self.passes += 1
        sql.run("merge_pass", "compute", r=list(range(len(cs))),
                conflict=[f for _, f in picked], eid=[c.eid for c in cs],
                key=[c.key for c in cs], a=[c.a for c in cs], b=[c.b for c in cs],
                eff=[c.eff for c in cs], stale=[c.stale for c in cs], cnt=[c.cnt for c in cs],
                reuse_id=[c.reuse_id for c in cs],
                new_blen=[c.blen if c.reuse_id is None else c.reuse_blen for c in cs],
                tok=[c.tok for c in cs], ltok=[c.ltok for c in cs], rtok=[c.rtok for c in cs],
                vocab_n=self.vocab_n, hf=self.hf,
                max_token_length=self.cfg.max_token_length, **{"pass": self.passes})
        if cs[0].reuse_id is not None:
            sql.con.execute(self.q_reuse)
        kstar, fresh = sql.con.execute(self.q_apply).fetchone()
        self.merges_n += kstar
        self.vocab_n += fresh

    def run(self, on_pass: Callable[[], None] | None = None) -> None:
        run_passes(self, "merging (duckdb)", on_pass)


class Passes(Protocol):
    """A merge loop driven one SQL pass at a time."""

    cfg: TrainConfig
    vocab_n: int

    def step(self) -> bool: ...


def run_passes(loop: Passes, label: str, on_pass: Callable[[], None] | None = None) -> None:
    """Run passes until the loop says training is over, showing the vocabulary size;
    `on_pass()` before each pass (the checkpoint of `--resume`)."""
    bar = Progress(label, total=loop.cfg.vocab_size, unit="tokens",
                   enabled=loop.cfg.show_progress)
    while True:
        if on_pass is not None:
            on_pass()
        if not loop.step():
            break
        bar.update(loop.vocab_n)
    bar.close(loop.vocab_n)


@contextmanager
def _building_alphabet() -> Iterator[None]:
    """Stages 4-6 fail as one clear error (e.g. a DuckDB out-of-memory), not a traceback."""
    try:
        yield
    except duckdb.Error as e:
        raise TokcolumnarError(f"building the alphabet failed: {duck_error(e)}") from None


def initial_symbols(sql: Scripts, cfg: TrainConfig, check: bool = True,
                    own_characters: bool = False) -> int:
    """Stages 4-5 (alphabet, ids, initial symbols in tc_seg), shared with WordPiece; returns
    the initial vocabulary size (`check`: refused when above --vocab-size). `own_characters`:
    every character of the words and nothing else (no alphabet limit, no initial alphabet, no
    variant order: an extension's rebuild, `duckdb.extend`)."""
    with _building_alphabet():
        sql.run("alphabet", "chars")
        sql.run("alphabet", "alphabet",
                initial_alphabet=[] if own_characters else list(cfg.initial_alphabet),
                limit_alphabet=None if own_characters else cfg.limit_alphabet)
        sql.run("alphabet", "vocab", special_tokens=list(cfg.special_tokens),
                eow_token=cfg.end_of_word_token)
        sql.run("initial_symbols", "symbols", prefix=cfg.continuing_subword_prefix,
                suffix=cfg.end_of_word_suffix, eow_token=cfg.end_of_word_token)
        sql.run("initial_symbols", "variants",
                variant_order=[] if own_characters else list(cfg.variant_order or []))
        sql.run("initial_symbols", "seg")
    n = sql.con.execute("SELECT count(*) FROM tc_vocab").fetchone()[0]
    if check:
        check_vocab_size(cfg.vocab_size, n)
    return n


def pair_counts(sql: Scripts, cfg: TrainConfig) -> None:
    """Stage 6 on tc_seg and tc_vocab."""
    with _building_alphabet():
        sql.run("pair_counts", "pairs", max_token_length=cfg.max_token_length)
        sql.run("pair_counts", "tables")


def initial(sql: Scripts, cfg: TrainConfig) -> int:
    """Stages 4-6; returns the initial vocabulary size."""
    n = initial_symbols(sql, cfg)
    pair_counts(sql, cfg)
    return n


def train_bpe(sql: Scripts, cfg: TrainConfig, timer: StageTimer,
              checkpoint: MergeCheckpoint | None = None) -> TrainTables:
    """Stages 4-9 on the words in tc_words; the result tables (`checkpoint`: the loop's
    state saved as it runs, and restored first when the run resumes)."""
    with timer.stage("initial"):
        n_initial = initial(sql, cfg)
    with timer.stage("merge"):
        loop = MergeLoop(sql, cfg, n_initial)
        loop.run(checkpointed(sql, checkpoint, loop))
    timer.seconds["passes"] = float(loop.passes)
    with timer.stage("tables"):
        return TrainTables(*(sql.table("results", s)
                             for s in ("words_out", "merges_out", "vocab_out")))
