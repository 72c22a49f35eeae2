"""`compare`: the metrics of several tokenizers side by side on the same files, parity across
files (parallel text), and vocabulary overlap. Needs no plotting library (`--format json|csv`)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import polars as pl

from ..errors import TokcolumnarError
from ..stdout import json_for_stdout
from ..tokenizer import Tokenizer
from .metrics import METRIC_COLUMNS, metrics_table
from .vocabulary import jaccard, merge_pairs, shared_merge_prefix, surfaces

COMPARE_COLUMNS = ["tokenizer", "file", *METRIC_COLUMNS, "parity"]


def tokenizer_names(paths: list[str]) -> list[str]:
    """Short names for the tokenizers: the directory (or file) name, made unique with the
    parent's name, then the full path, when two collide."""
    names = [Path(p).name or p for p in paths]
    if len(set(names)) < len(names):
        names = [str(Path(Path(p).parent.name) / Path(p).name) for p in paths]
    if len(set(names)) < len(names):
        names = list(paths)
    return names


def compare_tables(tokenizers: list[str], texts: list[str], fmt: str | None = None,
                   column: str = "text") -> tuple[pl.DataFrame, pl.DataFrame]:
    """(metrics: one row per tokenizer x file with `parity` = tokens / tokens of the first
    file for that tokenizer; overlap: one row per pair of tokenizers)."""
    if len(set(map(str, texts))) < len(texts):
        raise TokcolumnarError("the same --text file is given twice")
    names = tokenizer_names(tokenizers)
    toks = [Tokenizer.load(p) for p in tokenizers]
    parts = []
    for name, tok in zip(names, toks):
        m, _ = metrics_table(tok, texts, fmt, column, curve=False, label=f"{name}, ")
        parts.append(m.with_columns(pl.lit(name).alias("tokenizer")))
    met = pl.concat(parts).with_columns(
        (pl.col("tokens") / pl.col("tokens").first().over("tokenizer")).alias("parity"))
    met = met.select(COMPARE_COLUMNS)
    surf = [surfaces(t) for t in toks]
    pairs = [merge_pairs(t) for t in toks]
    rows = [{"a": names[i], "b": names[j], "jaccard": jaccard(surf[i], surf[j]),
             "shared_merge_prefix": shared_merge_prefix(pairs[i], pairs[j])}
            for i, j in itertools.combinations(range(len(toks)), 2)]
    overlap = pl.DataFrame(rows, schema={"a": pl.String, "b": pl.String, "jaccard": pl.Float64,
                                         "shared_merge_prefix": pl.Int64})
    return met, overlap


def print_table(met: pl.DataFrame, fmt: str) -> None:
    """The metrics table on standard output: JSON (a list of objects) or CSV."""
    if fmt == "json":  # (in JSON's escapes what standard output's encoding cannot hold)
        sys.stdout.write(json_for_stdout(met.write_json()) + "\n")
    else:
        sys.stdout.write(met.write_csv())
