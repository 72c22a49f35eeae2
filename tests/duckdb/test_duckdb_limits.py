"""The DuckDB engine out of memory (issue 27: a failing environment is one line, never an
internal error): DuckDB's OutOfMemoryException in the merge loop is one `tokcolumnar: error:`
line naming --memory-limit, the work directory is kept, and `--resume` with a larger limit ends
with the files of a run that never ran short."""

from __future__ import annotations

import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus

pytestmark = [pytest.mark.duckdb, pytest.mark.corpus]


def test_out_of_memory_is_one_line_and_resumes(tmp_path):
    src = str(corpus("small/en_botchan.txt"))
    args = ["train", src, "--engine", "duckdb", "--vocab-size", "1500", "--quiet"]
    out = tmp_path / "o"
    proc = run_cli(*args, "--out", str(out), "--memory-limit", "20MB")
    line = assert_clean_error(proc, "DuckDB ran out of memory within --memory-limit 20 MB")
    assert "raise --memory-limit" in line and "--resume" in line
    assert (tmp_path / "o.work").is_dir() and not out.exists()
    resumed = run_cli(*args, "--out", str(out), "--memory-limit", "2GB", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    whole = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    for name in ("merges.txt", "vocab.json", "tokenizer.json"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
