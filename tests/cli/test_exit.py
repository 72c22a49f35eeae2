"""The command line's process: its end (`cli.exit_quickly`: the exit code, buffered output,
`atexit` handlers and threads that are not daemons are all as after a normal exit; only the
interpreter's teardown is skipped) and its BLAS threads (`cli.BLAS_THREADS`)."""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl

from tests.support.corpora import ROOT

PROGRAM = r"""
import atexit, sys, threading, time
from pathlib import Path
from tokcolumnar.cli import exit_quickly

out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))

def late():
    time.sleep(0.3)
    (out / "thread").write_text("done")

threading.Thread(target=late).start()
sys.stdout.write("buffered, no newline")  # stdout is a pipe: block-buffered
sys.stderr.write("on stderr")
exit_quickly(3)
"""


def test_exit_quickly_keeps_what_a_normal_exit_does(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 3
    assert proc.stdout == "buffered, no newline"
    assert proc.stderr == "on stderr"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "done"  # waited for, as at a normal exit


def test_the_program_ends_with_its_exit_code_and_output(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("low lower lowest\nnew newer newest\n", encoding="utf-8")
    tok = tmp_path / "tok"
    done = subprocess.run([sys.executable, "-m", "tokcolumnar", "train", str(text), "--out",
                           str(tok), "--vocab-size", "40"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0 and f"-> {tok}" in done.stderr
    out = tmp_path / "ids.parquet"
    done = subprocess.run([sys.executable, "-m", "tokcolumnar", "encode", str(text),
                           "--tokenizer", str(tok), "--out", str(out)], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stderr.endswith(f"encoded 2 rows -> {out}\n")
    assert pl.read_parquet(out).height == 2
    refused = subprocess.run([sys.executable, "-m", "tokcolumnar", "encode", str(text),
                              "--tokenizer", str(tmp_path / "none"), "--out", str(out)],
                             capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2
    assert refused.stderr.startswith("tokcolumnar: error: ")


BLAS_PROBE = r"""
import os, sys
from tokcolumnar.cli import main
try:
    main(["count", "--help"])
except SystemExit:
    pass
import numpy  # noqa: F401 - loaded after main, as a command's work loads it
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def test_the_command_line_runs_one_blas_thread_unless_told_otherwise():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for given, expected in ((None, "1"), ("3", "3")):
        run_env = env if given is None else {**env, "OPENBLAS_NUM_THREADS": given}
        proc = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True,
                              text=True, cwd=ROOT, env=run_env, check=True)
        assert proc.stdout.splitlines()[-1] == expected
    # a program importing tokcolumnar keeps its own setting (none here)
    proc = subprocess.run([sys.executable, "-c", "import os, tokcolumnar.cli; "
                           "print(os.environ.get('OPENBLAS_NUM_THREADS'))"],
                          capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    assert proc.stdout.strip() == "None"


COLLECTOR_PROBE = r"""
import atexit, gc, sys
from tokcolumnar import cli

def report():  # after the command, from exit_quickly (atexit handlers run)
    print(gc.isenabled(), gc.get_freeze_count())

atexit.register(report)
if sys.argv[1] == "program":
    sys.argv = ["tokcolumnar", "train", "--help"]
    cli.run()
else:
    cli.main(["count", sys.argv[2], "--out", sys.argv[3], "--quiet"])
"""


def test_the_program_pauses_the_collector_while_loading_and_resumes_it(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("low lower lowest\n", encoding="utf-8")
    # (--help ends the program in argparse, after the libraries are loaded)
    program = subprocess.run([sys.executable, "-c", COLLECTOR_PROBE, "program"],
                             capture_output=True, text=True, cwd=ROOT, check=True)
    enabled, frozen = program.stdout.splitlines()[-1].split()
    assert enabled == "True" and int(frozen) > 10_000  # the libraries' objects, frozen
    called = subprocess.run([sys.executable, "-c", COLLECTOR_PROBE, "main", str(text),
                             str(tmp_path / "w.parquet")], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert called.stdout.splitlines()[-1].split() == ["True", "0"]  # a caller's: untouched
