"""Hypothesis example counts relative to the active profile (tests/conftest.py: `ci` runs 100
examples per test, `dev` 10). Cheap properties run more examples, tests that train with DuckDB
per example run fewer; all of them follow the profile."""

from __future__ import annotations

from hypothesis import settings


def examples(factor: float) -> settings:
    """Settings running `factor` times the profile's examples (at least one)."""
    return settings(max_examples=max(1, round(settings.default.max_examples * factor)))
