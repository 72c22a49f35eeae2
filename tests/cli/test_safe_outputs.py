"""Safe outputs (README "Safety"): an output replaces only what tokcolumnar wrote there before,
is refused before any work starts otherwise, is written atomically with the umask's
permissions, and survives SIGINT / SIGTERM / SIGKILL with the previous result intact and no
temporary files left behind."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, cli_env, command, no_temporaries, run_cli, tree
from tests.support.corpora import corpus
from tests.support.markers import tiered
from tokcolumnar import outputs, train
from tokcolumnar.errors import TokcolumnarError

SLOW = pytest.mark.slow
CORPUS = "low lower newest widest\nthe cat sat on the mat\n" * 20


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder like a user's: a corpus, an unrelated sub-folder with a file."""
    (tmp_path / "c.txt").write_text(CORPUS, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("keep me\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def previous(workdir: Path) -> Path:
    out = workdir / "out"
    proc = run_cli("train", "c.txt", "--out", "out", "--vocab-size", "60", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    return out


# -- 1. what an output may replace -------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["train", "c.txt", "--out", "."], "is the current directory"),
    pytest.param(["train", "c.txt", "--out", "./"], "is the current directory", marks=SLOW),
    pytest.param(["train", "c.txt", "--out", ".."], "is the current directory or contains it",
                 marks=SLOW),
    (["train", "c.txt", "--out", "/"], "is the root directory"),
    (["train", "c.txt", "--out", "sub"], "is not empty and not a tokcolumnar output"),
    (["train", "c.txt", "--out", "c.txt"], "is an input"),
    pytest.param(["train", "sub", "--out", "sub"], "is an input", marks=SLOW),
    pytest.param(["train", "sub/notes.txt", "--out", "sub"], "contains the input", marks=SLOW),
    pytest.param(["train", "sub", "--out", "sub/out"], "is inside the input directory", marks=SLOW),
    pytest.param(["train", "c.txt", "--out", "sub/notes.txt"], "exists and is not a directory",
                 marks=SLOW),
    pytest.param(["count", "c.txt", "--out", "."], "is the current directory", marks=SLOW),
    pytest.param(["count", "c.txt", "--out", "c.txt"], "is an input", marks=SLOW),
    (["count", "c.txt", "--out", "sub/notes.txt"], "was not written by tokcolumnar"),
    pytest.param(["count", "c.txt", "--out", "sub"], "is a directory", marks=SLOW),
    pytest.param(["count", "sub", "--out", "sub/w.parquet"], "is inside the input directory",
                 marks=SLOW),
])
def test_refused_before_any_work(workdir, args, needle):
    before = tree(workdir)
    proc = run_cli(*args, cwd=workdir)
    assert_clean_error(proc, needle)
    assert tree(workdir) == before


def test_force_never_overrides_an_input(workdir):
    before = tree(workdir)
    for args in (["train", "sub", "--out", "sub"], ["train", "sub/notes.txt", "--out", "sub"],
                 ["train", "c.txt", "--out", "."], ["count", "c.txt", "--out", "c.txt"]):
        assert run_cli(*args, "--force", cwd=workdir).returncode == 2
    assert tree(workdir) == before


def test_force_writes_into_a_foreign_directory_and_replaces_a_foreign_file(workdir):
    other = workdir / "other"
    other.mkdir()
    (other / "x.txt").write_text("x", encoding="utf-8")
    assert run_cli("train", "c.txt", "--out", "other", "--force", cwd=workdir).returncode == 0
    assert (other / "run.json").exists()
    assert (other / "x.txt").read_text(encoding="utf-8") == "x"  # never deleted
    assert run_cli("count", "c.txt", "--out", "sub/notes.txt", "--force",
                   cwd=workdir).returncode == 0
    assert pl.read_parquet(workdir / "sub" / "notes.txt").height > 0


def test_previous_output_and_empty_directory_are_replaced(previous, workdir):
    (workdir / "empty").mkdir()
    assert run_cli("train", "c.txt", "--out", "empty", cwd=workdir).returncode == 0
    assert (workdir / "empty" / "tokenizer.json").exists()
    first = (previous / "merges.txt").read_text(encoding="utf-8")
    proc = run_cli("train", "c.txt", "--out", "out", "--vocab-size", "25", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert (previous / "merges.txt").read_text(encoding="utf-8") != first
    assert no_temporaries(workdir)


def test_previous_output_with_a_foreign_file_is_refused(previous, workdir):
    (previous / "my-notes.md").write_text("mine", encoding="utf-8")
    before = tree(workdir)
    proc = run_cli("train", "c.txt", "--out", "out", cwd=workdir)
    assert_clean_error(proc, "also holds other files (my-notes.md)")
    assert tree(workdir) == before


def test_a_foreign_run_json_is_not_a_marker(workdir):
    d = workdir / "model"
    d.mkdir()
    (d / "run.json").write_text('{"tool": "something-else"}', encoding="utf-8")
    assert_clean_error(run_cli("train", "c.txt", "--out", "model", cwd=workdir),
                       "not a tokcolumnar output")


def test_symlink_output_is_refused(previous, workdir):
    (workdir / "link").symlink_to(previous)
    before = tree(previous)
    assert_clean_error(run_cli("train", "c.txt", "--out", "link", cwd=workdir), "symbolic link")
    assert tree(previous) == before


def test_file_outputs_replace_only_their_own(workdir, previous):
    assert run_cli("count", "c.txt", "--out", "w.parquet", cwd=workdir).returncode == 0
    assert run_cli("count", "c.txt", "--out", "w.parquet", cwd=workdir).returncode == 0
    (workdir / "e.txt").write_text("low lower\n", encoding="utf-8")
    for _ in range(2):
        proc = run_cli("encode", "--tokenizer", "out", "e.txt", "--out", "e.parquet", cwd=workdir)
        assert proc.returncode == 0, proc.stderr
    assert_clean_error(run_cli("encode", "--tokenizer", "out", "e.txt", "--out", "out",
                               cwd=workdir), "is an input")
    assert_clean_error(run_cli("encode", "--tokenizer", "out", "e.txt", "--out", "c.txt",
                               cwd=workdir), "was not written by tokcolumnar")
    pl.DataFrame({"a": [1]}).write_parquet(workdir / "theirs.parquet")
    assert_clean_error(run_cli("count", "c.txt", "--out", "theirs.parquet", cwd=workdir),
                       "was not written by tokcolumnar")
    assert no_temporaries(workdir)


@pytest.mark.duckdb
def test_sql_output_rules(previous, workdir):
    q = "SELECT rank, \"left\", \"right\" FROM merges ORDER BY rank LIMIT 3"
    for fmt, name in (("csv", "m.csv"), ("json", "m.json"), ("parquet", "m.parquet")):
        for _ in range(2):  # the second run replaces its own earlier output
            proc = run_cli("sql", "out", q, "--format", fmt, "--output", name, cwd=workdir)
            assert proc.returncode == 0, proc.stderr
    assert (workdir / "m.csv").read_text(encoding="utf-8").startswith("rank,left,right\n")
    assert_clean_error(run_cli("sql", "out", q, "--format", "csv", "--output", "c.txt",
                               cwd=workdir), "was not written by tokcolumnar")
    assert_clean_error(run_cli("sql", "out", q, "--format", "csv", "--output",
                               "out/merges.parquet", cwd=workdir), "is inside the input directory")
    assert (workdir / "c.txt").read_text(encoding="utf-8") == CORPUS


# -- 2. writes are checked early and fail clearly ----------------------------------------------
def _consumed_iterator(flag: list[bool]):
    flag.append(True)
    yield from CORPUS.splitlines()


def test_unwritable_parent_fails_before_reading(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a read-only file system here")
    else:
        ro.chmod(0o555)
    try:
        started: list[bool] = []
        with pytest.raises(TokcolumnarError, match="cannot write"):
            train(_consumed_iterator(started), out_dir=ro / "out", vocab_size=60)
        assert started == []  # refused before the corpus was read
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(ro)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_denied_is_one_line(workdir):
    locked = workdir / "locked"
    locked.mkdir(mode=0o755)
    workdir.chmod(0o755)
    (workdir / "c.txt").chmod(0o644)
    proc = run_cli("train", str(workdir / "c.txt"), "--out", str(locked / "out"),
                   cwd=Path("/"), user="65534")
    assert_clean_error(proc, "Permission denied")
    assert not any(locked.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small file system")
def test_no_space_left_keeps_the_previous_result(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (tmp_path / "c.txt").write_text(CORPUS, encoding="utf-8")
        assert run_cli("train", "c.txt", "--out", str(disk / "out"), "--vocab-size", "60",
                       cwd=tmp_path).returncode == 0
        before = tree(disk / "out")
        rng = random.Random(1)
        words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(
            3, 12))) for _ in range(40_000)]
        (tmp_path / "big.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
        proc = run_cli("train", "big.txt", "--out", str(disk / "out"), "--vocab-size", "2000",
                       cwd=tmp_path)
        assert_clean_error(proc, "No space left on device")
        assert tree(disk / "out") == before
        assert no_temporaries(disk)
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# -- 3. permissions follow the umask -----------------------------------------------------------
@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755),
                                                        (0o077, 0o600, 0o700)])
