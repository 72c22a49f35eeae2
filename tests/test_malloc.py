"""`tokcolumnar.malloc`: which glibc settings a run fixes, and that the user's environment
variables win (glibc reads them at start-up; a later `mallopt` would override them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokcolumnar import malloc
from tokcolumnar.config import TrainConfig
from tokcolumnar.progress import StageTimer
from tokcolumnar.training import unigram_pipeline  # (Polars loaded before `libc` fakes ctypes)


class FakeLibc:
    """Records the `mallopt` calls instead of changing this process's allocator."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("trim", pad))
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(malloc.ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    return fake


def test_encode_fixes_both_thresholds(libc: FakeLibc) -> None:
    assert malloc.fix_mmap_threshold(malloc.ENCODE_MMAP_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)
    assert sorted(libc.calls) == sorted([
        (malloc.M_MMAP_THRESHOLD, malloc.ENCODE_MMAP_THRESHOLD),
        (malloc.M_TRIM_THRESHOLD, malloc.ENCODE_TRIM_THRESHOLD)])


def test_default_leaves_the_trim_threshold(libc: FakeLibc) -> None:
    assert malloc.fix_mmap_threshold()
    assert libc.calls == [(malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD)]


def test_merging_heap_keeps_temporaries_then_restores(libc: FakeLibc,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge loop's heap: both thresholds raised while it runs, the fixed ones restored
    and the freed heap given back after (also after an error); the user's trim threshold is
    left; nothing when no threshold was fixed (a library run)."""
    monkeypatch.setattr(malloc, "_fixed_threshold", None)
    with malloc.merging_heap():
        pass
    assert libc.calls == []
    monkeypatch.setattr(malloc, "_fixed_threshold", malloc.MMAP_THRESHOLD)
    with pytest.raises(KeyboardInterrupt), malloc.merging_heap():
        assert libc.calls == [(malloc.M_MMAP_THRESHOLD, malloc.MERGE_MMAP_THRESHOLD),
                              (malloc.M_TRIM_THRESHOLD, malloc.MERGE_TRIM_THRESHOLD)]
        raise KeyboardInterrupt
    assert libc.calls[2:] == [(malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD),
                              (malloc.M_TRIM_THRESHOLD, malloc.TRIM_THRESHOLD), ("trim", 0)]
    libc.calls.clear()
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    with malloc.merging_heap():
        pass
    assert libc.calls == [(malloc.M_MMAP_THRESHOLD, malloc.MERGE_MMAP_THRESHOLD),
                          (malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD), ("trim", 0)]


def test_unigram_training_runs_in_its_heap(libc: FakeLibc, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    """`train --model unigram` allocates and frees arrays of 1-30 MiB every EM iteration: it
    runs with both thresholds raised (`unigram_heap`), the fixed ones restored after; its
    threads share one arena from its start (`one_arena`)."""
    seen = []
    real = unigram_pipeline._unigram_tables

    def spy(*args, **kwargs):
        seen.append(list(libc.calls))
        return real(*args, **kwargs)

    monkeypatch.setattr(unigram_pipeline, "_unigram_tables", spy)
    monkeypatch.setattr(malloc, "_fixed_threshold", malloc.MMAP_THRESHOLD)
    path = tmp_path / "c.txt"
    path.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 3, encoding="utf-8")
    unigram_pipeline.unigram_tables([str(path)], None,
                                    TrainConfig(model="unigram", vocab_size=18), StageTimer())
    assert seen == [[(malloc.M_ARENA_MAX, 1),
                     (malloc.M_MMAP_THRESHOLD, malloc.UNIGRAM_MMAP_THRESHOLD),
                     (malloc.M_TRIM_THRESHOLD, malloc.UNIGRAM_TRIM_THRESHOLD)]]
    # the heap's free pages given back after the lattices' build and each pruning round
    # (`release_free_heap`), then the thresholds restored
    during, after = libc.calls[3:-3], libc.calls[-3:]
    assert len(during) >= 2 and set(during) == {("trim", 0)}
    assert after == [(malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD),
                     (malloc.M_TRIM_THRESHOLD, malloc.TRIM_THRESHOLD), ("trim", 0)]


def test_one_arena_leaves_a_users_arena_setting(libc: FakeLibc,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`one_arena` sets `M_ARENA_MAX` 1 in a command-line run, and nothing when the user set
    `MALLOC_ARENA_MAX` or a library caller kept its allocator."""
    monkeypatch.setattr(malloc, "_fixed_threshold", malloc.MMAP_THRESHOLD)
    malloc.one_arena()
    assert libc.calls == [(malloc.M_ARENA_MAX, 1)]
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    malloc.one_arena()
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setattr(malloc, "_fixed_threshold", None)
    malloc.one_arena()
    assert libc.calls == [(malloc.M_ARENA_MAX, 1)]


def test_release_free_heap_only_in_a_command_line_run(libc: FakeLibc,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`release_free_heap` trims glibc's heap when the command line fixed its thresholds, and
    leaves a library caller's allocator alone."""
    monkeypatch.setattr(malloc, "_fixed_threshold", None)
    malloc.release_free_heap()
    assert libc.calls == []
    monkeypatch.setattr(malloc, "_fixed_threshold", malloc.MMAP_THRESHOLD)
    malloc.release_free_heap()
    assert libc.calls == [("trim", 0)]


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


def test_jemalloc_conf_of_a_command_line() -> None:
    assert malloc.jemalloc_conf(["encode", "in.txt", "--out", "o"]) == malloc.ENCODE_JEMALLOC_CONF
    assert malloc.jemalloc_conf(["--quiet", "encode"]) == malloc.ENCODE_JEMALLOC_CONF
    assert malloc.jemalloc_conf(["train", "encode.txt", "--out", "o"]) is None
    assert malloc.jemalloc_conf(["train", "big.txt"], large=True) == malloc.LARGE_COUNT_MALLOC_CONF
    assert malloc.jemalloc_conf([]) is None


@pytest.mark.parametrize(("given", "command", "expected"), [
    (None, "encode", malloc.ENCODE_JEMALLOC_CONF),
    (None, "count", "dirty_decay_ms:0,muzzy_decay_ms:0"),
    ("narenas:1", "encode", "narenas:1"),
])
def test_the_cli_sets_polars_allocator_before_loading_it(
        tmp_path: Path, given: str | None, command: str, expected: str) -> None:
    """In a fresh process (Polars reads the setting once, when it loads): `encode` gets its
    own setting, other commands the package's, and the user's own wins."""
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if given is not None:
        env["_RJEM_MALLOC_CONF"] = given
    argv = [command, str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]
    if command == "encode":
        argv += ["--tokenizer", str(tmp_path)]
    # the command fails (no input), after Polars has loaded
    code = ("import os; from tokcolumnar.cli import main; "
            f"main({argv!r}); print(os.environ['_RJEM_MALLOC_CONF'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    # Polars puts its own defaults first when it loads: the last value of each key counts
    assert settings(out.splitlines()[-1]).items() >= settings(expected).items()


def settings(conf: str) -> dict[str, str]:
    """jemalloc's settings string as it reads it: each key's last value."""
    return dict(item.split(":", 1) for item in conf.split(","))


@pytest.fixture
def before_polars(monkeypatch: pytest.MonkeyPatch) -> None:
    """As at the start of a command-line run: Polars not loaded, the setting not the user's."""
    monkeypatch.delitem(sys.modules, "polars", raising=False)
    monkeypatch.setattr(malloc, "USER_JEMALLOC_CONF", False)
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
    monkeypatch.setattr(malloc, "LARGE_COUNT_BYTES", 1000)
    monkeypatch.setattr(malloc, "large_count", False)


def test_large_count_keeps_freed_pages(before_polars: None, tmp_path: Path) -> None:
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_bytes(b"a b\n" * 10)
    large.write_bytes(b"a b\n" * 300)
    malloc.configure_for_command(["train", str(small), "--out", "o"])
    assert not malloc.large_count
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
    # encode of a large file is not a count: it gets encode's own setting
    malloc.configure_for_command(["encode", str(large), "--tokenizer", "t"])
    assert not malloc.large_count
    assert os.environ["_RJEM_MALLOC_CONF"] == malloc.ENCODE_JEMALLOC_CONF
    # a glob counts the files it matches
    malloc.configure_for_command(["count", str(tmp_path / "*.txt"), "--out", "w.parquet"])
    assert os.environ["_RJEM_MALLOC_CONF"] == malloc.LARGE_COUNT_MALLOC_CONF
    assert malloc.large_count


def test_freed_pages_kept_only_under_a_limit_with_room_for_them(
        before_polars: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small --memory-limit (or a small machine's default limit) keeps a large count from
    keeping Polars' freed pages: they would take the limit's room (it is still a large count:
    glibc's heap serves its temporaries)."""
    large = tmp_path / "large.txt"
    large.write_bytes(b"a b\n" * 300)
    small_limit = str(malloc.LARGE_COUNT_MIN_LIMIT - 1)
    for argv, kept in (
            (["train", str(large), "--memory-limit", small_limit], False),
            (["count", str(large), f"--memory-limit={small_limit}"], False),
            (["train", str(large), "--memory-limit", "300MB", "--memory-limit", "4GB"], True),
            (["train", str(large), "--memory-limit", "4GB"], True),
            (["train", str(large), "--memory-limit", "not-a-size"], False)):
        monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
        malloc.configure_for_command(argv)
        assert malloc.large_count, argv
        assert (os.environ["_RJEM_MALLOC_CONF"] == malloc.LARGE_COUNT_MALLOC_CONF) is kept, argv
    # without --memory-limit, the default limit decides
    for default, kept in ((malloc.LARGE_COUNT_MIN_LIMIT - 1, False),
                          (malloc.LARGE_COUNT_MIN_LIMIT, True)):
        monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
        monkeypatch.setattr(malloc, "default_limit", lambda d=default: d)
        malloc.configure_for_command(["train", str(large)])
        assert (os.environ["_RJEM_MALLOC_CONF"] == malloc.LARGE_COUNT_MALLOC_CONF) is kept


def test_user_setting_or_loaded_polars_wins(before_polars: None, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's allocator setting is kept (the run is still a large count); once Polars is
    loaded nothing changes."""
    large = tmp_path / "large.txt"
    large.write_bytes(b"a b\n" * 300)
    monkeypatch.setattr(malloc, "USER_JEMALLOC_CONF", True)
    malloc.configure_for_command(["train", str(large)])
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
    assert malloc.large_count
    monkeypatch.setattr(malloc, "large_count", False)
    monkeypatch.setattr(malloc, "USER_JEMALLOC_CONF", False)
    monkeypatch.setitem(sys.modules, "polars", object())
    malloc.configure_for_command(["train", str(large)])
    assert not malloc.large_count
    assert os.environ["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:0,muzzy_decay_ms:0"
