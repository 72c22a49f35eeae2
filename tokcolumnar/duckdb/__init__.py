"""The DuckDB twin of the training pipeline (`engine`), the cross-check of the two engines
(`crosscheck`), and `tokcolumnar sql` (`query`). This package's modules import DuckDB; this
file does not, so the names below cost nothing to read.

The SQL files live in `sql/` at the repository root and ship inside the package as
`tokcolumnar/sql/` (a symbolic link in a checkout, a real folder in an installed wheel);
`TOKCOLUMNAR_SQL_DIR` points elsewhere (e.g. to try an edited copy)."""

from __future__ import annotations

import os
from pathlib import Path

SQL_DIR = Path(os.environ.get("TOKCOLUMNAR_SQL_DIR") or Path(__file__).parents[1] / "sql")
#: The ready analysis queries: `sql/analysis/NAME.sql` (`tokcolumnar sql DIR --query NAME`).
ANALYSIS_DIR = SQL_DIR / "analysis"
#: The result formats of `tokcolumnar sql`.
QUERY_FORMATS = ("table", "csv", "json", "parquet")


def ready_queries() -> list[str]:
    """The names of the ready analysis queries."""
    return sorted(p.stem for p in ANALYSIS_DIR.glob("*.sql"))
