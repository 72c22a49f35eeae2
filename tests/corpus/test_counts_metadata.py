"""A words table records how its words were counted (issue 27, item 9): `count` and `train`
write the settings that shape a word into its Parquet metadata, `train --from-counts` refuses a
table counted otherwise (naming both), and takes a table that records nothing with the run's
settings, saying so in one note line."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli

TEXT = "Hello world, hello there!\nThe world is big; the sea is bigger.\n" * 20
ENGINES = ["polars", pytest.param("duckdb", marks=pytest.mark.duckdb)]


@pytest.fixture
def text(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    return f


def _count(text, out, *options):
    proc = run_cli("count", str(text), "--out", str(out), "--quiet", *options)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_whitespace_count_trained_as_gpt2_is_refused_naming_both(text, tmp_path, engine):
    words = _count(text, tmp_path / "w.parquet", "--engine", engine)
    proc = run_cli("train", "--from-counts", str(words), "--preset", "gpt2", "--engine", engine,
                   "--vocab-size", "300", "--out", str(tmp_path / "o"))
    line = assert_clean_error(proc, "was counted with --pre-tokenizer whitespace")
    assert "this run has --pre-tokenizer byte-level" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_count_then_train_with_the_same_settings_is_the_direct_run(text, tmp_path, engine):
    words = _count(text, tmp_path / "w.parquet", "--preset", "gpt2", "--engine", engine)
    meta = json.loads(pl.read_parquet_metadata(words)["tokcolumnar.counted_with"])
    assert meta == {"normalizer": "none", "lowercase": False, "pre_tokenizer": "byte-level",
                    "cjk_split": None}
    args = ["--preset", "gpt2", "--engine", engine, "--vocab-size", "300", "--quiet"]
    proc = run_cli("train", "--from-counts", str(words), *args, "--out", str(tmp_path / "a"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert run_cli("train", str(text), *args, "--out", str(tmp_path / "b")).returncode == 0
    merges = (tmp_path / "a" / "merges.txt").read_text(encoding="utf-8")
    assert merges == (tmp_path / "b" / "merges.txt").read_text(encoding="utf-8")
    assert "Ġ" in merges  # the byte-level space marker: words counted as byte-level


def test_a_trained_words_table_records_its_settings_too(text, tmp_path):
    out = tmp_path / "o"
    proc = run_cli("train", str(text), "--normalizer", "nfkc", "--lowercase", "--vocab-size",
                   "200", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    again = run_cli("train", "--from-counts", str(out / "words.parquet"), "--normalizer",
                    "nfkc", "--lowercase", "--vocab-size", "200", "--quiet",
                    "--out", str(tmp_path / "a"))
    assert again.returncode == 0, again.stderr
    proc = run_cli("train", "--from-counts", str(out / "words.parquet"), "--vocab-size", "200",
                   "--out", str(tmp_path / "b"))
    line = assert_clean_error(proc, "was counted with --normalizer nfkc --lowercase")
    assert "this run has --normalizer none --no-lowercase" in line


def test_a_table_without_settings_is_taken_with_a_note(text, tmp_path):
    words = _count(text, tmp_path / "w.parquet")
    plain = tmp_path / "plain.parquet"
    pl.read_parquet(words).write_parquet(plain)  # written by another program: no metadata
    proc = run_cli("train", "--from-counts", str(plain), "--preset", "gpt2", "--vocab-size",
                   "300", "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    notes = [x for x in proc.stderr.splitlines() if x.startswith("tokcolumnar: note:")]
    assert len(notes) == 1, proc.stderr
    assert "does not record how its words were counted" in notes[0]
    assert "--pre-tokenizer byte-level" in notes[0]


def test_a_refused_run_on_a_table_without_settings_says_only_its_error(tmp_path):
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"word": ["abcdefghij" * 20_000, "ab"], "count": [5, 1]}).write_parquet(plain)
    proc = run_cli("train", "--from-counts", str(plain), "--memory-limit", "1MB",
                   "--model", "wordpiece", "--out", str(tmp_path / "o"))
    assert_clean_error(proc, "needs about")  # no note before it (nor the [UNK] one)
