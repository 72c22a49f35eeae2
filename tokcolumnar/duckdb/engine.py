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
from .duckdb_bpe import train_bpe
from .duckdb_count import count_duckdb, count_into, load_counts
from .duckdb_sql import SQL_DIR, Scripts, connect
from .duckdb_text import text_functions_sql
from .duckdb_wordpiece import train_wordpiece_duckdb

__all__ = ["SQL_DIR", "connect", "count_duckdb", "text_functions_sql", "train_duckdb"]


def train_duckdb(inputs: Any, cfg: TrainConfig, from_counts: Any = None) -> Any:
    """Train a BPE or WordPiece tokenizer with every stage in DuckDB. Returns the same
    `TrainResult` as `tokcolumnar.training.train` (so `result.save(dir)` writes the same
    files)."""
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
            words, merges, vocab = train_wordpiece_duckdb(sql, cfg, timings)
        else:  # stages 4-9
            words, merges, vocab = train_bpe(sql, cfg, timings)
    finally:
        con.close()
    if frame is not None:
        words = frame.with_columns(words.get_column("tokens"), words.get_column("ids"))
    result = TrainResult(cfg, words, merges, vocab, normalizer, pretokenizer, timings)
    if isinstance(inputs, (str, Path)):
        result.inputs = [str(inputs)]
    elif isinstance(inputs, (list, tuple)):
        result.inputs = [str(x) for x in inputs]
    return result
