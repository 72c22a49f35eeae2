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
