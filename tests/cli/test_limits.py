"""Hard limits of `train` (issue 27, items 7, 8, 10): a --memory-limit is honoured or the run
is refused before the work, the refusal's advice is a command the tool accepts, and word
counts whose sums overflow 64 bits are refused in one line."""

from __future__ import annotations

import re
import shlex

import polars as pl

from tests.support.cli import assert_clean_error, run_cli


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
