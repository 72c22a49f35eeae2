"""Bad input: one clear error line, exit code 2, no traceback, no half-written output (the
previous result stays intact)."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli, snapshot
from tokcolumnar import export
from tokcolumnar.cli import main


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """An output directory from an earlier successful run."""
    src = tmp_path / "ok.txt"
    src.write_text("low lower newest widest\n" * 3, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["train", str(src), "--out", str(out), "--vocab-size", "30", "--quiet"]) == 0
    return out


def check_untouched(out: Path, before: dict[str, bytes]) -> None:
    assert snapshot(out) == before
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_invalid_utf8(tmp_path, previous):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbroken \xff\xfe here\n")
    before = snapshot(previous)
    proc = run_cli("train", str(bad), "--out", str(previous), "--vocab-size", "50")
    assert_clean_error(proc, "invalid UTF-8 at byte 17")
    check_untouched(previous, before)


def test_invalid_utf8_in_gzip(tmp_path):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(gzip.compress(b"ok\n\xc3\x28\n"))
    assert_clean_error(run_cli("count", str(bad), "--out", str(tmp_path / "w.parquet")),
                       "invalid UTF-8")
    assert not (tmp_path / "w.parquet").exists()


def test_empty_file(tmp_path, previous):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    before = snapshot(previous)
    assert_clean_error(run_cli("train", str(empty), "--out", str(previous)), "no words")
    check_untouched(previous, before)


def test_whitespace_only_file(tmp_path):
    f = tmp_path / "blank.txt"
    f.write_text("   \n\t\n\n", encoding="utf-8")
    assert_clean_error(run_cli("train", str(f), "--out", str(tmp_path / "o")), "no words")
    assert not (tmp_path / "o").exists()


def test_missing_file(tmp_path):
    proc = run_cli("train", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "input not found")
    assert not (tmp_path / "o").exists()


def test_glob_matching_nothing(tmp_path):
    proc = run_cli("count", str(tmp_path / "*.txt"), "--out", str(tmp_path / "w.parquet"))
    assert_clean_error(proc, "no files match")


def test_missing_column(tmp_path):
    f = tmp_path / "t.parquet"
    pl.DataFrame({"body": ["a b c"]}).write_parquet(f)
    proc = run_cli("train", str(f), "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "no column 'text'")
    assert "body" in proc.stderr


def test_missing_column_jsonl_and_csv(tmp_path):
    j = tmp_path / "t.jsonl"
    j.write_text('{"body": "a b"}\n', encoding="utf-8")
    assert_clean_error(run_cli("count", str(j), "--out", str(tmp_path / "w.parquet")),
                       "no column 'text'")
    c = tmp_path / "t.csv"
    c.write_text("body\na b\n", encoding="utf-8")
    assert_clean_error(run_cli("count", str(c), "--out", str(tmp_path / "w.parquet")),
                       "no column 'text'")


def test_corrupt_parquet(tmp_path, previous):
    f = tmp_path / "broken.parquet"
    good = tmp_path / "good.parquet"
    pl.DataFrame({"text": ["hello world"] * 100}).write_parquet(good)
    data = good.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    before = snapshot(previous)
    proc = run_cli("train", str(f), "--out", str(previous))
    assert_clean_error(proc, "cannot read")
    check_untouched(previous, before)


def test_vocab_size_below_alphabet(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("abcdefghij klmnop\n", encoding="utf-8")
    proc = run_cli("train", str(f), "--out", str(tmp_path / "o"), "--vocab-size", "5")
    assert_clean_error(proc, "--vocab-size 5 is below the initial vocabulary (16")
    assert not (tmp_path / "o").exists()


def test_huge_line_without_spaces(tmp_path):
    """A line with no place to cut it is refused once it runs 4 x --max-word-chars bytes; a
    long word that fits in that bound is refused by the --max-word-chars check itself."""
    f = tmp_path / "huge.txt"
    f.write_text("short line\n" + "x" * (10 << 20) + "\n", encoding="utf-8")
    proc = run_cli("train", str(f), "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "huge.txt, byte 11: a line runs more than 4,000,000 bytes without "
                             "a place where the pre-tokenizer can cut it exactly")
    assert "--max-word-chars" in proc.stderr
    assert not (tmp_path / "o").exists()
    f.write_text("short line\n" + "x" * 1_500_000 + "\n", encoding="utf-8")
    proc = run_cli("train", str(f), "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "a pre-token of 1,500,000 characters exceeds --max-word-chars")
    assert not (tmp_path / "o").exists()


def test_bad_counts_file(tmp_path):
    f = tmp_path / "w.parquet"
    pl.DataFrame({"token": ["a"], "count": [1]}).write_parquet(f)
    proc = run_cli("train", "--from-counts", str(f), "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "no column 'word'")


def test_bad_option_values(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("a b\n", encoding="utf-8")
    assert_clean_error(run_cli("train", str(f), "--out", str(tmp_path / "o"),
                               "--vocab-size", "0"), "--vocab-size must be positive")
    assert_clean_error(run_cli("train", str(f), "--out", str(tmp_path / "o"),
                               "--pre-tokenizer", "nonsense"), "unknown pre-tokenizer")


def test_interrupted_write_keeps_previous(tmp_path, previous, monkeypatch):
    """A failure while writing the outputs leaves the previous directory as it was."""
    before = snapshot(previous)

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_parquet", boom)
    src = tmp_path / "new.txt"
    src.write_text("completely different text\n", encoding="utf-8")
    assert main(["train", str(src), "--out", str(previous), "--vocab-size", "40",
                 "--quiet"]) == 130
    check_untouched(previous, before)
