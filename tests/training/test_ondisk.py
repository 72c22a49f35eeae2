"""The merge loop with its state on disk (`tokcolumnar.ondisk`; issue lean-merge, item 3):
every large array in a file of the work directory, its pages dropped from the process as it
runs, gives the merges of the loop in memory — for every tie-break and model — and a run whose
`--memory-limit` is below the in-memory estimate but above the on-disk one completes that way,
survives `kill -9` + `--resume` byte-identically, and is refused in one line below both."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import tokcolumnar as tc
from tests.support.cli import assert_clean_error, run_cli, run_outputs
from tests.support.corpora import PRIMER, corpus
from tests.support.engines import every_loop_setting
from tokcolumnar import memory, ondisk
from tokcolumnar.training import bpe, checkpoint, tables
from tokcolumnar.workdir import WorkDir

SETTINGS = every_loop_setting(500)


def test_arrays_live_in_unlinked_files_and_leave_the_resident_memory(tmp_path):
    """A 400 MB array written whole stays far below 400 MB resident, reads back what was
    written, and leaves no file in the directory (each is unlinked once mapped)."""
    before = memory.anonymous_resident_bytes() or 0
    with ondisk.on_disk(tmp_path, budget=0) as store:
        a = ondisk.empty(50_000_000, np.int64)
        a[:] = 7
        assert ondisk.is_mapped(a) and ondisk.is_mapped(a[10:])
        assert (memory.anonymous_resident_bytes() or 0) - before < 50 * 10**6
        a[:] = np.arange(a.size)
        assert int(a[::1000].sum()) == sum(range(0, a.size, 1000))
        store.trim()
        assert int(a[-1]) == a.size - 1  # read back from the file after its pages were dropped
        assert list(tmp_path.iterdir()) == []
    small = ondisk.empty(10, np.int64)
    assert not ondisk.is_mapped(small)  # outside the context: plain memory


def test_checkpoint_of_mapped_arrays_goes_a_slice_at_a_time(monkeypatch, tmp_path):
    """A checkpoint writes (and a resume reads) a mapped array a slice at a time, the pages
    dropped after each: one write of a whole array faulted it all in, past the limit."""
    monkeypatch.setattr(ondisk, "IO_CHUNK", 1 << 20)
    (tmp_path / "work").mkdir()
    work = WorkDir(tmp_path / "work", resumed=True)
    with ondisk.on_disk(tmp_path / "loop", budget=0) as store:
        store.close()  # (its watcher stopped: the trims counted are the slices')
        a = ondisk.empty(3_000_000, np.int64)
        a[:] = np.arange(a.size)
        work.write_pickle("state.pkl", {"a": a, "small": [1, 2]})
        written = store.trims
        assert written >= a.nbytes >> 20  # a trim after each MiB
        back = work.read_pickle("state.pkl")
        assert store.trims - written >= a.nbytes >> 20
        assert ondisk.is_mapped(back["a"]) and back["small"] == [1, 2]
        np.testing.assert_array_equal(back["a"], a)


def test_checkpoints_wait_nine_times_their_own_duration(monkeypatch):
    """--checkpoint-every, or nine times the last checkpoint's duration when that is longer;
    every pass with --checkpoint-every 0."""
    clock = [1000.0]
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: clock[0])
    cp = checkpoint.MergeCheckpoint(None, every=60)  # type: ignore[arg-type]
    clock[0] += 60
    assert cp.due()
    clock[0] += 20  # a 20 s checkpoint
    cp.saved()
    assert cp.cost == 20
    clock[0] += 61
    assert not cp.due()  # 60 s passed, not 180
    clock[0] += 120
    assert cp.due()
    every_pass = checkpoint.MergeCheckpoint(None, every=0)  # type: ignore[arg-type]
    every_pass.cost = 100.0
    assert every_pass.due()


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(map(str, o.values())))
def test_loop_on_disk_gives_the_in_memory_merges(monkeypatch, tmp_path, options):
    """Every array of every size in a file, the pages dropped every 20 ms whatever the
    resident memory (budget 0): the same merges, vocabulary and segmentations."""
    words = tc.count_words(str(PRIMER))
    monkeypatch.setattr(bpe, "SWEEP_MIN", 0)  # the sweeps' rewrites of a base too
    in_memory = tc.train(from_counts=words, **options)
    monkeypatch.setattr(ondisk, "MIN_BYTES", 1)
    monkeypatch.setattr(tables, "WORDS_FILE_TOKENS", 100)  # the words table in many slices
    with ondisk.on_disk(tmp_path / "loop", budget=0) as store:
        on_disk = tc.train(from_counts=words, **options)
    assert store.mapped_bytes > 0 and store.trims > 0  # the pages were dropped meanwhile
    for name in ("merges", "vocab", "words"):
        assert getattr(on_disk, name).equals(getattr(in_memory, name)), name
    # the words table was written to the work directory a slice at a time, then read
    assert pq.ParquetFile(tmp_path / "loop" / "words.parquet").num_row_groups > 3


# --- the command line --------------------------------------------------------------------

ARGS = ["--preset", "gpt2", "--vocab-size", "3000", "--quiet", "--checkpoint-every", "0"]


def outputs(d: Path) -> dict[str, object]:
    """`run_outputs`, with run.json's `merge_loop_on_disk` apart, and words.parquet as its rows
    and its metadata (a loop on disk writes the table a slice of words at a time, in row groups
    of their own: `tables.words_file`)."""
    files = run_outputs(d)
    files["on disk"] = files["run.json"]["stats"].pop("merge_loop_on_disk")  # type: ignore[index]
    words = d / "words.parquet"
    metadata = pl.read_parquet_metadata(words)
    metadata.pop("ARROW:schema", None)  # the Arrow schema's encoding: the writer's own
    files["words.parquet"] = (pl.read_parquet(words).rows(), metadata)
    return files


@pytest.fixture(scope="module")
def text() -> Path:
    return corpus("small/zh_hongloumeng_300k.txt")


@pytest.fixture(scope="module")
def reference(text, tmp_path_factory) -> tuple[dict[str, object], int, int]:
    """An in-memory run's outputs, and the loop's estimates in memory and on disk for its
    words table."""
    out = tmp_path_factory.mktemp("ref") / "out"
    proc = run_cli("train", str(text), "--out", str(out), *ARGS)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "run.json").read_text())["stats"]["merge_loop_on_disk"] is False
    words = pl.read_parquet(out / "words.parquet")
    n_symbols = int(words.get_column("word").str.len_chars().sum())
    table = tc.count_words(str(text), preset="gpt2")
    in_memory = memory.table_merge_bytes(table)
    on_disk = memory.ondisk_merge_bytes(table.height, n_symbols, table.estimated_size())
    assert on_disk < in_memory * 6 // 10
    return outputs(out), in_memory, on_disk


def limit_between(reference) -> str:
    _, in_memory, on_disk = reference
    return str((in_memory + on_disk) // 2)


@pytest.mark.corpus
def test_limit_below_the_in_memory_estimate_runs_on_disk(text, reference, tmp_path):
    out = tmp_path / "out"
    noisy = [a for a in ARGS if a != "--quiet"]  # the note is not --quiet's
    proc = run_cli("train", str(text), "--out", str(out), *noisy,
                   "--memory-limit", limit_between(reference))
    assert proc.returncode == 0, proc.stderr
    assert "kept its state on disk" in proc.stderr
    assert outputs(out) == {**reference[0], "on disk": True}
    assert not (tmp_path / "out.work").exists()  # the work directory, files and all, is gone


@pytest.mark.corpus
def test_run_in_memory_with_many_final_tokens_writes_its_words_table_in_slices(
        text, reference, tmp_path, monkeypatch):
    """A run in memory whose final tokens fill more than one slice (`WORDS_FILE_TOKENS`,
    100 here) writes its words table into the work directory a slice at a time, and the
    export moves it into the output: the same outputs as the run that built it whole; the
    API reads it from the output, or, without one, before the work directory goes."""
    monkeypatch.setattr(tables, "WORDS_FILE_TOKENS", 100)
    out = tmp_path / "out"
    options = {"preset": "gpt2", "vocab_size": 3000, "show_progress": False,
               "checkpoint_every": 0}
    r = tc.train(str(text), out_dir=out, **options)
    assert not r.loop_on_disk and isinstance(r.words_table, tables.WordsFile)
    assert pq.ParquetFile(out / "words.parquet").num_row_groups > 3
    assert outputs(out) == {**reference[0], "on disk": False}
    assert r.words.rows() == reference[0]["words.parquet"][0]
    assert not (tmp_path / "out.work").exists()
    bare = tc.train(str(text), work_dir=tmp_path / "work", **options)
    assert bare.words.equals(r.words)  # read before the work directory went
    assert not (tmp_path / "work").exists()


@pytest.mark.corpus
def test_api_run_on_disk_reads_its_words_table_from_the_output(text, reference, tmp_path):
    """A run whose loop was on disk moved its words table into the output directory and
    reads it from there when asked; without an output directory, before its work directory
    goes."""
    out = tmp_path / "out"
    options = {"preset": "gpt2", "vocab_size": 3000, "memory_limit": limit_between(reference),
               "show_progress": False}
    r = tc.train(str(text), out_dir=out, **options)
    assert r.loop_on_disk and isinstance(r.words_table, tables.WordsFile)
    assert r.n_words == reference[0]["run.json"]["stats"]["words"]
    assert r.words.equals(pl.read_parquet(out / "words.parquet"))
    assert r.words.rows() == reference[0]["words.parquet"][0]
    bare = tc.train(str(text), work_dir=tmp_path / "work", **options)
    assert bare.loop_on_disk and bare.words.equals(r.words)
    assert not (tmp_path / "work").exists()


@pytest.mark.corpus
@pytest.mark.parametrize("point", ["merge:1", "merge:25", "merge:100"])
def test_killed_on_disk_then_resumed_gives_identical_outputs(text, reference, tmp_path, point):
    out = tmp_path / "out"
    args = ["train", str(text), "--out", str(out), *ARGS, "--memory-limit",
            limit_between(reference)]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # the loop's files were unlinked when made: only the saved state is left
    assert not list((tmp_path / "out.work" / "loop").iterdir())
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(out) == {**reference[0], "on disk": True}


@pytest.mark.corpus
def test_limit_below_the_on_disk_estimate_is_refused_in_one_line(text, reference, tmp_path):
    _, _, on_disk = reference
    proc = run_cli("train", str(text), "--out", str(tmp_path / "out"), *ARGS,
                   "--memory-limit", str(on_disk * 2 // 3))
    line = assert_clean_error(proc, "even with its state on disk")
    assert f"at least {memory.format_size(on_disk, up=True)}" in line


@pytest.mark.corpus
@pytest.mark.parametrize("small_disk", ["2m"], indirect=True)
def test_full_disk_for_the_loop_files_is_one_line_and_resumes(text, reference, tmp_path,
                                                                small_disk):
    """The work directory on a 2 MB file system: the counted words fit, the loop's files do
    not — one error line (the files' blocks are reserved when made: no SIGBUS), the work
    directory kept; with more room `--resume` ends with the in-memory run's outputs."""
    work = small_disk / "work"
    args = ["train", str(text), "--out", str(tmp_path / "out"), *ARGS, "--memory-limit",
            limit_between(reference), "--work-dir", str(work)]
    line = assert_clean_error(run_cli(*args), "No space left on device")
    assert "--resume" in line and (work / "words.parquet").is_file()
    assert not list((work / "loop").iterdir())  # unlinked: nothing of the loop is left
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(tmp_path / "out") == {**reference[0], "on disk": True}
