"""Issue 17, item 5: inputs and options where the two engines disagreed (crosscheck through the
CLI, as the issue reproduced them)."""

from __future__ import annotations

import pytest

from tests.duckdb.test_inputs import compress
from tests.support.bpe_oracle import hf_bpe
from tests.support.cli import run_cli
from tests.support.strategies import as_table
from tokcolumnar.training.pipeline import train

pytestmark = pytest.mark.duckdb


@pytest.mark.parametrize("codec, ext", [("gzip", ".gz"), ("zstd", ".zst")])
@pytest.mark.parametrize("pre", ["whitespace", "none", "byte-level", "metaspace"])
def test_compressed_text_with_a_lone_cr(tmp_path, codec, ext, pre):
    # before: DuckDB lost `b` (read_csv ends lines at a lone CR), or refused the file
    src = tmp_path / f"c.txt{ext}"
    src.write_bytes(compress(b"\r\na\rb\r\n", codec))
    proc = run_cli("crosscheck", str(src), "--pre-tokenizer", pre)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("identical: ")


@pytest.mark.parametrize("option", ["--limit-alphabet", "--max-token-length"])
@pytest.mark.parametrize("model", ["bpe", "wordpiece"])
def test_huge_limits(tmp_path, option, model):
    # before: DuckDB alone failed: "Conversion Error: Type INT64 with value 99999999999 can't
    # be cast ... INT32"
    src = tmp_path / "c.txt"
    src.write_text("ad  b  cd abcd\n", encoding="utf-8")
    proc = run_cli("crosscheck", str(src), option, "99999999999", "--model", model)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("identical: ")
    beyond = run_cli("train", str(src), "--out", str(tmp_path / "o"), option, str(1 << 63))
    assert beyond.returncode == 2
    assert beyond.stderr.splitlines() == [
        f"tokcolumnar: error: {option} must be at most {(1 << 63) - 1}, got {1 << 63}"]


def test_prefix_and_end_of_word_token_that_are_corpus_characters():
    # before and now: crosscheck 'ad  b  cd ' --pre-tokenizer none --end-of-word-token ' '
    # --continuing-subword-prefix a -> "MISMATCH: merges row 5"
    words = [("ad  b  cd ", 1)]
    options = {"pre_tokenizer": "none", "end_of_word_token": " ",
               "continuing_subword_prefix": "a"}
    oracle = [(a, b) for a, b, _ in hf_bpe(words, 30000, prefix="a", eow_token=" ")[0]]
    table = as_table(words)
    duck = train(from_counts=table, engine="duckdb", **options)
    assert list(zip(duck.merges["left"], duck.merges["right"])) == oracle
    polars = train(from_counts=table, **options)
    assert list(zip(polars.merges["left"], polars.merges["right"])) == oracle
