"""The allocator settings of a command-line run (tokcolumnar.malloc)."""

from __future__ import annotations

import os
import sys

import pytest

import tokcolumnar
from tokcolumnar import malloc


@pytest.fixture
def before_polars(monkeypatch):
    """As at the start of a command-line run: Polars not loaded, the setting not the user's."""
    monkeypatch.delitem(sys.modules, "polars", raising=False)
    monkeypatch.setattr(tokcolumnar, "_USER_MALLOC_CONF", False)
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
    monkeypatch.setattr(malloc, "LARGE_COUNT_BYTES", 1000)
    monkeypatch.setattr(malloc, "large_count", False)


def test_large_count_keeps_freed_pages(before_polars, tmp_path, monkeypatch):
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_bytes(b"a b\n" * 10)
    large.write_bytes(b"a b\n" * 300)
    assert not malloc.keep_freed_pages_for_large_counts(["train", str(small), "--out", "o"])
    assert not malloc.keep_freed_pages_for_large_counts(["encode", "t.json", str(large)])
    assert not malloc.large_count
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
    # a glob counts the files it matches
    assert malloc.keep_freed_pages_for_large_counts(["count", str(tmp_path / "*.txt"),
                                                     "--out", "w.parquet"])
    assert os.environ["_RJEM_MALLOC_CONF"] == malloc.LARGE_COUNT_MALLOC_CONF
    assert malloc.large_count


def test_user_setting_or_loaded_polars_wins(before_polars, tmp_path, monkeypatch):
    """The user's allocator setting is kept (the run is still a large count); once Polars is
    loaded nothing changes."""
    large = tmp_path / "large.txt"
    large.write_bytes(b"a b\n" * 300)
    monkeypatch.setattr(tokcolumnar, "_USER_MALLOC_CONF", True)
    assert malloc.keep_freed_pages_for_large_counts(["train", str(large)])
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
    assert malloc.large_count
    monkeypatch.setattr(malloc, "large_count", False)
    monkeypatch.setattr(tokcolumnar, "_USER_MALLOC_CONF", False)
    monkeypatch.setitem(sys.modules, "polars", object())
    assert not malloc.keep_freed_pages_for_large_counts(["train", str(large)])
    assert not malloc.large_count
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
