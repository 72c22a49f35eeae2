"""`tokcolumnar sql DIR "SELECT ..."`: DuckDB with views over a training directory's tables."""

from __future__ import annotations

import sys
from pathlib import Path

from .atomic import atomic_path
from .errors import TokcolumnarError

VIEWS = ("words", "merges", "vocab", "encoded")


def connect(directory: str | Path):  # noqa: ANN201 - duckdb is imported lazily
    """A DuckDB connection with one view per Parquet table found in `directory`."""
    import duckdb

    d = Path(directory)
    if not d.is_dir():
        raise TokcolumnarError(f"not a directory: {directory}")
    con = duckdb.connect()
    found = 0
    for name in VIEWS:
        f = d / f"{name}.parquet"
        if f.exists():
            path = str(f).replace("'", "''")
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
            found += 1
    if not found:
        raise TokcolumnarError(f"{directory} has none of {', '.join(VIEWS)}.parquet")
    return con


def run_sql(directory: str, query: str, fmt: str = "table", output: str | None = None) -> None:
    import duckdb

    con = connect(directory)
    try:
        rel = con.sql(query)
    except duckdb.Error as e:
        raise TokcolumnarError(f"SQL error: {str(e).strip().splitlines()[0]}") from None
    if rel is None:
        return
    try:
        df = rel.pl()
    except duckdb.Error as e:
        raise TokcolumnarError(f"SQL error: {str(e).strip().splitlines()[0]}") from None
    if fmt == "table":
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=20, fmt_str_lengths=60, tbl_width_chars=160):
            text = str(df)
        if output:
            with atomic_path(output) as tmp:
                tmp.write_text(text + "\n", encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return
    if fmt == "parquet":
        if not output:
            raise TokcolumnarError("--format parquet needs --output FILE")
        with atomic_path(output) as tmp:
            df.write_parquet(tmp)
        return
    if output:
        with atomic_path(output) as tmp:
            df.write_csv(tmp) if fmt == "csv" else df.write_ndjson(tmp)
    else:
        sys.stdout.write(df.write_csv() if fmt == "csv" else df.write_ndjson())
