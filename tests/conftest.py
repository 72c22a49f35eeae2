"""Shared test helpers: where the real corpora live (env TOKCOLUMNAR_CORPORA, default
`../shared/corpora` from the project root); tests that need them skip with a reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def corpora_dir() -> Path:
    return Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))


def corpus(rel: str) -> Path:
    """Path of a corpus file, or skip the test when the corpora are not available."""
    p = corpora_dir() / rel
    if not p.exists():
        pytest.skip(f"corpus {p} not available (set TOKCOLUMNAR_CORPORA)")
    return p


def small_corpora() -> list[str]:
    d = corpora_dir() / "small"
    return sorted(p.name for p in d.glob("*.txt")) if d.exists() else []


SMALL = small_corpora() or ["<missing>"]


@pytest.fixture
def tmp_out(tmp_path: Path) -> Path:
    return tmp_path / "out"
