"""`tokcolumnar sql DIR "SELECT ..."`: DuckDB over a training directory's tables.

Views: `words`, `merges`, `vocab` (and `encoded` when DIR holds an encoded.parquet), one per
Parquet file found. The query may be several statements (`SET VARIABLE token = 'ing'; SELECT
...`: the last one's rows are printed) or the path of a .sql file, e.g. one of the ready queries
in `sql/analysis/`. Output: a table on stdout, or `--format csv|json|parquet [--output FILE]`
(json = one JSON object per line; parquet needs --output)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .atomic import atomic_path
from .errors import TokcolumnarError

VIEWS = ("words", "merges", "vocab", "encoded")
FORMATS = ("table", "csv", "json", "parquet")


def connect(directory: str | Path) -> Any:
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
            try:
                con.read_parquet(str(f)).create_view(name)
            except duckdb.Error as e:
                raise TokcolumnarError(f"cannot read {f}: {_first_line(e)}") from None
            found += 1
    if not found:
        raise TokcolumnarError(f"{directory} has none of {', '.join(VIEWS)}.parquet")
    return con


def _first_line(e: Exception) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def load_query(query: str) -> str:
    """The query text: `query` itself, or the contents of the .sql file it names."""
    q = query.strip()
    if q.endswith(".sql") and "\n" not in q and Path(q).is_file():
        return Path(q).read_text(encoding="utf-8")
    return query


def query(directory: str | Path, sql: str, params: dict[str, Any] | None = None) -> Any:
    """Run `sql` (one or more statements) over the directory's views; returns the last
    statement's rows as a Polars DataFrame (None if it returns no rows). `params` are bound as
    DuckDB variables (read them with getvariable('name'))."""
    import duckdb

    con = connect(directory)
    try:
        for name, value in (params or {}).items():
            if not name.isidentifier():
                raise TokcolumnarError(f"bad parameter name {name!r}")
            con.execute(f"SET VARIABLE {name} = $v", {"v": value})
        statements = con.extract_statements(load_query(sql))
        if not statements:
            raise TokcolumnarError("empty query")
        rel = None
        for st in statements[:-1]:
            con.execute(st)
        last = statements[-1]
        rel = con.sql(last.query)
        return rel.pl() if rel is not None else None
    except duckdb.Error as e:
        raise TokcolumnarError(f"SQL error: {_first_line(e)}") from None
    finally:
        con.close()


def run_sql(directory: str, query_text: str, fmt: str = "table", output: str | None = None,
            params: dict[str, Any] | None = None) -> None:
    """The `sql` command: run the query and print or write its result."""
    import polars as pl

    if fmt not in FORMATS:
        raise TokcolumnarError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "parquet" and not output:
        raise TokcolumnarError("--format parquet needs --output FILE")
    df = query(directory, query_text, params)
    if df is None:
        return
    if fmt == "table":
        with pl.Config(tbl_rows=200, tbl_cols=20, fmt_str_lengths=60, tbl_width_chars=160,
                       tbl_hide_dataframe_shape=False):
            text = str(df)
        _emit(text + "\n", output)
    elif fmt == "parquet":
        with atomic_path(output) as tmp:
            df.write_parquet(tmp)
    elif fmt == "csv":
        _emit(_csv(df), output)
    else:
        _emit(df.write_ndjson(), output)


def _csv(df: Any) -> str:
    import polars as pl

    nested = [c for c, t in df.schema.items() if isinstance(t, (pl.List, pl.Array, pl.Struct))]
    if nested:  # CSV has no lists: write them as JSON text
        df = df.with_columns(pl.col(c).map_elements(_json_text, return_dtype=pl.String)
                             for c in nested)
    return df.write_csv()


def _json_text(v: Any) -> str:
    import json

    return json.dumps(v.to_list() if hasattr(v, "to_list") else v, ensure_ascii=False)


def _emit(text: str, output: str | None) -> None:
    if output:
        with atomic_path(output) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