def test_permissions_follow_the_umask(workdir, umask, file_mode, dir_mode):
    for _ in range(2):  # a new output, then one replacing it
        assert run_cli("train", "c.txt", "--out", "out", cwd=workdir, umask=umask).returncode == 0
        assert stat.S_IMODE((workdir / "out").stat().st_mode) == dir_mode
        modes = {stat.S_IMODE(p.stat().st_mode) for p in (workdir / "out").iterdir()}
        assert modes == {file_mode}
        assert run_cli("count", "c.txt", "--out", "w.parquet", cwd=workdir,
                       umask=umask).returncode == 0
        assert stat.S_IMODE((workdir / "w.parquet").stat().st_mode) == file_mode


# -- 4. interruption leaves nothing behind -----------------------------------------------------
def _big_corpus(path: Path) -> Path:
    """About 12 MB of text with a large vocabulary: several seconds of training."""
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyzéö"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 14)))
             for _ in range(60_000)]
    lines = [" ".join(rng.choices(vocab, k=12)) for _ in range(150_000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start_and_signal(args: list[str], cwd: Path, sig: int, out_name: str) -> tuple[int, str]:
    """Start the CLI, wait until it has created its temporary output, then send `sig`."""
    proc = subprocess.Popen(command(*args), cwd=cwd, stderr=subprocess.PIPE, text=True,
                            env=cli_env())
    deadline = time.monotonic() + 120
    while not list(cwd.glob(f".{out_name}.tc-*.tmp")):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)  # well inside the work
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("command", ["train", "encode"])
def test_signals_leave_the_previous_result(previous, workdir, sig, code, command):
    big = _big_corpus(workdir / "big.txt")
    if command == "train":
        args, out = ["train", big.name, "--out", "out", "--vocab-size", "20000"], previous
    else:
        assert run_cli("encode", "--tokenizer", "out", "c.txt", "--out", "enc.parquet",
                       cwd=workdir).returncode == 0
        args, out = ["encode", "--tokenizer", "out", big.name, "--out", "enc.parquet"], (
            workdir / "enc.parquet")
    before = out.read_bytes() if out.is_file() else tree(out)
    rc, err = _start_and_signal(args, workdir, sig, out.name)
    assert rc == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert (out.read_bytes() if out.is_file() else tree(out)) == before
    assert no_temporaries(workdir)


@pytest.mark.slow
def test_sigkill_leftovers_are_removed_by_the_next_run(previous, workdir):
    big = _big_corpus(workdir / "big.txt")
    before = tree(previous)
    rc, _ = _start_and_signal(["train", big.name, "--out", "out", "--vocab-size", "20000"],
                              workdir, signal.SIGKILL, "out")
    assert rc == -signal.SIGKILL
    assert tree(previous) == before
    assert not no_temporaries(workdir)  # a SIGKILL cannot clean up...
    assert run_cli("train", "c.txt", "--out", "out", cwd=workdir).returncode == 0
    assert no_temporaries(workdir)  # ...the next run writing there does


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has installed a SIGTERM handler (Python has none of its own, so
    this is the moment `main` starts: before it, no program can handle a signal)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_interrupt_during_startup_is_clean(workdir, delay):
    """Ctrl-C while the heavy libraries load (`main` installs its handlers before importing
    them): counted from the moment the interpreter has reached our code, so that a loaded
    machine cannot make the signal land in Python's own start-up."""
    proc = subprocess.Popen(command("train", "c.txt", "--out", "out"), cwd=workdir,
                            stderr=subprocess.PIPE, text=True, env=cli_env())
    deadline = time.monotonic() + 60
    while proc.poll() is None and not _catches_sigterm(proc.pid):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    # 130 when interrupted (or death by SIGINT, which a shell also shows as 130); 0 when the
    # run had already finished
    assert proc.returncode in (0, 130, -signal.SIGINT), err
    assert no_temporaries(workdir)


_SIGNAL_WHILE_CLI_LOADS = """
import os, signal, sys, time, types
stub = types.ModuleType("tokcolumnar.cli")
def run():  # stands for cli.run while it is still importing: the signal lands before main
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(5)
    print("not stopped")
stub.run = run
sys.modules["tokcolumnar.cli"] = stub
from tokcolumnar import _start
_start.run()
"""


@pytest.mark.parametrize("name, code, line", [
    ("SIGINT", 130, "tokcolumnar: interrupted (outputs left as they were)"),
    ("SIGTERM", 143, "tokcolumnar: terminated (outputs left as they were)")])
def test_a_signal_before_main_is_one_line(name, code, line):
    """A signal while `cli` and its libraries load (before `main` installs its handlers) ends
    the run with its line and exit code, not Python's KeyboardInterrupt traceback (the hostile
    pass found it: a Ctrl-C 0.1 s into `count` ended in a traceback and death by SIGINT)."""
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_CLI_LOADS, name],
                          capture_output=True, text=True, timeout=60, env=cli_env())
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip().splitlines() == [line]
    assert "not stopped" not in proc.stdout


