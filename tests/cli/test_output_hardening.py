"""Outputs that must not lose data (issue #27, items 1-3): `--force` writes our files into a
directory and leaves everything else alone; a run that fails on a full disk leaves no
temporary file, and a work directory only when `--resume` can use it, saying so; one output
is written by one run at a time."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import (
    assert_clean_error,
    cli_env,
    command,
    no_temporaries,
    run_cli,
    tree,
)
from tokcolumnar import Tokenizer

CORPUS = "low lower newest widest\nthe cat sat on the mat\n" * 20


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "c.txt").write_text(CORPUS, encoding="utf-8")
    return tmp_path


def _model_folder(d: Path) -> dict[str, bytes | None]:
    """A folder like a downloaded model: weights, config, a dotfile, a sub-folder with a
    dot-folder (a `$HOME` stand-in's `.ssh/`), and an HF tokenizer.json of its own."""
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    (d / "model.safetensors").write_bytes(os.urandom(4096))
    (d / ".gitattributes").write_text("*.safetensors filter=lfs\n", encoding="utf-8")
    (d / "notes").mkdir()
    (d / "notes" / ".ssh").mkdir()
    (d / "notes" / ".ssh" / "id_ed25519").write_text("secret\n", encoding="utf-8")
    (d / "tokenizer.json").write_text('{"version": "1.0", "theirs": true}', encoding="utf-8")
    return tree(d)


# -- 1. --force writes ours beside the user's files --------------------------------------------
def test_force_into_a_model_folder_keeps_every_other_file(workdir):
    model = workdir / "my-model"
    before = _model_folder(model)
    refused = run_cli("train", "c.txt", "--out", "my-model", cwd=workdir)
    line = assert_clean_error(refused, "is not empty and not a tokcolumnar output")
    assert "other files are left alone" in line and "replace it" not in line
    assert tree(model) == before
    proc = run_cli("train", "c.txt", "--out", "my-model", "--vocab-size", "60", "--force",
                   cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    after = tree(model)
    # the weights, config, dotfile and sub-folder are untouched
    kept = {k: v for k, v in before.items() if k != "tokenizer.json"}
    assert {k: after[k] for k in kept} == kept
    # ours are there, the tokenizer.json replaced by ours (and loadable)
    written = {"tokenizer.json", "vocab.json", "merges.txt", "merges.parquet", "vocab.parquet",
               "words.parquet", "run.json", "tokenizer_config.json", "special_tokens_map.json"}
    assert written <= set(after)
    assert set(after) - set(before) == written - {"tokenizer.json"}
    assert b"theirs" not in after["tokenizer.json"]
    assert Tokenizer.from_file(str(model / "tokenizer.json")).encode("lower").ids
    notes = [x for x in proc.stderr.splitlines() if x.startswith("tokcolumnar: note:")]
    assert len(notes) == 1 and "replaced tokenizer.json" in notes[0], proc.stderr
    assert no_temporaries(workdir) and not list(workdir.rglob("*.tc-lock"))


def test_force_again_removes_only_files_an_earlier_run_of_ours_wrote(workdir):
    model = workdir / "my-model"
    before = _model_folder(model)
    (model / "vocab.txt").write_text("theirs\n", encoding="utf-8")  # not written by us
    assert run_cli("train", "c.txt", "--out", "my-model", "--vocab-size", "60", "--force",
                   cwd=workdir).returncode == 0
    assert (model / "merges.txt").exists()
    # a WordPiece run: no vocab.json / merges.txt any more, vocab.txt instead
    proc = run_cli("train", "c.txt", "--out", "my-model", "--model", "wordpiece",
                   "--vocab-size", "60", "--force", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert not (model / "merges.txt").exists() and not (model / "vocab.json").exists()
    assert "removed merges.txt, vocab.json" in proc.stderr, proc.stderr
    assert "replaced" in proc.stderr and "vocab.txt" in proc.stderr
    after = tree(model)
    kept = {k: v for k, v in before.items() if k != "tokenizer.json"}
    assert {k: after[k] for k in kept} == kept
    assert json.loads(after["run.json"])["files"] == sorted(
        ["tokenizer.json", "vocab.txt", "merges.parquet", "vocab.parquet", "words.parquet",
         "run.json", "tokenizer_config.json", "special_tokens_map.json"])


def test_force_never_deletes_a_directory_given_for_a_file(workdir):
    assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                   cwd=workdir).returncode == 0
    folder = workdir / "folder"
    _model_folder(folder)
    before = tree(workdir)
    for args, what in (
            (["encode", "--tokenizer", "tok", "c.txt", "--out", "folder", "--force"], "--out"),
            (["count", "c.txt", "--out", "folder", "--force"], "--out")):
        assert_clean_error(run_cli(*args, cwd=workdir), f"{what} folder is a directory")
    assert tree(workdir) == before


@pytest.mark.duckdb
def test_sql_force_never_deletes_a_directory(workdir):
    assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                   cwd=workdir).returncode == 0
    _model_folder(workdir / "folder")
    before = tree(workdir)
    proc = run_cli("sql", "tok", "SELECT * FROM merges", "--format", "csv", "--output",
                   "folder", "--force", cwd=workdir)
    assert_clean_error(proc, "--output folder is a directory")
    assert tree(workdir) == before


def test_force_encode_parts_into_a_shared_directory(workdir):
    assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                   cwd=workdir).returncode == 0
    data = workdir / "data"
    data.mkdir()
    (data / "README.md").write_text("my dataset\n", encoding="utf-8")
    (data / "part-00009.parquet").write_bytes(b"not ours, not parquet")
    before = tree(data)
    assert_clean_error(run_cli("encode", "--tokenizer", "tok", "c.txt", "--out", "data",
                               "--rows-per-file", "10", cwd=workdir), "not a tokcolumnar output")
    assert tree(data) == before
    proc = run_cli("encode", "--tokenizer", "tok", "c.txt", "--out", "data", "--rows-per-file",
                   "10", "--force", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    parts = sorted(p.name for p in data.glob("part-*.parquet"))
    assert parts == [f"part-{i:05d}.parquet" for i in range(4)] + ["part-00009.parquet"]
    assert (data / "README.md").read_text(encoding="utf-8") == "my dataset\n"
    assert (data / "part-00009.parquet").read_bytes() == b"not ours, not parquet"
    # fewer, larger parts: the earlier run's extra parts go, the foreign one stays
    proc = run_cli("encode", "--tokenizer", "tok", "c.txt", "--out", "data", "--rows-per-file",
                   "25", "--force", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    parts = sorted(p.name for p in data.glob("part-*.parquet"))
    assert parts == ["part-00000.parquet", "part-00001.parquet", "part-00009.parquet"]
    assert "removed part-00002.parquet, part-00003.parquet" in proc.stderr, proc.stderr
    assert pl.read_parquet(data / "part-0000[01].parquet").height == 40
    assert no_temporaries(workdir)


# -- 2. a full disk leaves no temporary file ---------------------------------------------------
# (the fixture `small_disk`, a tmpfs of 512 KiB or its parameter's size: tests/conftest.py)


def _many_words(path: Path, n: int = 100_000) -> Path:
    """`n` random distinct-ish words: a words table of several MB."""
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(
        6, 14))) for _ in range(n)]
    path.write_text("\n".join(" ".join(words[i:i + 20]) for i in range(0, n, 20)) + "\n",
                    encoding="utf-8")
    return path


