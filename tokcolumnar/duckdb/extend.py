"""`--extend BASE` on the DuckDB engine (docs/extend.md): the Polars engine's design
(`training.extend`, whose base reading, option rules and output rules this shares), with the
loop's state in DuckDB tables and the work in SQL (`sql/12_extend.sql`).

The new corpus is counted with the base's settings by the DuckDB engine (stages 2-3), and
stages 4-5 build its initial symbols. Then the loop's state "after the base's merges":

- *replay*: when stages 4-5 made the base's first ids (`same_initial`), the model's own DuckDB
  loop (the merge passes of stages 6-8, or the chain of stages 10-11) runs with the base's
  merge count as its limit; after each pass its merges so far are checked against the base's
  (`diverged_*`). When all match, the tables are a fresh run's after those merges (the
  segmentation, pair counts, queue and tie-break state), so the loop goes on from them to
  --vocab-size: the files of a direct run (the exactness oracle).
- *rebuild*: otherwise (another corpus, or a replayed merge that differs, after which the
  tables are dropped and built again), stages 4-5 run with the corpus's own characters, the
  base's vocabulary takes their place with the characters it lacks after its largest id
  (`own_ids`), every word is segmented by the base's merges as the encoder segments it
  (`segment_*`, in rounds over the words), the base's merges are logged first (ranks 0..K-1,
  with what each joined in the new corpus) and the loop starts on that state with the ranks
  and ids running on.

The merges table marks `origin` ("base" / "extend") as the Polars engine does, and holds the
same rows (on the rebuild path, the base's merges with the new corpus's `count` and `words`).
`--resume` works as for a fresh DuckDB run: the checkpoint saves the tables with the loop's
counters, among them the path taken and whether the replay is done."""

from __future__ import annotations

import duckdb
import polars as pl

from ..config import TrainConfig
from ..errors import TokcolumnarError
from ..progress import StageTimer
from ..training.checkpoint import MergeCheckpoint
from ..training.extend import (
    BASE_ORIGIN,
    NEW_ORIGIN,
    Base,
    Diverged,
    _base_vocab,
    _with_base_merges,
    check_rebuilt_size,
    load_base,
)
from ..training.tables import TrainTables
from .bpe import MergeLoop, initial_symbols, pair_counts
from .checkpoint import STATE_DB, DuckDBCheckpoint
from .runner import Scripts, duck_error
from .wordpiece import LikelihoodLoop

#: What an extension adds to its loop's checkpointed counters.
EXTEND_COUNTERS = ("extend_mode", "extend_replayed")
Loop = MergeLoop | LikelihoodLoop


def train_extended(sql: Scripts, words: pl.DataFrame, cfg: TrainConfig, timer: StageTimer,
                   chain: str | None, checkpoint: MergeCheckpoint | None = None
                   ) -> TrainTables:
    """The DuckDB engine's `train` for an extension, on the words in tc_words; `chain` is the
    order of the chain of stages 10-11 when the run takes it (None: the merge loop of stages
    6-8). See the module docstring."""
    assert cfg.extend is not None
    base = load_base(cfg.extend)
    _load_base(sql, base)
    resuming = (checkpoint is not None and checkpoint.work.resumed
                and checkpoint.work.file(STATE_DB).exists())
    with timer.stage("initial"):
        loop = _start(sql, cfg, base, chain, skip_rebuild=resuming)
    saver = DuckDBCheckpoint(sql, checkpoint, loop) if checkpoint is not None else None
    if saver is not None:
        saver.restore()
    with timer.stage("merge"):
        if loop.extend_mode == "replay" and not loop.extend_replayed:
            try:
                _replay(sql, loop, base, saver, cfg.max_merges, chain)
            except Diverged:
                _drop_state(sql)
                loop = _start(sql, cfg, base, chain, mode="rebuild")
                if saver is not None:
                    saver.loop = loop
        loop.max_merges = cfg.max_merges if cfg.max_merges is not None else 1 << 62
        loop.run(saver)
    timer.seconds["passes"] = float(loop.passes)
    with timer.stage("tables"):
        tables = _result_tables(sql, chain)
    return _with_origin(tables, base, cfg, loop.extend_mode)


def _load_base(sql: Scripts, base: Base) -> None:
    """The base's vocabulary (with each token's length as the loop counts it) and merges into
    DuckDB (`base` of stage 12)."""
    lengths = _base_vocab(base).base_len
    vocab = pl.DataFrame({"id": range(len(base.tokens)), "token": base.tokens,
                          "kind": base.kinds, "blen": lengths[:len(base.tokens)]},
                         schema={"id": pl.Int32, "token": pl.String, "kind": pl.String,
                                 "blen": pl.Int32})
    merges = base.merges.select(pl.col("rank", "left_id", "right_id", "id").cast(pl.Int64))
    sql.con.register("tc_base_vocab_in", vocab)
    sql.con.register("tc_base_merges_in", merges)
    try:
        sql.run("extend", "base")
    finally:
        sql.con.unregister("tc_base_vocab_in")
        sql.con.unregister("tc_base_merges_in")