_POLARS_QUERIES_AT_A_CTRL_C = """
import os, signal, sys, threading, time
from tokcolumnar import cli
signal.signal(signal.SIGINT, cli._on_signal)  # as `main` does, before the libraries load
import polars as pl
if sys.argv[1] == "taken-back":
    cli._take_back_sigint()  # as `main` does once they are loaded
# queries long beside the Python between them: the "polars" case failed twice in full runs
# (the worker completed), presumably a Ctrl-C that landed between two queries and reached
# none; the signal now goes 50 ms into a query (each takes ~0.3-1 s)
frame = pl.DataFrame({"a": pl.int_range(0, 10_000_000, eager=True) % 1_000_003})
outcome, started, stop = [], threading.Event(), threading.Event()
def queries():
    # queries until the main thread has had its Ctrl-C and a second more (however slow a
    # query is on a loaded machine, some start after the signal: Polars' flag, when its
    # handler is in place, aborts them)
    end = time.monotonic() + 60
    try:
        while not stop.is_set() and time.monotonic() < end:
            started.set()  # a query starts
            frame.lazy().group_by("a").agg(pl.len()).sort("a").collect()
        outcome.append("completed")
    except BaseException as e:
        outcome.append(type(e).__name__)
worker = threading.Thread(target=queries)
worker.start()
started.wait()
time.sleep(0.05)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("main: not interrupted")
except KeyboardInterrupt:
    print("main: KeyboardInterrupt")
time.sleep(1.0)
stop.set()
worker.join()
print("worker:", outcome[0])
"""


