"""`tokcolumnar sql ... --param NAME=VALUE` binds the analysis queries' parameters."""

from __future__ import annotations

import polars as pl
import pytest

from tests.support.corpora import PRIMER, ROOT
from tokcolumnar.cli import main

pytestmark = pytest.mark.duckdb


def test_token_origin_with_param(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["train", str(PRIMER), "--out", str(out),
                 "--vocab-size", "500", "--quiet"]) == 0
    merges = pl.read_parquet(out / "merges.parquet")
    row = merges.filter(pl.col("token") == "ing").row(0, named=True)
    capsys.readouterr()
    assert main(["sql", str(out), str(ROOT / "sql" / "analysis" / "token_origin.sql"),
                 "--param", "token=ing", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("token,id,kind,rank,left,right,count")
    assert lines[1].split(",")[:7] == ["ing", str(row["id"]), "merge", str(row["rank"]),
                                        row["left"], row["right"], str(row["count"])]
    assert main(["sql", str(out), "SELECT 1", "--param", "oops"]) == 2