def _temporaries(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.name.endswith((".tmp", ".old", ".tc-lock"))]


def test_full_disk_in_the_work_directory_leaves_nothing(tmp_path, small_disk):
    big = _many_words(tmp_path / "big.txt")
    proc = run_cli("train", str(big), "--out", str(small_disk / "out"), "--vocab-size", "40",
                   cwd=tmp_path)
    line = assert_clean_error(proc, "No space left on device")
    assert f"cannot write {small_disk}/" in line, line  # the path being written
    assert _temporaries(small_disk) == [], _temporaries(small_disk)
    # nothing --resume could use was saved: no work directory is left behind
    assert list(small_disk.iterdir()) == [], list(small_disk.iterdir())
    assert "--resume" not in line


def test_full_disk_for_the_output_keeps_a_resumable_work_directory(tmp_path, small_disk):
    big = _many_words(tmp_path / "big.txt")
    work = tmp_path / "work"
    args = ["train", str(big), "--out", str(small_disk / "out"), "--vocab-size", "40",
            "--work-dir", str(work)]
    line = assert_clean_error(run_cli(*args, cwd=tmp_path), "No space left on device")
    assert f"cannot write {small_disk / 'out'}: No space left on device" in line, line
    assert f"the work directory {work}" in line and "--resume" in line and "remove it" in line
    assert (work / "words.parquet").is_file()
    assert _temporaries(small_disk) == [] and _temporaries(work) == []
    assert list(small_disk.iterdir()) == []
    # more room: --resume finishes from the saved words
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    proc = run_cli(*args, "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (small_disk / "out" / "tokenizer.json").is_file() and not work.exists()


@pytest.mark.parametrize("small_disk", ["1m"], indirect=True)
def test_full_disk_while_spilling_keeps_only_whole_runs(tmp_path, small_disk):
    """A bounded count whose third spilled run does not fit: the two runs in the manifest are
    kept for --resume (and the error says so), the partial third one is removed."""
    big = _many_words(tmp_path / "big.txt")
    work = small_disk / "w"
    proc = run_cli("count", str(big), "--out", "w.parquet", "--work-dir", str(work),
                   "--memory-limit", "2MB", "--checkpoint-every", "0", cwd=tmp_path)
    line = assert_clean_error(proc, "No space left on device")
    assert f"cannot write {work}/runs/" in line, line
    assert f"the work directory {work}" in line and "--resume" in line, line
    listed = json.loads((work / "count.json").read_text(encoding="utf-8"))["runs"]
    assert listed and sorted(f"runs/{p.name}" for p in (work / "runs").iterdir()) == listed
    assert _temporaries(small_disk) == [] and not (tmp_path / "w.parquet").exists()


@pytest.mark.parametrize("small_disk", ["128k"], indirect=True)
def test_full_disk_for_encode_names_the_output(tmp_path, small_disk):
    (tmp_path / "c.txt").write_text(CORPUS, encoding="utf-8")
    assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                   cwd=tmp_path).returncode == 0
    big = _many_words(tmp_path / "big.txt", 60_000)
    out = small_disk / "enc.parquet"
    line = assert_clean_error(run_cli("encode", "--tokenizer", "tok", str(big), "--out",
                                      str(out), cwd=tmp_path), "No space left on device")
    assert f"cannot write {out}: No space left on device" in line, line
    assert list(small_disk.iterdir()) == []