def _start(sql: Scripts, cfg: TrainConfig, base: Base, chain: str | None,
           mode: str | None = None, skip_rebuild: bool = False) -> Loop:
    """Stages 4-5, the path's state (`mode`: the replay's when stages 4-5 made the base's first
    ids, unless given) and the loop on it. `skip_rebuild`: a saved state replaces the tables
    next (a resumed run), so the rebuild's work would be lost."""
    n = initial_symbols(sql, cfg, check=False)
    if mode is None:
        mode = "replay" if _same_initial(sql) else "rebuild"
    rebuild = mode == "rebuild" and not skip_rebuild
    if rebuild:
        n = _rebuild(sql, cfg, base)
    loop: Loop
    if chain is None:
        pair_counts(sql, cfg)
        loop = MergeLoop(sql, cfg, n)
    else:
        loop = LikelihoodLoop(sql, cfg, n, chain)
    if rebuild:
        sql.run("extend", "log_bpe" if chain is None else "log_wordpiece")
        loop.merges_n = base.merges.height
    # the path is part of the loop's state: checkpointed with its counters
    loop.COUNTERS = (*type(loop).COUNTERS, *EXTEND_COUNTERS)  # type: ignore[misc]
    loop.extend_mode = mode  # type: ignore[union-attr]
    loop.extend_replayed = mode == "rebuild"  # type: ignore[union-attr]
    return loop


def _same_initial(sql: Scripts) -> bool:
    """Whether stages 4-5 made the base's first ids (tokens and kinds)."""
    (same,), = sql.rows("extend", "same_initial")
    return bool(same)


def _rebuild(sql: Scripts, cfg: TrainConfig, base: Base) -> int:
    """The words segmented by the base's merges, with the base's ids and the new corpus's
    characters it lacks after them, in tc_seg and tc_vocab; returns the vocabulary size."""
    initial_symbols(sql, cfg, check=False, own_characters=True)
    try:
        sql.run("extend", "own_ids")
        n = sql.con.execute("SELECT count(*) FROM tc_vocab").fetchone()[0]
        check_rebuilt_size(cfg, base, n)
        (every,), = sql.rows("extend", "well_formed")
        sql.run("extend", "segment_start")
        while sql.rows("extend", "segment_round", every=every)[0][0]:
            pass
        sql.run("extend", "segment_end")
    except duckdb.Error as e:  # e.g. out of memory: one line, as stages 4-6
        raise TokcolumnarError(f"segmenting the words by the base's merges failed: "
                               f"{duck_error(e)}") from None
    return n


def _replay(sql: Scripts, loop: Loop, base: Base, saver: DuckDBCheckpoint | None,
            limit: int | None, chain: str | None) -> None:
    """Run the loop up to the base's merge count (or `limit`, --max-merges), checking its
    merges against the base's before each pass and at the end (raises Diverged)."""
    k = base.merges.height
    loop.max_merges = k if limit is None else min(k, limit)
    section = "diverged_bpe" if chain is None else "diverged_wordpiece"
    checked = 0

    def check() -> None:
        nonlocal checked
        if sql.rows("extend", section, since=checked)[0][0]:
            raise Diverged
        checked = loop.merges_n
        if saver is not None:
            saver()

    loop.run(check)
    if sql.rows("extend", section, since=checked)[0][0]:
        raise Diverged
    if loop.merges_n < k and (limit is None or loop.merges_n < limit):
        raise Diverged  # the loop ended before the base's merges
    loop.extend_replayed = True  # type: ignore[union-attr]


def _drop_state(sql: Scripts) -> None:
    """Drop the tables and views of stages 4-11 (tc_words stays): the replay diverged, the
    rebuild starts over."""
    con = sql.con
    for (name,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary "
            "AND schema_name = 'main'").fetchall():
        con.execute(f'DROP VIEW "{name}"')
    for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
            "AND schema_name = 'main' AND table_name <> 'tc_words'").fetchall():
        con.execute(f'DROP TABLE "{name}"')


def _result_tables(sql: Scripts, chain: str | None) -> TrainTables:
    """Stage 9 (or 11): the tables, as `train_bpe` / `train_wordpiece` give them."""
    if chain is None:
        return TrainTables(*(sql.table("results", s)
                             for s in ("words_out", "merges_out", "vocab_out")))
    words, merges, vocab = (sql.table("wordpiece_merge", s)
                            for s in ("words_out", "merges_out", "vocab_out"))
    if chain != "likelihood":  # the BPE merges schema
        merges = merges.drop("left_count", "right_count").with_columns(
            pl.lit(None, pl.Float64).alias("score"))
    return TrainTables(words, merges, vocab)


def _with_origin(tables: TrainTables, base: Base, cfg: TrainConfig, mode: str
                 ) -> TrainTables:
    """The merges with `origin`; on the rebuild path the base's rows are the base's merges with
    the new corpus's `count` and `words` (`training.extend._with_base_merges`), as the Polars
    engine lists them. Frequency WordPiece scores a merge by its count, as a fresh run."""
    k = base.merges.height
    merges = tables.merges
    frequency = cfg.model == "wordpiece" and cfg.wordpiece_scoring != "likelihood"
    if frequency:
        merges = merges.with_columns(pl.col("count").cast(pl.Float64).alias("score"))
    if mode == "rebuild":
        old = merges.filter(pl.col("rank") < k)
        new = merges.filter(pl.col("rank") >= k).with_columns(pl.col("rank") - k)
        merges = _with_base_merges(base, new, old.get_column("count").to_numpy(),
                                   old.get_column("words").to_numpy())
    else:
        merges = merges.with_columns(pl.when(pl.col("rank") < k).then(pl.lit(BASE_ORIGIN))
                                     .otherwise(pl.lit(NEW_ORIGIN)).alias("origin"))
    tables.merges = merges
    return tables
