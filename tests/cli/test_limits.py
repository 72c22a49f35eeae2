"""Hard limits of `train` (issue 27, items 7, 8, 10): a --memory-limit is honoured or the run
is refused before the work, the refusal's advice is a command the tool accepts, and word
counts whose sums overflow 64 bits are refused in one line."""

from __future__ import annotations

import random
import re
import shlex

import polars as pl
import pytest

import tokcolumnar as tc
from tests.support.cli import assert_clean_error, error_line, run_cli, run_measured


def _advised(line: str) -> list[list[str]]:
    """The options a memory refusal advises, each as the arguments to add to the command."""
    out = []
    m = re.search(r"raise --memory-limit to at least ([\d.]+) (GB|MB|kB|B)\b", line)
    if m:
        out.append(["--memory-limit", f"{m.group(1)}{m.group(2)}"])
    m = re.search(r"--max-words ([\d,]+)", line)
    if m:
        out.append(["--max-words", m.group(1).replace(",", "")])
    return out


def _refused_then_advice_runs(tmp_path, words: pl.DataFrame, limit: str) -> list[list[str]]:
    table = tmp_path / "words.parquet"
    words.write_parquet(table)
    base = ["train", "--from-counts", str(table), "--vocab-size", "300", "--quiet"]
    proc = run_cli(*base, "--out", str(tmp_path / "o"), "--memory-limit", limit)
    line = assert_clean_error(proc, "needs about")
    advice = _advised(line)
    assert advice, line
    for i, extra in enumerate(advice):
        args = [*base, "--out", str(tmp_path / f"advised{i}"), *extra]
        if extra[0] != "--memory-limit":
            args += ["--memory-limit", limit]
        run = run_cli(*args)
        assert run.returncode == 0, (shlex.join(extra), line, run.stderr)
    return advice


def test_memory_refusal_without_a_fitting_max_words_advises_only_the_limit(tmp_path):
    # one word that alone needs more than the limit: the old advice was `--max-words 0`,
    # which the parser refuses ("must be positive")
    words = pl.DataFrame({"word": ["abcdefghij" * 20_000, "ab"], "count": [5, 1]})
    advice = _refused_then_advice_runs(tmp_path, words, "1MB")
    assert [a[0] for a in advice] == ["--memory-limit"]


def test_memory_refusal_advises_a_max_words_that_fits(tmp_path):
    # the most frequent words are the longest: a --max-words from the average size per word
    # (the old advice) is refused again
    words = pl.DataFrame({
        "word": [f"{i:05d}" + "x" * (2000 if i < 200 else 0) for i in range(20_000)],
        "count": [10_000 - i if i < 200 else 1 for i in range(20_000)]})
    advice = _refused_then_advice_runs(tmp_path, words, "3MB")
    assert [a[0] for a in advice] == ["--memory-limit", "--max-words"]


# 10. counts whose sums overflow: refused in one line (the loops sum word counts over their
# symbols; some sums are float64, exact up to 2^53), never wrapped or rounded

OVERFLOWING = {
    "near 2^63": {"word": ["hello", "world", "help"], "count": [2**63 - 10, 2**62, 5]},
    "aaaa x 2^62": {"word": ["aaaa"], "count": [2**62]},
    "a word's rows sum past 2^64": {"word": ["ab", "cd", "ab"],
                                    "count": [2**63 - 1, 1, 2**63 - 1]},
}


@pytest.mark.parametrize("engine", ["polars", pytest.param("duckdb", marks=pytest.mark.duckdb)])
@pytest.mark.parametrize("case", list(OVERFLOWING))
def test_counts_whose_sums_overflow_are_refused(tmp_path, case, engine):
    table = tmp_path / "words.parquet"
    pl.DataFrame(OVERFLOWING[case]).write_parquet(table)
    proc = run_cli("train", "--from-counts", str(table), "--out", str(tmp_path / "o"),
                   "--vocab-size", "100", "--engine", engine)
    assert_clean_error(proc, "the counts are too large")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("engine", ["polars", pytest.param("duckdb", marks=pytest.mark.duckdb)])
def test_counts_up_to_the_bound_are_summed_exactly(engine):
    c = (1 << 53) // 5  # "aaaa": 4 characters and a boundary per occurrence
    r = tc.train(from_counts=pl.DataFrame({"word": ["aaaa"], "count": [c]}), vocab_size=10,
                 engine=engine)
    assert r.merges.select("left", "right", "count").rows() == [("a", "a", 3 * c),
                                                                 ("aa", "aa", c)]


# 7. one huge word: the merge loop's passes over it are chunked, so the run stays within a
# limit its estimate accepts (before: `aaaa...` of 5M characters peaked at 810 MB with an
# estimate of 195 MB), and a limit below the estimate is refused before any merge

def _long_word(tmp_path, kind: str, n: int = 4_000_000):
    rng = random.Random(3)
    word = "a" * n if kind == "run" else "".join(rng.choices("abcdefghij", k=n))
    f = tmp_path / f"{kind}.txt"
    f.write_text(word + "\n", encoding="ascii")
    return f


@pytest.mark.parametrize("kind", ["run", "random"])
def test_a_huge_word_stays_within_the_memory_limit(tmp_path, kind):
    src = _long_word(tmp_path, kind)
    limit = 400 * 10**6
    code, err, peak_mib, _ = run_measured(
        ["train", str(src), "--out", str(tmp_path / "o"), "--max-word-chars", "5000000",
         "--memory-limit", str(limit), "--vocab-size", "500", "--quiet"], timeout=300)
    assert code == 0, err
    assert peak_mib * 2**20 <= limit, f"peak {peak_mib:.0f} MiB over --memory-limit 400MB"


def test_a_huge_word_over_the_limit_is_refused_before_the_loop(tmp_path):
    src = _long_word(tmp_path, "run")
    code, err, peak_mib, _ = run_measured(
        ["train", str(src), "--out", str(tmp_path / "o"), "--max-word-chars", "5000000",
         "--memory-limit", "100MB", "--vocab-size", "500"], timeout=300)
    assert code == 2, err
    line = error_line(err)
    assert "needs about" in line and "raise --memory-limit to at least" in line
    assert "--max-words cannot help" in line  # the one word does not fit
    assert peak_mib * 2**20 <= 300 * 10**6  # refused before the merge loop's work
