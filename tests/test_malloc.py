"""`tokcolumnar.malloc`: which glibc settings a run fixes, and that the user's environment
variables win (glibc reads them at start-up; a later `mallopt` would override them)."""

from __future__ import annotations

import sys

import pytest

from tokcolumnar import malloc


class FakeLibc:
    """Records the `mallopt` calls instead of changing this process's allocator."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(malloc.ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    return fake


def test_encode_fixes_both_thresholds(libc: FakeLibc) -> None:
    assert malloc.fix_mmap_threshold(malloc.ENCODE_MMAP_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)
    assert sorted(libc.calls) == sorted([
        (malloc.M_MMAP_THRESHOLD, malloc.ENCODE_MMAP_THRESHOLD),
        (malloc.M_TRIM_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)])


def test_default_leaves_the_trim_threshold(libc: FakeLibc) -> None:
    assert malloc.fix_mmap_threshold()
    assert libc.calls == [(malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD)]


def test_the_users_variables_win(libc: FakeLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    assert malloc.fix_mmap_threshold(malloc.ENCODE_MMAP_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)
    assert libc.calls == [(malloc.M_MMAP_THRESHOLD, malloc.ENCODE_MMAP_THRESHOLD)]
    libc.calls.clear()
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4096")
    assert not malloc.fix_mmap_threshold(malloc.ENCODE_MMAP_THRESHOLD,
                                         malloc.ENCODE_TRIM_THRESHOLD)
    assert libc.calls == [(malloc.M_TRIM_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)]
