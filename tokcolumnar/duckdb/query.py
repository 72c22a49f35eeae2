"""`tokcolumnar sql DIR "SELECT ..."`: DuckDB over a training directory's tables.

Views: `words`, `merges`, `vocab` (and `encoded` when DIR holds an encoded.parquet), one per
Parquet file found. The query may be several statements (`SET VARIABLE token = 'ing'; SELECT
...`: the last one's rows are printed) or the path of a .sql file, e.g. one of the ready queries
in `sql/analysis/`. Output: a table on stdout, or `--format csv|json|parquet [--output FILE]`
(json = one JSON object per line; parquet needs --output; the file follows the rules of
`outputs`). A Unigram run's pruning rounds (rounds.parquet) are the view `rounds`, the pieces
they dropped (pruned.parquet) the view `pruned`.

The query is read-only by default: once the views exist, DuckDB's external access is switched
off and the configuration locked, so a query can read DIR's tables and nothing else — no other
file, no `COPY ... TO`, `ATTACH`, `INSTALL`/`LOAD` or `EXPORT`. `allow_external=True`
(`--allow-external`) leaves DuckDB as it is."""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from ..errors import TokcolumnarError
from ..outputs import mark_file, output_file, write_parquet
from ..stdout import escaped_for_stdout, holds, json_for_stdout, table_borders_fit
from . import ANALYSIS_DIR, QUERY_FORMATS, ready_queries

#: rounds, pruned: a Unigram run's pruning rounds and the pieces they dropped
VIEWS = ("words", "merges", "vocab", "encoded", "rounds", "pruned")

#: DuckDB column types every output format writes as they are (lists of them too); a column of
#: another type (VARIANT, UNION, BIT, INTERVAL, MAP, fixed-size arrays, structs, BLOB...) is
#: cast to text in DuckDB, which can print every value, before it reaches Polars, which cannot
#: hold some of them and cannot write others as CSV or JSON.
PLAIN_TYPE = re.compile(r"(BOOLEAN|(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?)|FLOAT|DOUBLE"
                        r"|DECIMAL\(\d+, ?\d+\)|VARCHAR|JSON|DATE|TIME"
                        r"|TIMESTAMP( WITH TIME ZONE|_S|_MS|_NS)?)(\[\])*")


def connect(directory: str | Path, allow_external: bool = False,
            temp_directory: str | None = None) -> Any:
    """A DuckDB connection with one view per Parquet table found in `directory`; unless
    `allow_external`, sandboxed to those files (see the module docstring) and to
    `temp_directory`, where DuckDB spills (`private_temp_directory`; None: DuckDB's own)."""
    d = Path(directory)
    if not d.is_dir():
        raise TokcolumnarError(f"not a directory: {directory}")
    config: dict[str, Any] = {}
    if not allow_external:
        config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    if temp_directory is not None:
        config["temp_directory"] = temp_directory
    con = duckdb.connect(config=config)
    found = []
    for name in VIEWS:
        f = d / f"{name}.parquet"
        if f.exists():
            try:
                con.read_parquet(str(f.resolve())).create_view(name)
            except duckdb.Error as e:
                raise TokcolumnarError(f"cannot read {f}: {_first_line(e)}") from None
            found.append(str(f.resolve()))
    if not found:
        raise TokcolumnarError(f"{directory} has none of {', '.join(VIEWS)}.parquet")
    if not allow_external:
        con.execute("SET allowed_paths = $paths", {"paths": found})
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


def _first_line(e: Exception) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def ready_query(name: str) -> str:
    """The text of a ready analysis query, by name (`tokcolumnar sql DIR --query NAME`)."""
    path = ANALYSIS_DIR / f"{name}.sql"
    if name not in ready_queries():
        raise TokcolumnarError(f"no ready query {name!r} (choose from "
                               f"{', '.join(ready_queries())})")
    return path.read_text(encoding="utf-8")


def load_query(query: str) -> str:
    """The query text: `query` itself, or the contents of the .sql file it names."""
    q = query.strip()
    if q.endswith(".sql") and "\n" not in q and Path(q).is_file():
        return Path(q).read_text(encoding="utf-8")
    return query


def query(directory: str | Path, sql: str, params: dict[str, Any] | None = None,
          allow_external: bool = False) -> Any:
    """Run `sql` (one or more statements) over the directory's views; returns the last
    statement's rows as a Polars DataFrame (None if it returns no rows). `params` are bound as
    DuckDB variables (read them with getvariable('name'))."""
    with private_temp_directory(allow_external) as temp_directory:
        return _query(directory, sql, params, allow_external, temp_directory)