# -- 3. one run per output ---------------------------------------------------------------------
def _blocked_run(args: list[str], cwd: Path) -> subprocess.Popen:
    """Start a run reading standard input (held open by the test: the run waits in its
    work) and wait until it has created its temporary output (its output is locked by then)."""
    proc = subprocess.Popen(command(*args), cwd=cwd, stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env())
    out = args[args.index("--out") + 1]
    deadline = time.monotonic() + 120
    while not list(cwd.glob(f".{out}.tc-*.tmp")):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return proc


@pytest.mark.parametrize("kind", ["train", "encode"])
def test_a_second_run_into_the_same_output_is_refused(workdir, kind):
    if kind == "encode":
        assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                       cwd=workdir).returncode == 0
        first = ["encode", "--tokenizer", "tok", "-", "--out", "e.parquet"]
        second = ["encode", "--tokenizer", "tok", "c.txt", "--out", "e.parquet"]
    else:
        first = ["train", "-", "--out", "out", "--work-dir", "w1", "--vocab-size", "60"]
        second = ["train", "c.txt", "--out", "out", "--work-dir", "w2", "--vocab-size", "60"]
    proc = _blocked_run(first, workdir)
    try:
        refused = run_cli(*second, cwd=workdir)
        line = assert_clean_error(refused, "is being written by another tokcolumnar run")
        out = first[first.index("--out") + 1]
        assert f"--out {out} " in line and f"(pid {proc.pid})" in line, line
        _, err = proc.communicate(CORPUS + "lowest newer\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    # the first run's result is what is there, and the lock is gone
    if kind == "encode":
        assert pl.read_parquet(workdir / "e.parquet").height == CORPUS.count("\n") + 1
    else:
        assert "lowest" in pl.read_parquet(workdir / "out" / "words.parquet")["word"].to_list()
    assert not list(workdir.glob(".*.tc-lock")) and no_temporaries(workdir)
    assert run_cli(*second, cwd=workdir).returncode == 0  # free again


_HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()}\\n".encode())
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("kind", ["count", pytest.param("sql", marks=pytest.mark.duckdb)])
def test_count_and_sql_outputs_are_locked(workdir, kind):
    """The lock is the kernel's: a process holding `.NAME.tc-lock` (here a stand-in for a run)
    keeps every other run out; it is released when that process dies (SIGKILL included)."""
    if kind == "sql":
        assert run_cli("train", "c.txt", "--out", "tok", "--vocab-size", "60",
                       cwd=workdir).returncode == 0
        args = ["sql", "tok", "SELECT * FROM merges", "--format", "csv", "--output", "r.csv"]
        name, what = "r.csv", "--output"
    else:
        args, name, what = ["count", "c.txt", "--out", "w.parquet"], "w.parquet", "--out"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(workdir / f".{name}.tc-lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert_clean_error(run_cli(*args, cwd=workdir),
                           f"{what} {name} is being written by another tokcolumnar run "
                           f"(pid {holder.pid})")
        assert not (workdir / name).exists()
    finally:
        holder.kill()
        holder.wait()
    proc = run_cli(*args, cwd=workdir)  # the dead holder's lock is free
    assert proc.returncode == 0, proc.stderr
    assert (workdir / name).exists() and not list(workdir.glob(".*.tc-lock"))
