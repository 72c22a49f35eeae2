"""The SQL twin of a Unigram model's segmentation (sql/13_unigram_viterbi.sql,
tokcolumnar/duckdb/unigram.py): HF's Unigram model gives the same ids for every word of
Hypothesis vocabularies (ties, unknown fusion, byte fallback), and on the real corpora the
words table of `--preset sentencepiece` is segmented alike; `crosscheck --model unigram`
reports a difference."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.test_unigram_model import ALPHABET, hf_ids, models
from tests.support.cli import run_cli
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.markers import heavy
from tokcolumnar.duckdb.unigram import first_segmentation_difference, segment_words

pytestmark = pytest.mark.duckdb


def vocab_frame(model: dict) -> pl.DataFrame:
    """An HF Unigram model's vocabulary as a vocab.parquet of ours."""
    tokens = [t for t, _ in model["vocab"]]
    kinds = ["special" if t == "<unk>" else "byte" if t.startswith("<0x") and len(t) == 6
             else "piece" for t in tokens]
    return pl.DataFrame({"id": list(range(len(tokens))), "token": tokens, "kind": kinds,
                         "score": [float(s) for _, s in model["vocab"]]})


@examples(0.5)
@given(models(), st.lists(st.text(alphabet=ALPHABET + "xü", min_size=1, max_size=10),
                          min_size=1, max_size=8, unique=True))
def test_sql_viterbi_is_hfs(model: dict, words: list[str]) -> None:
    got = segment_words(pl.Series(words, dtype=pl.String), vocab_frame(model)).to_list()
    assert got == hf_ids(model, words)


def test_ties_and_unknowns() -> None:
    # "ab" and "a" + "b" score alike: the last piece that starts first wins (HF, SentencePiece);
    # unknown characters in a row are one unknown token
    model = {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
             "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["ab", -2.0], ["c", -2.0],
                       ["bc", -3.0]]}
    words = ["ab", "abc", "abab", "xab", "xxa", "axxb"]
    got = segment_words(pl.Series(words), vocab_frame(model)).to_list()
    assert got == hf_ids(model, words)
    assert got[0] == [3] and got[4] == [0, 1] and got[5] == [1, 0, 2]


@pytest.mark.corpus
@pytest.mark.parametrize("name,byte_fallback", heavy(
    [("en_botchan.txt", False), ("udhr_multiscript.txt", False), ("udhr_multiscript.txt", True),
     ("zh_hongloumeng_300k.txt", False), ("ar_tashkeela_plain_300k.txt", False),
     ("ja_wagahai_300k.txt", False)],
    # the Japanese and Chinese novels' words are whole lines: 6-10 s of steps each
    full=lambda v: v[0] not in ("ja_wagahai_300k.txt", "zh_hongloumeng_300k.txt"),
    fast=lambda v: v[0] == "en_botchan.txt", multi=True))
def test_words_table_segmented_alike(tmp_path: Path, name: str, byte_fallback: bool) -> None:
    out = tmp_path / "out"
    proc = run_cli("train", str(corpus(f"small/{name}")), "--preset", "sentencepiece",
                   "--vocab-size", "4000", *(["--byte-fallback"] if byte_fallback else []),
                   "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    words = pl.read_parquet(out / "words.parquet")
    vocab = pl.read_parquet(out / "vocab.parquet")
    assert first_segmentation_difference(words, vocab) is None
    # and a difference is found: the longest segmentation of the first 200 words reversed
    head = words.head(200)
    at = int(head.get_column("ids").list.len().arg_max() or 0)
    altered = head.with_columns(
        pl.when(pl.int_range(pl.len()) == at).then(pl.col("ids").list.reverse())
        .otherwise(pl.col("ids")).alias("ids"))
    found = first_segmentation_difference(altered, vocab)
    assert found is not None and found.startswith("1 of ")


@pytest.mark.corpus
def test_crosscheck_command(tmp_path: Path) -> None:
    """The segmentation, then the seeds computed again in SQL (tests/duckdb/
    test_unigram_seeds.py) and the one round at 4,000 pieces replayed in SQL (its 2 EM
    iterations and its pruning: tests/duckdb/test_unigram_rounds.py)."""
    proc = run_cli("crosscheck", str(corpus("small/en_botchan.txt")), "--preset",
                   "sentencepiece", "--vocab-size", "4000", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("identical: 9,183 words segmented alike by the SQL Viterbi")
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("identical: seeds: 16,112 pieces (69 characters, 16,043 "
                               "substrings) in the same order with the same values")
    assert [line.split(":")[1] for line in lines[2:5]] == [
        " round 0 EM iteration 0", " round 0 EM iteration 1", " round 0 pruning"]
    assert lines[-1].startswith(
        "identical: the seeds, 2 EM iterations and 1 pruning rounds replayed")