@contextlib.contextmanager
def private_temp_directory(allow_external: bool) -> Iterator[str | None]:
    """Where a sandboxed query's DuckDB spills: a new directory of its own (mode 0700, removed
    afterwards), as DuckDB lets a query read and write its temporary directory whatever the
    sandbox says. Its default, `.tmp` under the current directory, was the user's: a
    query could overwrite the files of a `./.tmp/` and create databases there. None (DuckDB's
    default) with `allow_external`."""
    if allow_external:
        yield None
        return
    path = tempfile.mkdtemp(prefix="tokcolumnar-sql-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _query(directory: str | Path, sql: str, params: dict[str, Any] | None,
           allow_external: bool, temp_directory: str | None) -> Any:
    con = connect(directory, allow_external, temp_directory)
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
        return as_text_where_needed(rel).pl() if rel is not None else None
    except duckdb.Error as e:
        raise TokcolumnarError(f"SQL error: {_first_line(e)}") from None
    finally:
        con.close()


def as_text_where_needed(rel: Any) -> Any:
    """The relation with its columns of types outside `PLAIN_TYPE` cast to VARCHAR."""
    types = [str(t) for t in rel.types]
    if all(PLAIN_TYPE.fullmatch(t) for t in types):
        return rel
    names = [f'"{c.replace(chr(34), chr(34) * 2)}"' for c in rel.columns]
    if len(set(names)) < len(names):  # a projection by name cannot tell them apart
        raise TokcolumnarError("the result has two columns of one name and a type that must be "
                               "cast to text: name the columns apart (AS)")
    return rel.project(", ".join(
        n if PLAIN_TYPE.fullmatch(t) else f"CAST({n} AS VARCHAR) AS {n}"
        for n, t in zip(names, types)))


def run_sql(directory: str, query_text: str, fmt: str = "table", output: str | None = None,
            params: dict[str, Any] | None = None, force: bool = False,
            allow_external: bool = False) -> None:
    """The `sql` command: run the query and print or write its result."""
    if fmt not in QUERY_FORMATS:
        raise TokcolumnarError(f"unknown format {fmt!r} (choose from {', '.join(QUERY_FORMATS)})")
    if fmt == "parquet" and not output:
        raise TokcolumnarError("--format parquet needs --output FILE")
    if not output:
        df = query(directory, query_text, params, allow_external)
        if df is not None:
            sys.stdout.write(_for_stdout(df, fmt))
        return
    with output_file(output, inputs=[directory], force=force, what="--output") as tmp:
        df = query(directory, query_text, params, allow_external)
        if df is None:
            raise TokcolumnarError("the last statement returns no rows to write to --output")
        if fmt == "parquet":
            write_parquet(df, tmp, "query")
        else:
            tmp.write_text(_render(df, fmt), encoding="utf-8")
            mark_file(tmp)


def _for_stdout(df: Any, fmt: str) -> str:
    """`_render` for standard output, whose encoding may lack characters of the result
    (`tokcolumnar.stdout`): a table then has ASCII borders, JSON has JSON escapes, and any
    other character is written as an escape by the stream (`cli` makes it escape)."""
    text = _render(df, fmt)
    if fmt == "json":
        return json_for_stdout(text)
    if fmt != "table" or holds(text):
        return text
    # a table: its string columns escaped before it is drawn, so that its columns line up
    import polars as pl

    escaped = df.with_columns(pl.col(c).map_elements(escaped_for_stdout, return_dtype=pl.String)
                              for c, t in df.schema.items() if t == pl.String)
    return _render(escaped, fmt, ascii_borders=not table_borders_fit())


def _render(df: Any, fmt: str, ascii_borders: bool = False) -> str:
    """The text of a result in a text format (table, csv, json)."""
    import polars as pl

    if fmt == "table":
        borders = "ASCII_FULL_CONDENSED" if ascii_borders else "UTF8_FULL_CONDENSED"
        with pl.Config(tbl_rows=200, tbl_cols=20, fmt_str_lengths=60, tbl_width_chars=160,
                       tbl_hide_dataframe_shape=False, tbl_formatting=borders):
            return str(df) + "\n"
    if fmt == "csv":
        return _csv(df)
    return df.write_ndjson()


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