@pytest.mark.parametrize("handler", ["polars", "taken-back"])
def test_a_ctrl_c_stops_the_main_thread_not_polars_queries(handler):
    """`main` takes SIGINT back from Polars once it is loaded (`cli._take_back_sigint`): a
    Ctrl-C raises KeyboardInterrupt in the main thread only, and a query running in a worker
    thread completes instead of unwinding a panic through Polars' engine. With Polars' handler
    left in place ("polars"), the same query is aborted: this Polars has the handler the
    command must take back."""
    proc = subprocess.run([sys.executable, "-c", _POLARS_QUERIES_AT_A_CTRL_C, handler],
                          capture_output=True, text=True, timeout=120, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    worker = "completed" if handler == "taken-back" else "KeyboardInterrupt"
    assert proc.stdout.splitlines() == ["main: KeyboardInterrupt", f"worker: {worker}"]


#: Runs that wait for input nobody writes: (command, input kind, format). A text pipe is read
#: in a reader thread (`corpus.counting.prefetched`), or in the main thread with one Polars
#: thread; a JSONL or CSV pipe by Arrow's own threads, the main thread waiting in Arrow
#: (`encode`) or on the reader thread (`train`, `count`). The last: Polars' threads ("all", or
#: one: then `train` reads in its main thread).
IDLE_INPUTS = [
    ("train", "fifo", "text", "all"),
    ("train", "stdin", "text", "all"),
    ("encode", "stdin", "jsonl", "all"),
    ("train", "fifo", "jsonl", "all"),
    ("count", "stdin", "csv", "all"),
    ("train", "fifo", "text", "1"),
    ("encode", "fifo", "text", "all"),
]


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("cmd, kind, fmt, threads", tiered(
    IDLE_INPUTS, lambda case: case[:2] in (("train", "fifo"), ("encode", "stdin"))
    and case[3] == "all", multi=True))
def test_a_signal_ends_a_run_waiting_for_input(previous, workdir, sig, code, cmd, kind, fmt,
                                               threads):
    """A run reading a named pipe nobody writes to, or a standard input kept open and idle,
    ends within a moment of SIGINT / SIGTERM (every read waiting for data gives up within
    `sources.PIPE_WAIT_SECONDS` once the run stops), with the previous output intact and no
    temporary files: a reader blocked in the read once left the main thread waiting for it
    forever."""
    source = "-"
    if kind == "fifo":
        source = f"in.{'txt' if fmt == 'text' else fmt}"
        os.mkfifo(workdir / source)
    out_name = {"train": "out", "encode": "enc.parquet", "count": "words.parquet"}[cmd]
    if cmd == "encode":
        assert run_cli("encode", "--tokenizer", "out", "c.txt", "--out", out_name,
                       cwd=workdir).returncode == 0
    if cmd == "count":
        assert run_cli("count", "c.txt", "--out", out_name, cwd=workdir).returncode == 0
    out = workdir / out_name
    before = out.read_bytes() if out.is_file() else tree(out)
    args = {"train": ["train", source, "--out", out_name, "--vocab-size", "100"],
            "encode": ["encode", "--tokenizer", "out", source, "--out", out_name],
            "count": ["count", source, "--out", out_name]}[cmd]
    env = cli_env({} if threads == "all" else {"POLARS_MAX_THREADS": threads})
    proc = subprocess.Popen(command(*args, "--format", fmt), cwd=workdir, stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(workdir.glob(f".{out_name}.tc-*.tmp")):  # its output started
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(1.0)  # waiting for input by now
        proc.send_signal(sig)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 3 s after {sig.name}")
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdin:
            proc.stdin.close()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert (out.read_bytes() if out.is_file() else tree(out)) == before
    assert no_temporaries(workdir)


def _signal_in_the_duckdb_loop(args: list[str], cwd: Path, sig: int, env: dict[str, str]
                               ) -> tuple[int, str, str]:
    """Run the CLI with progress lines every 0.2 s, and send `sig` once DuckDB's merge loop has
    drawn one (its passes are SQL queries: the signal lands in one): (exit code, stdout,
    stderr)."""
    proc = subprocess.Popen(command(*args), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=cli_env({"TOKCOLUMNAR_PROGRESS_EVERY": "0.2", **env}))
    lines: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("merging (duckdb)"):
            break
    else:
        proc.wait()
        pytest.fail(f"no merge loop seen: {''.join(lines)}")
    time.sleep(0.5)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, "".join(lines) + err


@pytest.mark.duckdb
@pytest.mark.corpus
@pytest.mark.parametrize("sig, code, said", [(signal.SIGTERM, 143, "terminated"),
                                             (signal.SIGINT, 130, "interrupted")])
@pytest.mark.parametrize("cmd", ["train", pytest.param("crosscheck", marks=SLOW)])
def test_a_signal_in_the_duckdb_merge_loop_is_an_interrupt(previous, workdir, tmp_path, sig,
                                                          code, said, cmd):
    """DuckDB's Python client looks for signals while a query runs, and ends the query with
    `RuntimeError: Query interrupted` in place of the interrupt our handler raised: the run
    must still end as interrupted (130 / 143), the previous output intact, no temporary file
    left, and for `train` its work directory kept for --resume."""
    text = corpus("small/en_shakespeare_500k.txt")
    scratch = tmp_path / "tmp"  # the temporary directories of crosscheck's runs
    scratch.mkdir()
    before = tree(previous)
    args = ([cmd, str(text), "--engine", "duckdb", "--out", "out"] if cmd == "train"
            else [cmd, str(text)])
    rc, out, err = _signal_in_the_duckdb_loop([*args, "--vocab-size", "3000"], workdir, sig,
                                              {"TMPDIR": str(scratch)})
    assert rc == code, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.strip().splitlines()[-1] == f"tokcolumnar: {said} (outputs left as they were)"
    assert out == ""  # crosscheck said nothing about a comparison it did not finish
    assert tree(previous) == before
    assert no_temporaries(workdir)
    assert not list(scratch.iterdir())
    if cmd == "train":  # what the count saved, for --resume
        assert (workdir / "out.work" / "tokcolumnar-work.json").is_file()


def test_recovery_when_killed_between_the_two_renames(previous, workdir, monkeypatch):
    """Where the OS cannot exchange two directories, the old result is moved aside first; a
    run killed then leaves it under a temporary name, and the next run puts it back."""
    before = tree(previous)
    dead = _dead_pid()
    aside = workdir / f".out.tc-{dead}-0123abcd.old"
    os.rename(previous, aside)
    (workdir / f".out.tc-{dead}-89abcdef.tmp").mkdir()  # the new result, half moved
    outputs.recover(previous)
    assert tree(previous) == before
    assert no_temporaries(workdir)
    monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)
    train([str(workdir / "c.txt")], out_dir=previous, vocab_size=70)
    assert tree(previous) != before and no_temporaries(workdir)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- 9. `tokcolumnar sql` is read-only by default ----------------------------------------------
SANDBOX_ESCAPES = [
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "COPY (SELECT 1) TO '{dir}/leak.csv'",
    "ATTACH '{dir}/x.duckdb'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SELECT * FROM glob('{dir}/*')",
]


# the fast tier tries a read, a write and an extension; the full run every escape
@pytest.mark.parametrize("query", tiered(SANDBOX_ESCAPES, lambda q: q.startswith(
    ("SELECT * FROM read_text", "COPY", "INSTALL"))))
@pytest.mark.duckdb
def test_sql_is_sandboxed(previous, workdir, query):
    secret = workdir / "sub" / "notes.txt"
    before = tree(workdir)
    proc = run_cli("sql", "out", query.format(secret=secret, dir=workdir), cwd=workdir)
    assert_clean_error(proc, "SQL error")
    assert tree(workdir) == before


@pytest.mark.duckdb
def test_sql_allow_external(previous, workdir):
    secret = workdir / "sub" / "notes.txt"
    proc = run_cli("sql", "out", f"SELECT * FROM read_text('{secret}')", "--format", "csv",
                   "--allow-external", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "keep me" in proc.stdout


#: Escapes by paths relative to the user's current directory (`sub`, beside the model `out`),
#: which holds a `.tmp/mine.csv` of the user's: `.tmp` is DuckDB's default temporary
#: directory, which DuckDB lets any query read and write whatever the sandbox says.
RELATIVE_ESCAPES = [
    "COPY (SELECT 1 AS x) TO '.tmp/mine.csv'",
    "COPY (SELECT 1 AS x) TO '.tmp/x.csv'",
    "ATTACH '.tmp/db.duckdb'",
    "SELECT * FROM read_text('.tmp/mine.csv')",
    "SELECT * FROM glob('.tmp/*')",
    "ATTACH 'db.duckdb'",
    "COPY (SELECT 1 AS x) TO 'x.csv'",
    "SELECT * FROM read_csv('../c.txt')",
    "COPY (SELECT 1 AS x) TO '../out/x.csv'",
    "SELECT * FROM read_text('../out/run.json')",
]


@pytest.mark.parametrize("query", tiered(RELATIVE_ESCAPES, lambda q: ".tmp" in q))
@pytest.mark.duckdb
def test_sql_reaches_nothing_from_the_current_directory(previous, workdir, query):
    """The sandbox holds for paths relative to where the user runs `sql`: nothing there, above
    it, or in the model directory besides its tables is readable, nothing writable (the query
    once overwrote a user's `.tmp/mine.csv` and created `.tmp/db.duckdb`)."""
    user = workdir / "sub"
    (user / ".tmp").mkdir()
    (user / ".tmp" / "mine.csv").write_text("mine\n", encoding="utf-8")
    scratch = workdir / "scratch"  # the query's own temporary directory, removed at the end
    scratch.mkdir()
    before = tree(workdir)
    proc = run_cli("sql", "../out", query, cwd=user, env={"TMPDIR": str(scratch)})
    assert_clean_error(proc, "SQL error")
    assert tree(workdir) == before
