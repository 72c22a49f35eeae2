"""The SQL twin of the Unigram trainer's seeding (sql/16_unigram_seeds.sql,
tokcolumnar/duckdb/unigram_seeds.py): the seeds computed in DuckDB are the trainer's
`seed_pieces` (the same pieces in the same order, the same values, the scores to float32
rounding) on real corpora and on Hypothesis corpora under every validity option, and
`crosscheck --model unigram` fails on a seed table that differs."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.test_unigram_oracle import ALPHABETS
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.markers import tiered
from tests.training.test_unigram import CLI_LINES
from tokcolumnar.config import TrainConfig
from tokcolumnar.duckdb import crosscheck as cc
from tokcolumnar.duckdb.engine import scripts
from tokcolumnar.duckdb.runner import Scripts
from tokcolumnar.duckdb.unigram_seeds import compare_seeds, sql_seeds
from tokcolumnar.training import unigram as ug

pytestmark = pytest.mark.duckdb

DEFAULT_SIZE = ug.UnigramOptions().seed_sentencepiece_size
# the oracle's alphabets, and: a 4-byte character and U+001F (a meta piece's mark), full-width
# and ASCII digits with the prolonged sound mark (Han) and Katakana, Greek with a comma and a
# combining mark
SEED_ALPHABETS = [*ALPHABETS, "a🎉\x1f ", "１2ーア ", "aΩ,\u0301 "]


@st.composite
def corpora(draw) -> list[str]:
    alphabet = draw(st.sampled_from(SEED_ALPHABETS))
    lines = draw(st.lists(st.text(alphabet=alphabet, max_size=14), min_size=1, max_size=12))
    if not any(line.strip(" ▁") for line in lines):  # SentencePiece needs one character
        lines.append(alphabet[0] * 3)
    return lines


def seeding_input(lines: list[str], counts: np.ndarray | None, opts: ug.UnigramOptions
                  ) -> tuple[pl.Series, np.ndarray]:
    """The sentences `train_unigram` seeds from (loaded, rare characters replaced by `▅`), with
    their counts."""
    sentences = ug.load_sentences(pl.Series(lines, dtype=pl.String))
    counts = np.ones(len(sentences), np.int64) if counts is None else counts[:len(sentences)]
    sentences = ug.replace_rare(sentences, ug.required_characters(sentences, counts, opts))
    return sentences, counts


def assert_as_trainer(sql: Scripts, sentences: pl.Series, counts: np.ndarray,
                      opts: ug.UnigramOptions) -> pl.DataFrame:
    ours = ug.seed_pieces(sentences, counts, opts)
    theirs = sql_seeds(sql, sentences, counts, opts)
    check = compare_seeds(ours, theirs)
    assert check.ok, check.line
    # the pieces and values exactly, the scores to float32 rounding
    assert theirs["piece"].to_list() == ours["piece"].to_list()
    assert theirs["value"].to_list() == ours["value"].to_list()
    np.testing.assert_array_max_ulp(theirs["score"].to_numpy(), ours["score"].to_numpy(), 1)
    return theirs


@pytest.fixture(scope="module")
def sql() -> Iterator[Scripts]:
    """One DuckDB for the module's examples (each run replaces the stage's tables)."""
    with scripts() as s:
        s.con.execute("SET threads = 1")  # tiny statements: threads only add overhead
        yield s


def test_nul_rule_and_ties(sql: Scripts) -> None:
    """`▁ab` and `ab` end both sentences and their NULs are followed by different bytes (the
    next sentence's `▁`, the end of the text): frequency 2 by the NUL rule alone. `a` and `▁`
    tie on their counts (code point order); `ab` and `ba` tie on their value and length:
    UTF-8 order."""
    sentences = pl.Series(["▁ba▁ba▁bab", "▁ab", "▁ab"])
    seeds = assert_as_trainer(sql, sentences, np.ones(3, np.int64), ug.UnigramOptions())
    assert seeds.select("piece", "value").rows()[:3] == [("b", 6.0), ("a", 5.0), ("▁", 5.0)]
    found = dict(sql.con.sql("SELECT piece, freq FROM tc_sd_candidates").fetchall())
    assert found["▁ab"] == 2  # followed by NUL twice: no branch, but the NUL rule
    assert found["ab"] == 3  # likewise, ending 3 sentences
    ties = [p for p in seeds["piece"].to_list() if p in ("ab", "ba")]
    assert ties == sorted(ties, key=lambda p: p.encode())


def test_validity_rules(sql: Scripts) -> None:
    """Each rule of IsValidSentencePiece, on strings followed by two different bytes: kana
    count as Han (`▁あア漢`), a combining mark takes the script before it (`▁éx`), a script
    change splits (`▁ab,` only without split_by_unicode_script), digits stand alone with
    split_digits (`▁12`)."""
    lines = ["あア漢, あア漢", "e\u0301x, e\u0301x", "12, 12", "ab,x ab, ab", "q"]
    sentences, counts = seeding_input(lines, None, ug.UnigramOptions())
    plain = assert_as_trainer(sql, sentences, counts, ug.UnigramOptions())["piece"].to_list()
    assert {"▁あア漢", "▁e\u0301x", "▁12", "▁ab"} <= set(plain)
    assert not any("," in p and len(p) > 1 for p in plain)
    digits = assert_as_trainer(sql, sentences, counts, ug.UnigramOptions(split_digits=True))
    assert "▁12" not in digits["piece"].to_list() and "▁ab" in digits["piece"].to_list()
    mixed = assert_as_trainer(sql, sentences, counts,
                              ug.UnigramOptions(split_by_unicode_script=False))
    assert "▁ab," in mixed["piece"].to_list()


@pytest.mark.corpus
@pytest.mark.parametrize("name,split_digits", tiered(
    [("en_botchan.txt", False), ("en_botchan.txt", True), ("udhr_multiscript.txt", False),
     ("udhr_multiscript.txt", True), ("ja_wagahai_300k.txt", False),
     ("zh_hongloumeng_300k.txt", True)],
    # 1-2 s of SQL a seeding (the Japanese and Chinese lines are long words)
    lambda v: v[0] == "en_botchan.txt", multi=True))
def test_seeds_on_real_corpora(sql: Scripts, name: str, split_digits: bool) -> None:
    """Every seed of a real corpus, at the default seed_sentencepiece_size and at 500."""
    lines = corpus(f"small/{name}").read_text(encoding="utf-8").split("\n")
    opts = ug.UnigramOptions(split_digits=split_digits)
    sentences, counts = seeding_input(lines, None, opts)
    every = assert_as_trainer(sql, sentences, counts, opts)
    assert (every["piece"].str.len_chars() > 1).sum() > 1000
    cut = assert_as_trainer(sql, sentences, counts,
                            ug.UnigramOptions(split_digits=split_digits,
                                              seed_sentencepiece_size=500))
    assert (cut["piece"].str.len_chars() > 1).sum() == 500
    assert cut["piece"].to_list() == every["piece"].head(cut.height).to_list()


@examples(0.6)
@given(corpora(), st.lists(st.integers(1, 3), min_size=12, max_size=12),
       st.booleans(), st.booleans(), st.booleans(), st.sampled_from([2, 3, 16]),
       st.sampled_from([1, 3, DEFAULT_SIZE]), st.sampled_from([0.9995, 0.7]))
def test_seeds_on_generated_corpora(sql: Scripts, lines: list[str], counts: list[int],
                                    split_digits: bool, by_script: bool, by_number: bool,
                                    max_len: int, size: int, coverage: float) -> None:
    """Small alphabets (repeats, ties, `▁` in the text, digits, commas, kana, combining
    marks, a 4-byte character, U+001F), sentence counts, every validity option, short pieces,
    tight cuts, rare characters as `▅`."""
    opts = ug.UnigramOptions(split_digits=split_digits, split_by_unicode_script=by_script,
                             split_by_number=by_number, max_sentencepiece_length=max_len,
                             seed_sentencepiece_size=size, character_coverage=coverage)
    sentences, weights = seeding_input(lines, np.array(counts, np.int64), opts)
    assert_as_trainer(sql, sentences, weights, opts)


# --- the crosscheck's stage ------------------------------------------------------------------

def altered(kind: str, table: pl.DataFrame) -> pl.DataFrame:
    """The trainer's seed table with one deliberate difference."""
    n = table.height
    if kind == "swap":  # the last two seeds in each other's place
        order = list(range(n - 2)) + [n - 1, n - 2]
        return table[order]
    if kind == "drop":  # the last seed left out
        return table.head(n - 1)
    if kind == "value":  # a value off by one
        return table.with_columns(pl.when(pl.int_range(n) == n - 1).then(pl.col("value") + 1)
                                  .otherwise(pl.col("value")).alias("value"))
    assert kind == "score"  # a score 3 float32 steps off
    score = table["score"].to_numpy().copy()
    for _ in range(3):
        score[-1] = np.nextafter(score[-1], np.float32(0))
    return table.with_columns(pl.Series("score", score, dtype=pl.Float32))


def run_crosscheck(tmp_path: Path) -> tuple[int, list[str]]:
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    out = io.StringIO()
    code = cc.crosscheck([str(src)], TrainConfig(model="unigram", vocab_size=45,
                                                 pre_tokenizer="metaspace"), out=out)
    return code, out.getvalue().splitlines()


def test_crosscheck_compares_the_seeds_first(tmp_path: Path) -> None:
    code, lines = run_crosscheck(tmp_path)
    assert code == 0, lines
    assert lines[1].startswith("identical: seeds: ")
    assert "in the same order with the same values" in lines[1]
    assert " EM iteration 0: " in lines[2]
    assert lines[-1].startswith("identical: the seeds, ")


@pytest.mark.parametrize("kind,message", [
    ("swap", "2 of "), ("drop", "seeds (trainer) vs"), ("value", "1 values differ"),
    ("score", "float32 steps apart")])
def test_crosscheck_fails_on_altered_seeds(tmp_path: Path, monkeypatch, kind: str,
                                           message: str) -> None:
    """The trainer trains on a seed table with one difference: the seeds' line is a MISMATCH
    naming it, no later stage runs, exit 1."""
    seed_pieces = ug.seed_pieces

    def altered_seeds(*args, **kwargs) -> pl.DataFrame:  # noqa: ANN002, ANN003
        return altered(kind, seed_pieces(*args, **kwargs))

    monkeypatch.setattr(ug, "seed_pieces", altered_seeds)
    code, lines = run_crosscheck(tmp_path)
    assert code == 1, lines
    assert lines[0].startswith("identical: ") and "segmented alike" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("MISMATCH: seeds: "), lines
    assert message in lines[1]
