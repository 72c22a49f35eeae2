"""The markers of the running test, so that helpers can check a test is marked for what it
does (`corpus` when it reads the corpora, `duckdb` when it runs DuckDB): an unmarked test would
run in a tier that claims to leave it out. tests/conftest.py keeps `CURRENT` up to date."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

#: The marker names of the running test (None outside a test).
CURRENT: frozenset[str] | None = None


def require(marker: str, what: str) -> None:
    """Fail the running test unless it carries `marker`."""
    if CURRENT is not None and marker not in CURRENT:
        pytest.fail(f"this test {what}: mark it @pytest.mark.{marker}", pytrace=False)


#: Both engines as a test parameter, the DuckDB one marked `duckdb`.
ENGINES = ["polars", pytest.param("duckdb", marks=pytest.mark.duckdb)]


def tiered(values: list[Any], fast: Callable[[Any], bool], multi: bool = False) -> list[Any]:
    """`values` for `parametrize`: those for which `fast(value)` holds run in the fast tier,
    the others are marked `slow` (the full run has them all). `multi`: each value is the tuple
    of several arguments."""
    return [v if fast(v) else pytest.param(*(v if multi else (v,)), marks=pytest.mark.slow)
            for v in values]


#: The tests that only `TOKCOLUMNAR_SLOW=1` runs (minutes each, or many of them: the full run
#: would pass CI's budget); docs/testing.md lists them.
SLOW_ONLY = pytest.mark.skipif(not os.environ.get("TOKCOLUMNAR_SLOW"),
                               reason="minutes of reference runs: set TOKCOLUMNAR_SLOW=1")


def heavy(values: list[Any], full: Callable[[Any], bool], fast: Callable[[Any], bool],
          multi: bool = False) -> list[Any]:
    """`values` for `parametrize` in three tiers: `fast(value)` in the fast tier, `full(value)`
    in the full run (marked `slow`), the others only with TOKCOLUMNAR_SLOW=1 (`SLOW_ONLY`)."""
    out = []
    for v in values:
        args = v if multi else (v,)
        if fast(v):
            out.append(v)
        elif full(v):
            out.append(pytest.param(*args, marks=pytest.mark.slow))
        else:
            out.append(pytest.param(*args, marks=[pytest.mark.slow, SLOW_ONLY]))
    return out


def with_name(name: Any, values: list[Any]) -> list[Any]:
    """`values` for `parametrize` (plain values or `pytest.param`s, marks kept) with `name`
    as a first argument before each."""
    return [pytest.param(name, *v.values, marks=v.marks, id=None) if hasattr(v, "values")
            else (name, v) for v in values]
