"""The markers of the running test, so that helpers can check a test is marked for what it
does (`corpus` when it reads the corpora, `duckdb` when it runs DuckDB): an unmarked test would
run in a tier that claims to leave it out. tests/conftest.py keeps `CURRENT` up to date."""

from __future__ import annotations

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
