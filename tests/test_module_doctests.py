"""The examples in the package's docstrings (`>>>` lines) run and print what they show."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tokcolumnar"
WITH_EXAMPLES = sorted(p for p in PACKAGE.rglob("*.py") if ">>> " in p.read_text())


def _param(path: Path):
    """The module's case (the DuckDB package's examples run DuckDB: its marker)."""
    marks = [pytest.mark.duckdb] if "duckdb" in path.relative_to(PACKAGE).parts else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(PACKAGE)))


def test_some_modules_have_examples():
    assert len(WITH_EXAMPLES) >= 3


@pytest.mark.parametrize("path", [_param(p) for p in WITH_EXAMPLES])
def test_module_examples(path: Path):
    name = ".".join(("tokcolumnar", *path.relative_to(PACKAGE).with_suffix("").parts))
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
