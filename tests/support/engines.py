"""The two engines side by side, through the engine interface (`count`, and `train` run by the
pipeline): what the DuckDB tests compare."""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from tokcolumnar.config import TrainConfig
from tokcolumnar.export import TrainResult
from tokcolumnar.training.pipeline import engine_for, train


def polars_count(inputs: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The words table of the Polars engine."""
    return engine_for("polars").count(inputs, cfg)


def duckdb_count(inputs: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The words table of the DuckDB engine."""
    return engine_for("duckdb").count(inputs, cfg)


def train_duckdb(inputs: Any, cfg: TrainConfig, from_counts: Any = None) -> TrainResult:
    """A whole training run with the DuckDB engine (whatever engine `cfg` names)."""
    return train(inputs, from_counts=from_counts, config=dataclasses.replace(cfg, engine="duckdb"))


def every_loop_setting(vocab_size: int) -> list[dict[str, Any]]:
    """One training setting per tie-break and model of the merge loop (BPE's three tie-breaks
    and its length rule, WordPiece's two scorings): what a change to the loop's machinery
    (chunked passes, arrays on disk) must leave unchanged."""
    wordpiece = {"model": "wordpiece", "special_tokens": ["[UNK]"]}
    return [{"vocab_size": vocab_size, **extra} for extra in (
        {}, {"tie_break": "lexical-max"}, {"tie_break": "first-seen"},
        {"max_token_length": 5}, wordpiece, {**wordpiece, "wordpiece_scoring": "frequency"})]
