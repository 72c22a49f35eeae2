"""Running the stage files of `sql/`: each file is split into named sections (`-- name: x`)
and statements, and run with bound parameters only (values never enter the SQL text)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import duckdb

from ..errors import TokcolumnarError
from . import SQL_DIR

_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_SECTION = re.compile(r"^-- name: ([A-Za-z0-9_]+)\s*$", re.M)
_UNSET = object()
VARIABLE_TYPES = {"n": "INTEGER", "prefix": "VARCHAR", "theta": "BIGINT"}
THREADS_VARIABLE = "TOKCOLUMNAR_DUCKDB_THREADS"  # DuckDB's thread count (default: its own)


class Scripts:
    """The stage files of `sql/`, split into named sections (`-- name: x`) and statements, run
    with named parameters (each statement gets the ones it uses)."""

    def __init__(self, con: Any, directory: Path = SQL_DIR):
        self.con = con
        self.dir = directory
        self._cache: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
        self._prepared: dict[tuple[str, str], list[str]] = {}
        self._names: list[str] = []
        self._bound: dict[str, Any] = {}

    def _file(self, stem: str) -> Path:
        found = sorted(self.dir.glob(f"*{stem}.sql"))
        if not found:
            raise TokcolumnarError(f"SQL stage file *{stem}.sql not found in {self.dir} "
                                   "(set TOKCOLUMNAR_SQL_DIR)")
        return found[0]

    def statements(self, stem: str, section: str = "") -> list[tuple[str, tuple[str, ...]]]:
        key = (stem, section)
        if key not in self._cache:
            text = self._file(stem).read_text(encoding="utf-8")
            if section:
                parts = _SECTION.split(text)
                bodies = dict(zip(parts[1::2], parts[2::2]))
                if section not in bodies:
                    raise TokcolumnarError(f"no section {section!r} in {self._file(stem).name}")
                text = bodies[section]
            stmts = []
            for st in self.con.extract_statements(text):
                q = st.query
                if not q.strip() or not _strip_comments(q).strip():
                    continue
                stmts.append((q, tuple(dict.fromkeys(_PARAM.findall(_strip_strings(q))))))
            self._cache[key] = stmts
        return self._cache[key]

    def run(self, stem: str, section: str = "", **params: Any) -> Any:
        """Run every statement of a section; returns the connection after the last one."""
        con = self.con
        for q, names in self.statements(stem, section):
            if names:
                con.execute(q, {n: params[n] for n in names})
            else:
                con.execute(q)
        return con

    def copy_in(self, name: str, frame: Any) -> None:
        """A Polars frame as the temporary table `name` (a copy: the frame may go)."""
        self.con.register(f"{name}_frame", frame)
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}_frame")
        self.con.unregister(f"{name}_frame")

    def rows(self, stem: str, section: str = "", **params: Any) -> list[tuple]:
        return self.run(stem, section, **params).fetchall()

    def table(self, stem: str, section: str) -> Any:
        """A one-query section without parameters (the result tables) as a Polars frame."""
        (q, names), = self.statements(stem, section)
        if names:
            raise TokcolumnarError(f"section {section} takes parameters")
        return self.con.sql(q).pl()

    # Statements run thousands of times (the merge pass) are prepared once. Their $name
    # parameters are then bound as DuckDB variables (SET VARIABLE name = $value), read by
    # getvariable('name') in the prepared text: values still never enter the SQL text.
    def bind(self, **values: Any) -> None:
        for name, value in values.items():
            if self._bound.get(name, _UNSET) == value:
                continue
            sql_type = VARIABLE_TYPES[name]
            self.con.execute(f"SET VARIABLE {name} = $v::{sql_type}", {"v": value})
            self._bound[name] = value

    def _as_variables(self, q: str) -> str:
        return _PARAM.sub(lambda m: f"getvariable('{m.group(1)}')", q)

    def run_vars(self, stem: str, section: str = "") -> None:
        """Run a section whose $name parameters are read from the bound variables (DDL such as
        views, which cannot take parameters)."""
        for q, _ in self.statements(stem, section):
            self.con.execute(self._as_variables(q))

    def prepare(self, stem: str, section: str) -> list[str]:
        """PREPARE every statement of a section; returns the EXECUTE statements to run it."""
        key = (stem, section)
        if key not in self._prepared:
            names = []
            for q, _ in self.statements(stem, section):
                name = f"tc_{len(self._names)}"
                self._names.append(name)
                self.con.execute(f"PREPARE {name} AS {self._as_variables(q)}")
                names.append(f"EXECUTE {name}")
            self._prepared[key] = names
        return self._prepared[key]


def _strip_comments(q: str) -> str:
    return re.sub(r"--[^\n]*", "", q)


def _strip_strings(q: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", _strip_comments(q))


def connect(memory_limit: int | None = None, temp_directory: str | None = None) -> Any:
    threads = os.environ.get(THREADS_VARIABLE)
    config: dict[str, Any] = {"threads": int(threads)} if threads else {}
    if memory_limit is not None:
        config["memory_limit"] = f"{memory_limit}B"
    if temp_directory is not None:
        config["temp_directory"] = temp_directory
    con = duckdb.connect(":memory:", config=config)
    Scripts(con).run("text_functions")
    Scripts(con).run("unicode_tables")
    return con


def duck_error(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
