"""`train --memory-limit / --work-dir / --resume` in a subprocess: a spilled run gives the
outputs of an in-memory one; a run SIGKILLed at chosen points of counting and of the merge loop
(the test-only `TOKCOLUMNAR_TEST_KILL`, see `workdir`) and resumed gives byte-identical outputs
(run.json aside from its creation time and timings); a changed input or option refuses to
resume; the work directory follows the outputs' safety rules."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.cli import run_outputs as outputs
from tests.support.corpora import corpus
from tests.support.markers import heavy
from tokcolumnar.workdir import STATE_FORMAT

pytestmark = pytest.mark.corpus

# a budget that spills (units of ~100 kB, the running table over 200 kB) and a words table the
# merge check accepts under it
LIMITED = ["--vocab-size", "1200", "--max-words", "800", "--memory-limit", "1MB", "--quiet"]


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    """A copy of a real corpus (the tests change it to see resuming refused)."""
    p = tmp_path_factory.mktemp("in") / "corpus.txt"
    shutil.copy(corpus("small/en_shakespeare_500k.txt"), p)
    return p


@pytest.fixture(scope="module")
def reference(text, tmp_path_factory) -> dict[str, object]:
    """The outputs of an uninterrupted run that fits in memory."""
    out = tmp_path_factory.mktemp("ref") / "out"
    proc = run_cli("train", str(text), "--out", str(out), *LIMITED[:4], "--quiet")
    assert proc.returncode == 0, proc.stderr
    return outputs(out)


def test_spilled_run_gives_the_in_memory_outputs(text, reference, tmp_path):
    out = tmp_path / "out"
    proc = run_cli("train", str(text), "--out", str(out), *LIMITED[:-1])
    assert proc.returncode == 0, proc.stderr
    assert "spilled" in proc.stderr
    assert outputs(out) == reference
    assert not (tmp_path / "out.work").exists()  # removed on success


@pytest.mark.parametrize("point", ["count:1", "count:3", "merge:1", "merge:25", "merge:60"])
@pytest.mark.parametrize("every", ["0", "1000"])
def test_kill_then_resume_gives_identical_outputs(text, reference, tmp_path, point, every):
    out = tmp_path / "out"
    args = ["train", str(text), "--out", str(out), *LIMITED, "--checkpoint-every", every]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists() and (tmp_path / "out.work").is_dir()
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(out) == reference
    assert not (tmp_path / "out.work").exists()


def test_resume_does_not_count_again(text, tmp_path):
    """Killed in the merge loop, the work directory holds the counted words and the loop's
    checkpoint; a resumed run loads them and does not count again (the count manifest is
    left as it was)."""
    out = tmp_path / "out"
    args = ["train", str(text), "--out", str(out), *LIMITED, "--checkpoint-every", "0"]
    run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": "merge:50"})
    work = tmp_path / "out.work"
    assert (work / "words.parquet").is_file() and (work / "merge.pkl").is_file()
    # a resumed run killed at its own first pass has not counted: its stderr is empty and the
    # manifest is untouched
    before = (work / "count.json").read_bytes()
    again = run_cli(*args, "--resume", env={"TOKCOLUMNAR_TEST_KILL": "merge:1"})
    assert again.returncode == -signal.SIGKILL
    assert (work / "count.json").read_bytes() == before


@pytest.mark.parametrize("change", ["append", "touch", "option"])
def test_changed_input_or_option_refuses_to_resume(text, tmp_path, change):
    src = tmp_path / "c.txt"
    shutil.copy(text, src)
    out = tmp_path / "out"
    args = ["train", str(src), "--out", str(out), *LIMITED]
    assert run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": "count:2"}).returncode < 0
    if change == "append":
        with open(src, "a") as f:
            f.write("more words\n")
        needle = f"input {src} changed (size)"
    elif change == "touch":
        st = src.stat()
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        needle = f"input {src} changed (modification time)"
    else:
        args[args.index("1200")] = "1300"
        needle = "option --vocab-size changed (1300, was 1200)"
    line = assert_clean_error(run_cli(*args, "--resume"), needle)
    assert "run without --resume" in line
    # without --resume the stale work directory is ours: cleared, and the run succeeds
    assert run_cli(*args).returncode == 0
    assert not (tmp_path / "out.work").exists()


def test_state_saved_by_another_version_refuses_to_resume(text, tmp_path):
    """A work directory whose saved state has another layout (an older tokcolumnar's: no
    `state_format` in its marker) is refused in one line, not unpickled into a traceback."""
    out = tmp_path / "out"
    args = ["train", str(text), "--out", str(out), *LIMITED, "--checkpoint-every", "0"]
    assert run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": "merge:5"}).returncode < 0
    marker_file = next(p for p in (tmp_path / "out.work").iterdir()
                       if "state_format" in p.read_text(errors="replace"))
    marker = json.loads(marker_file.read_text())
    del marker["fingerprint"]["state_format"]
    marker_file.write_text(json.dumps(marker))
    line = assert_clean_error(run_cli(*args, "--resume"),
                              "it was saved by another tokcolumnar (state format 1, this one "
                              f"reads {STATE_FORMAT})")
    assert "run without --resume" in line
    assert run_cli(*args).returncode == 0


def test_work_dir_is_never_a_foreign_directory(text, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    proc = run_cli("train", str(text), "--out", str(tmp_path / "out"), "--work-dir",
                   str(foreign), *LIMITED)
    assert_clean_error(proc, "not a tokcolumnar work directory")
    assert (foreign / "notes.txt").read_text() == "keep me"
    proc = run_cli("train", str(text), "--out", str(tmp_path / "out"), "--work-dir",
                   str(text.parent), *LIMITED)
    assert_clean_error(proc, "--work-dir")  # contains the input


def test_resume_without_a_work_dir_is_a_fresh_run(text, reference, tmp_path):
    out = tmp_path / "out"
    proc = run_cli("train", str(text), "--out", str(out), *LIMITED, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert outputs(out) == reference


@pytest.mark.parametrize("value", ["lots", "0", "-1MB"])
def test_bad_memory_limit_is_one_line(text, tmp_path, value):
    proc = run_cli("train", str(text), "--out", str(tmp_path / "o"), "--memory-limit", value)
    assert_clean_error(proc, "--memory-limit")
    assert not (tmp_path / "o.work").exists()


def test_words_table_over_the_limit_is_refused_before_merging(text, tmp_path):
    proc = run_cli("train", str(text), "--out", str(tmp_path / "o"), "--memory-limit", "1MB")
    line = assert_clean_error(proc, "--max-words")
    assert "raise --memory-limit to at least" in line
    # kept, with the counted words: --resume with a larger limit does not count again
    assert (tmp_path / "o.work" / "words.parquet").is_file()


def test_refused_input_leaves_no_work_dir(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine words\n\xff\xfe broken\n")
    proc = run_cli("train", str(bad), "--out", str(tmp_path / "o"), "--memory-limit", "1GB")
    assert_clean_error(proc, "UTF-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


@pytest.mark.duckdb
def test_duckdb_engine_runs_within_the_limit_with_the_same_outputs(text, tmp_path):
    args = ["train", str(text), "--engine", "duckdb", "--vocab-size", "600", "--quiet"]
    assert run_cli(*args, "--out", str(tmp_path / "a")).returncode == 0
    proc = run_cli(*args, "--out", str(tmp_path / "b"), "--memory-limit", "300MB")
    assert proc.returncode == 0, proc.stderr
    assert outputs(tmp_path / "b") == outputs(tmp_path / "a")
    assert not (tmp_path / "b.work").exists()


@pytest.mark.duckdb
def test_duckdb_connection_takes_memory_limit_and_temp_directory(tmp_path):
    from tokcolumnar.duckdb.runner import connect

    con = connect(300 * 2**20, str(tmp_path / "spill"))
    try:
        limit, temp = con.execute("select current_setting('memory_limit'), "
                                  "current_setting('temp_directory')").fetchall()[0]
    finally:
        con.close()
    assert limit == "300.0 MiB"
    assert temp == str(tmp_path / "spill")


# `count` resumes as train's counting stage does: the same manifest and runs, in OUT.work
COUNT_LIMITED = ["--memory-limit", "1MB", "--quiet"]


@pytest.fixture(scope="module")
def counted(text, tmp_path_factory) -> bytes:
    """words.parquet of an uninterrupted count that fits in memory."""
    out = tmp_path_factory.mktemp("count") / "words.parquet"
    proc = run_cli("count", str(text), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()


@pytest.mark.parametrize("point", ["count:1", "count:3"])
@pytest.mark.parametrize("every", ["0", "1000"])
def test_count_killed_then_resumed_gives_the_same_words(text, counted, tmp_path, point, every):
    out = tmp_path / "words.parquet"
    args = ["count", str(text), "--out", str(out), *COUNT_LIMITED, "--checkpoint-every", every]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists() and (tmp_path / "words.parquet.work").is_dir()
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == counted
    assert not (tmp_path / "words.parquet.work").exists()


@pytest.fixture(scope="module")
def many_files(text, tmp_path_factory) -> Path:
    """The corpus cut at line ends into 400 small files (packed into ~100 kB units under
    COUNT_LIMITED's budget: a handful of units of ~80 files each)."""
    d = tmp_path_factory.mktemp("many")
    lines = text.read_bytes().splitlines(keepends=True)
    step = -(-len(lines) // 400)
    for i in range(0, len(lines), step):
        (d / f"f{i // step:04d}.txt").write_bytes(b"".join(lines[i:i + step]))
    return d


@pytest.mark.parametrize("point, every", [("count:2", "0"), ("count:4", "1000")])
def test_many_small_files_killed_mid_count_resume_to_the_same_words(
        counted, many_files, tmp_path, point, every):
    """A folder of many small files killed between two of its packed units and resumed: the
    words.parquet of an uninterrupted count of the folder, byte for byte, and the words of
    the same text as one file (first_seen included)."""
    whole = tmp_path / "whole.parquet"
    assert run_cli("count", str(many_files), "--out", str(whole), "--quiet").returncode == 0
    out = tmp_path / "words.parquet"
    args = ["count", str(many_files), "--out", str(out), *COUNT_LIMITED,
            "--checkpoint-every", every]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not out.exists() and (tmp_path / "words.parquet.work").is_dir()
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == whole.read_bytes()
    assert pl.read_parquet(out).equals(pl.read_parquet(io.BytesIO(counted)))


def test_count_with_a_changed_input_refuses_to_resume(text, tmp_path):
    src = tmp_path / "c.txt"
    shutil.copy(text, src)
    args = ["count", str(src), "--out", str(tmp_path / "w.parquet"), *COUNT_LIMITED]
    assert run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": "count:2"}).returncode < 0
    with open(src, "a") as f:
        f.write("more words\n")
    line = assert_clean_error(run_cli(*args, "--resume"), f"input {src} changed (size)")
    assert "run without --resume" in line
    assert run_cli(*args).returncode == 0
    assert not (tmp_path / "w.parquet.work").exists()


# the likelihood WordPiece loop checkpoints as the BPE loop does (its trainer pickled between
# two merges); a resumed run continues it, no merge replayed
WORDPIECE = ["--model", "wordpiece", "--vocab-size", "1500", "--memory-limit", "1MB",
             "--max-words", "800", "--quiet"]


@pytest.fixture(scope="module")
def wordpiece_reference(text, tmp_path_factory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("wp") / "out"
    proc = run_cli("train", str(text), "--out", str(out), *WORDPIECE[:4], "--max-words", "800",
                   "--quiet")
    assert proc.returncode == 0, proc.stderr
    return outputs(out)


# ~15-30 s each: the fast tier kills at merge 300 with a checkpoint before every merge, the full
# run also at merge 900 with the default clock; the other four only with TOKCOLUMNAR_SLOW=1
@pytest.mark.parametrize("every, point", heavy(
    [(e, p) for e in ("0", "1000") for p in ("merge:1", "merge:300", "merge:900")],
    full=lambda v: v == ("1000", "merge:900"), fast=lambda v: v == ("0", "merge:300"),
    multi=True))
def test_wordpiece_killed_in_the_loop_then_resumed_gives_identical_outputs(
        text, wordpiece_reference, tmp_path, point, every):
    out = tmp_path / "out"
    args = ["train", str(text), "--out", str(out), *WORDPIECE, "--checkpoint-every", every]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    work = tmp_path / "out.work"
    # with checkpoints before every merge, the loop's state is there to resume from
    assert (work / "merge.pkl").is_file() == (every == "0")
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(out) == wordpiece_reference
    assert not work.exists()


# the DuckDB loops save their tables (duckdb.checkpoint) on the same clock
@pytest.mark.duckdb
@pytest.mark.parametrize("model, vocab", [
    ("bpe", 600),
    # the likelihood chain makes up to 256 merges a pass: 6 passes here
    pytest.param("wordpiece", 1500, marks=pytest.mark.slow)])
def test_duckdb_loop_killed_then_resumed_continues_from_its_checkpoint(text, tmp_path, model,
                                                                       vocab):
    small = tmp_path / "small.txt"
    small.write_bytes(text.read_bytes()[:60_000])
    args = ["train", str(small), "--engine", "duckdb", "--model", model, "--vocab-size",
            str(vocab), "--quiet"]
    assert run_cli(*args, "--out", str(tmp_path / "ref")).returncode == 0
    reference = outputs(tmp_path / "ref")
    passes = int(json.loads((tmp_path / "ref" / "run.json").read_text())["timings_s"]["passes"])
    out = tmp_path / "out"
    args += ["--out", str(out), "--checkpoint-every", "0"]
    half = passes // 2
    assert half >= 2  # a checkpoint after at least one pass
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": f"merge:{half}"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (tmp_path / "out.work" / "merge.duckdb").is_file()
    # the resumed loop makes the passes after the checkpoint only: a loop started afresh
    # would reach this kill point, the resumed one ends before it
    resumed = run_cli(*args, "--resume",
                      env={"TOKCOLUMNAR_TEST_KILL": f"merge:{passes - half + 3}"})
    assert resumed.returncode == 0, resumed.stderr
    assert outputs(out) == reference
    assert not (tmp_path / "out.work").exists()


def test_a_uri_input_resumes_and_refuses_when_changed(text, counted, tmp_path):
    # a file:// URI is fingerprinted through its filesystem as its local file is
    src = tmp_path / "c.txt"
    shutil.copy(text, src)
    out = tmp_path / "words.parquet"
    args = ["count", f"file://{src}", "--out", str(out), *COUNT_LIMITED]
    assert run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": "count:2"}).returncode < 0
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == counted
    assert run_cli(*args, "--force", env={"TOKCOLUMNAR_TEST_KILL": "count:2"}).returncode < 0
    with open(src, "a") as f:
        f.write("more words\n")
    assert_clean_error(run_cli(*args, "--force", "--resume"),
                       f"input file://{src} changed (size)")
