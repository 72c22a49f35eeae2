"""The DuckDB merge loops' checkpoint (`--resume`, `--checkpoint-every`; docs/architecture.md,
"Checkpoints and --resume"). The loops' state is their tables (words, segmentation, pair
counts, queue, merges so far) plus a few counters in Python: every `--checkpoint-every`
seconds, between two passes, every table of the run is copied into one DuckDB database file in
the work directory, with the counters as JSON in a one-row table, and renamed into place. A
resumed run builds the alphabet, the views and the prepared statements as a fresh run does,
then replaces the tables by the saved ones and restores the counters: no merge is replayed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from ..training.checkpoint import MergeCheckpoint
from .runner import Scripts

#: The checkpoint's database file in the work directory.
STATE_DB = "merge.duckdb"
#: The table of the checkpoint that holds the loop's counters.
COUNTERS_TABLE = "tc_loop_counters"


class CheckpointedLoop(Protocol):
    """A loop whose state is its tables plus the attributes named in `COUNTERS`."""

    COUNTERS: tuple[str, ...]

    def restored(self) -> None: ...


def _quote_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _tables(sql: Scripts, database: str) -> list[str]:
    """The run's tables in `database` (temporary tables belong to counting, done by now)."""
    rows = sql.con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? "
        "AND schema_name = 'main' AND NOT temporary ORDER BY table_name", [database]).fetchall()
    return [name for (name,) in rows if name != COUNTERS_TABLE]


class DuckDBCheckpoint:
    """Saves (and on a resumed work directory restores) a DuckDB loop's tables and counters,
    on the clock of the run's `MergeCheckpoint`."""

    def __init__(self, sql: Scripts, clock: MergeCheckpoint, loop: CheckpointedLoop) -> None:
        self.sql, self.clock, self.loop = sql, clock, loop

    def restore(self) -> bool:
        """Put back the state a killed run saved; False when there is none."""
        work = self.clock.work
        path = work.file(STATE_DB)
        if not work.resumed or not path.exists():
            return False
        con = self.sql.con
        con.execute(f"ATTACH {_quote_path(path)} AS tc_saved (READ_ONLY)")
        try:
            for name in _tables(self.sql, "tc_saved"):
                con.execute(f'CREATE OR REPLACE TABLE main."{name}" AS '
                            f'SELECT * FROM tc_saved.main."{name}"')
            (counters,), = con.execute(
                f"SELECT counters FROM tc_saved.main.{COUNTERS_TABLE}").fetchall()
        finally:
            con.execute("DETACH tc_saved")
        for field, value in json.loads(counters).items():
            setattr(self.loop, field, value)
        self.loop.restored()
        return True

    def __call__(self) -> None:
        """Before each pass: save when the clock says so."""
        if self.clock.due():
            self.clock.work.write_by(STATE_DB, self._save)
            self.clock.saved()
        self.clock.passed()

    def _save(self, path: Path) -> None:
        con = self.sql.con
        counters = json.dumps({f: getattr(self.loop, f) for f in self.loop.COUNTERS})
        database = con.execute("SELECT current_database()").fetchone()[0]
        tables = _tables(self.sql, database)
        con.execute(f"ATTACH {_quote_path(path)} AS tc_saving")
        try:
            for name in tables:
                con.execute(f'CREATE TABLE tc_saving.main."{name}" AS '
                            f'SELECT * FROM "{database}".main."{name}"')
            con.execute(f"CREATE TABLE tc_saving.main.{COUNTERS_TABLE} AS "
                        "SELECT $c::VARCHAR AS counters", {"c": counters})
        finally:
            con.execute("DETACH tc_saving")


def checkpointed(sql: Scripts, clock: MergeCheckpoint | None, loop: Any
                 ) -> DuckDBCheckpoint | None:
    """The loop's checkpoint (restored first when the run resumes), or None without a work
    directory."""
    if clock is None:
        return None
    saver = DuckDBCheckpoint(sql, clock, loop)
    saver.restore()
    return saver
