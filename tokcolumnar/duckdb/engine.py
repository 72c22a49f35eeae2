"""The DuckDB engine: the same stages as the Polars engine, as plain SQL files in `sql/` (see
their header comments) run with bound parameters, giving the same tables. One module per stage
group: `runner` (running the files), `count` (stages 2-3: reading and counting), `bpe` (stages
4-9: alphabet, initial pairs, the BPE merge loop), `wordpiece` (stages 10-11: the likelihood
loop). `tokcolumnar.training.pipeline` runs it through `count` and `train`, as the Polars
engine."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import duckdb
import polars as pl

from ..config import TrainConfig
from ..errors import interrupts_kept
from ..memory import MemoryLimitError, format_size
from ..progress import StageTimer
from ..training.checkpoint import MergeCheckpoint
from ..training.tables import TrainTables
from ..workdir import WorkDir
from .bpe import train_bpe
from .count import count_into, counted_words, load_words
from .extend import train_extended
from .runner import THREADS_VARIABLE, Scripts, connect, duck_error
from .wordpiece import train_wordpiece

# Below this many distinct words, the merge passes run on one thread: their tables are tiny, so a
# statement's cost is DuckDB's fixed work per operator, which more threads only add to (5-15%
# of the CPU time of a pass, measured on 1-3 KB inputs); TOKCOLUMNAR_DUCKDB_THREADS overrides.
SMALL_WORDS = 20_000
# lexical-max runs through the chain of stages 10-11 only on inputs this small (the characters
# of the distinct words summed): there it spares the merge loop's fixed cost per pass (3 KB
# inputs: 2.7 against 4.5 s); on larger ones the chain's cost per merge grows with the words
# (a 30 KB Japanese file, its lines as words: 265 s against 11 s for the merge loop of sql/07).
LEXICAL_CHAIN_MAX_CHARS = 4_096


@contextlib.contextmanager
def scripts(memory_limit: int | None = None, temp_directory: str | None = None
            ) -> Iterator[Scripts]:
    """A fresh in-memory DuckDB with the text functions of stage 1, closed afterwards
    (`memory_limit` bytes and `temp_directory`: DuckDB's own settings, from --memory-limit and
    the work directory). An interrupt ends a query with DuckDB's own error in its place:
    raised as the interrupt again (`errors.interrupts_kept`), as the Polars engine's."""
    con = connect(memory_limit, temp_directory)
    try:
        with interrupts_kept():
            yield Scripts(con)
    except duckdb.OutOfMemoryException as e:  # DuckDB's limit: one line, --resume can go on
        limit = f"--memory-limit {format_size(memory_limit)}" if memory_limit else "the RAM"
        raise MemoryLimitError(f"DuckDB ran out of memory within {limit} "
                               f"({duck_error(e)}): raise --memory-limit") from None
    finally:
        con.close()


class DuckDBEngine:
    name = "duckdb"
    #: DuckDB's `memory_limit` (bytes) and `temp_directory`, set by the pipeline for a run.
    memory_limit: int | None = None
    temp_directory: str | None = None
    #: DuckDB counts every input itself (and spills by itself, within the same limit).
    counts_in_units = False
    #: The words as a data frame (not `tables.CountedWords`).
    takes_counted_words = False
    #: --extend runs here, in SQL (`extend`).
    trains_extensions = True

    def use_limits(self, memory_limit: int, work: WorkDir | None) -> None:
        """DuckDB's `memory_limit`, and its `temp_directory` inside the work directory."""
        self.memory_limit = memory_limit
        if work is not None:
            self.temp_directory = str(work.file("duckdb"))

    def check_memory(self, words: pl.DataFrame, memory_limit: int, disk: bool,
                     vocab_size: int | None = None) -> None:
        """Nothing to check: DuckDB's merge loop spills within its `memory_limit`."""
        return None

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame:
        """Stages 2-3: the `words` table (word, count, first_seen), identical to the Polars
        engine's (no sub-stage is timed: `timer` is unused)."""
        with scripts(self.memory_limit, self.temp_directory) as sql:
            count_into(sql, inputs, cfg)
            return counted_words(sql)

    def train(self, words: pl.DataFrame, cfg: TrainConfig, timer: StageTimer,
              checkpoint: MergeCheckpoint | None = None) -> TrainTables:
        """Stages 4-11 on a words table: BPE and frequency WordPiece through the BPE loop
        (stages 4-9), likelihood WordPiece through its own (stages 4-5, 10-11), an extension
        (`cfg.extend`) from the base's state (stage 12, `extend`); `checkpoint` saves the
        loop's tables as it runs, and restores them when the run resumes."""
        with scripts(self.memory_limit, self.temp_directory) as sql:
            load_words(sql, words)
            if words.height < SMALL_WORDS and not os.environ.get(THREADS_VARIABLE):
                sql.con.execute("SET threads = 1")
            likelihood = cfg.model == "wordpiece" and cfg.wordpiece_scoring == "likelihood"
            if cfg.extend is not None:  # --extend: the loop continues a base's (`extend`)
                chain = ("likelihood" if likelihood else cfg.tie_break
                         if runs_as_chain(cfg, words) else None)
                return train_extended(sql, words, cfg, timer, chain, checkpoint)
            if likelihood:
                return train_wordpiece(sql, cfg, timer, checkpoint=checkpoint)
            if runs_as_chain(cfg, words):
                tables = train_wordpiece(sql, cfg, timer, order=cfg.tie_break,
                                         checkpoint=checkpoint)
            else:
                tables = train_bpe(sql, cfg, timer, checkpoint)
        if cfg.model == "wordpiece":  # the score of frequency scoring is the pair count
            tables.merges = tables.merges.with_columns(
                pl.col("count").cast(pl.Float64).alias("score"))
        return tables


def runs_as_chain(cfg: TrainConfig, words: pl.DataFrame) -> bool:
    """Whether BPE runs through the chain of stages 10-11 rather than the merge loop of stages
    7-8: always for first-seen (the loop makes one merge per pass in that order), for
    lexical-max on small inputs only (LEXICAL_CHAIN_MAX_CHARS), never for `id` (HF's lazy queue
    with per-entry words is the loop's)."""
    if cfg.tie_break == "first-seen":
        return True
    if cfg.tie_break == "lexical-max":
        return int(words["word"].str.len_chars().sum() or 0) <= LEXICAL_CHAIN_MAX_CHARS
    return False
