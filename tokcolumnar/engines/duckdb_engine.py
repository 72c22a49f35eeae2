"""The DuckDB twin of the training pipeline: the same stages as plain SQL files in `sql/`
(see their header comments), run with bound parameters, giving the same tables as the Polars
engine. One module per stage group: `duckdb_sql` (running the files), `duckdb_count` (reading
and counting), `duckdb_bpe` (alphabet, initial pairs, BPE merge loop), `duckdb_text` (generating
the text functions of stage 1).

`count_duckdb(inputs, cfg)` -> the `words` table; `train_duckdb(inputs, cfg, from_counts)` ->
a `TrainResult` identical to `tokcolumnar.training.train`'s."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..config import TrainConfig
from ..errors import TokcolumnarError
from .duckdb_bpe import MergeLoop, initial
from .duckdb_count import count_duckdb, count_into, load_counts
from .duckdb_sql import SQL_DIR, Scripts, connect, duck_error
from .duckdb_text import text_functions_sql

__all__ = ["SQL_DIR", "connect", "count_duckdb", "text_functions_sql", "train_duckdb"]


def train_duckdb(inputs: Any, cfg: TrainConfig, from_counts: Any = None) -> Any:
    """Train a BPE tokenizer with every stage in DuckDB. Returns the same `TrainResult` as
    `tokcolumnar.training.train` (so `result.save(dir)` writes the same files)."""
    import duckdb

    from ..training import TrainResult, pipeline_parts

    timings: dict[str, float] = {}
    normalizer, pretokenizer = pipeline_parts(cfg)
    con = connect()
    try:
        sql = Scripts(con)
        t0 = time.perf_counter()
        frame = None
        if from_counts is not None:
            frame = load_counts(sql, from_counts)
        else:
            count_into(sql, inputs, cfg)
        timings["count"] = time.perf_counter() - t0
        if cfg.model == "wordpiece":  # stages 4-5, then 10-11 (or 6-9 for frequency scoring)
            from .duckdb_wordpiece import train_wordpiece_duckdb

            words, merges, vocab = train_wordpiece_duckdb(sql, cfg, timings)
            if frame is not None:
                words = frame.with_columns(words.get_column("tokens"), words.get_column("ids"))
            result = TrainResult(cfg, words, merges, vocab, normalizer, pretokenizer, timings)
            result.inputs = ([str(inputs)] if isinstance(inputs, (str, Path)) else
                             [str(x) for x in inputs] if isinstance(inputs, (list, tuple))
                             else [])
            return result
        t1 = time.perf_counter()
        try:
            n0 = initial(sql, cfg)
        except duckdb.Error as e:
            raise TokcolumnarError(f"building the alphabet failed: {duck_error(e)}") from None
        timings["initial"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        loop = MergeLoop(sql, cfg, n0)
        loop.run()
        timings["merge"] = time.perf_counter() - t2
        timings["passes"] = float(loop.passes)
        t3 = time.perf_counter()
        words = con.sql(_section_text(sql, "results", "words_out")).pl()
        if frame is not None:
            words = frame.with_columns(words.get_column("tokens"), words.get_column("ids"))
        merges = con.sql(_section_text(sql, "results", "merges_out")).pl()
        vocab = con.sql(_section_text(sql, "results", "vocab_out")).pl()
        timings["tables"] = time.perf_counter() - t3
    finally:
        con.close()
    result = TrainResult(cfg, words, merges, vocab, normalizer, pretokenizer, timings)
    if isinstance(inputs, (str, Path)):
        result.inputs = [str(inputs)]
    elif isinstance(inputs, (list, tuple)):
        result.inputs = [str(x) for x in inputs]
    return result


def _section_text(sql: Scripts, stem: str, section: str) -> str:
    (q, names), = sql.statements(stem, section)
    if names:
        raise TokcolumnarError(f"section {section} takes parameters")
    return q
