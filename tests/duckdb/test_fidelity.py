"""Issue 17, item 5: inputs and options where the two engines disagreed (crosscheck through the
CLI, as the issue reproduced them)."""

from __future__ import annotations

import resource

import polars as pl
import pytest

from tests.duckdb.test_inputs import compress
from tests.support.bpe_oracle import hf_bpe
from tests.support.cli import run_cli
from tests.support.corpora import corpus
from tests.support.markers import heavy
from tests.support.strategies import as_table
from tokcolumnar.config import TrainConfig
from tokcolumnar.duckdb.engine import LEXICAL_CHAIN_MAX_CHARS, runs_as_chain
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


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# Item 7: the orders and models that ran one SQL pass per merge took 40-160 s on 1.5-3 KB
# inputs (first-seen 24-41 CPU-s on 3 KB before the chain of docs/architecture.md "The chain
# for lexical-max and first-seen"). The issue's bound is 10 s on an idle machine; measured
# 4.7-7.5 CPU-s on these inputs, so the test allows twice the bound in CPU seconds (CPU time,
# not wall: a loaded CI machine does not make it fail).
SLOW_BEFORE = [{"tie_break": "first-seen"}, {"tie_break": "lexical-max"},
               {"model": "wordpiece"}, {"preset": "bert"}]


@pytest.mark.slow
@pytest.mark.corpus
# the full run: each order or model on the 14-script UDHR (10-30 s each); the other corpora
# with TOKCOLUMNAR_SLOW=1
@pytest.mark.parametrize("name, options", heavy(
    [(n, o) for n in ("small/en_botchan.txt", "small/zh_hongloumeng_300k.txt",
                      "small/udhr_multiscript.txt") for o in SLOW_BEFORE],
    full=lambda v: v[0] == "small/udhr_multiscript.txt", fast=lambda v: False, multi=True),
    ids=lambda v: "-".join(map(str, v.values())) if isinstance(v, dict) else str(v))
def test_duckdb_3kb_inputs_train_within_the_bound(tmp_path, name, options):
    text = corpus(name).read_bytes()[:3000].decode("utf-8", "ignore")
    src = tmp_path / "c.txt"
    src.write_text(text, encoding="utf-8")
    start = _cpu_seconds()
    duck = train(str(src), engine="duckdb", vocab_size=5000, **options)
    spent = _cpu_seconds() - start
    assert spent < 20.0, f"{spent:.1f} CPU-s"
    polars = train(str(src), engine="polars", vocab_size=5000, **options)
    assert duck.merges.select("left", "right").equals(polars.merges.select("left", "right"))


# The chain of stages 10-11 made lexical-max fast on 3 KB inputs but its cost per merge grows
# with the words it touches: 30 KB of a Japanese novel, whose lines are the words of the
# subword-nmt pre-tokenizer, took 265 CPU-s as a chain against 14 in the merge loop of stages
# 7-8, which lexical-max now takes above 4,096 characters of distinct words (engine.runs_as_chain).
@pytest.mark.slow
@pytest.mark.corpus
def test_duckdb_lexical_max_on_long_words_stays_in_the_batching_loop(tmp_path):
    text = corpus("small/ja_wagahai_300k.txt").read_bytes()[:30000].decode("utf-8", "ignore")
    src = tmp_path / "ja.txt"
    src.write_text(text, encoding="utf-8")
    start = _cpu_seconds()
    duck = train(str(src), engine="duckdb", preset="subword-nmt", vocab_size=2000)
    spent = _cpu_seconds() - start
    assert spent < 60.0, f"{spent:.1f} CPU-s"
    polars = train(str(src), engine="polars", preset="subword-nmt", vocab_size=2000)
    assert duck.merges.height > 500
    assert duck.merges.select("left", "right").equals(polars.merges.select("left", "right"))


def test_which_orders_run_as_a_chain():
    short = pl.DataFrame({"word": ["ab", "abc"]})
    long = pl.DataFrame({"word": ["x" * LEXICAL_CHAIN_MAX_CHARS, "y"]})
    assert runs_as_chain(TrainConfig(tie_break="first-seen"), long)
    assert runs_as_chain(TrainConfig(tie_break="lexical-max"), short)
    assert not runs_as_chain(TrainConfig(tie_break="lexical-max"), long)
    assert not runs_as_chain(TrainConfig(tie_break="id"), short)
