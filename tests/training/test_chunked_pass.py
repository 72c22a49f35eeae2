"""A merge pass over more than `passes.PASS_CHUNK` positions runs in chunks (issue 27, item 7:
one pair merged everywhere in a long word took ~220 bytes per occurrence at once): the
chunked pass gives the one-pass results exactly, for every loop and tie-break."""

from __future__ import annotations

import random

import polars as pl
import pytest

import tokcolumnar as tc
from tests.support.corpora import PRIMER
from tests.support.engines import every_loop_setting
from tokcolumnar.training import passes


def _long_words() -> pl.DataFrame:
    rng = random.Random(7)
    words = ["a" * 997, "ab" * 301, "aab" * 150, "".join(rng.choice("abc") for _ in range(2000)),
             "".join(rng.choice("abcdefgh") for _ in range(3000)), "ba", "aaa", "cab"]
    return pl.DataFrame({"word": words, "count": [3, 1, 2, 5, 1, 7, 4, 2]})


def _primer() -> pl.DataFrame:
    return tc.count_words(str(PRIMER))


SETTINGS = every_loop_setting(400)


@pytest.mark.parametrize("table", [_long_words, _primer], ids=["long words", "primer"])
@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: "-".join(map(str, o.values())))
def test_chunked_pass_gives_the_one_pass_results(monkeypatch, table, options):
    words = table()
    whole = tc.train(from_counts=words, **options)
    for chunk in (1, 5, 64):
        monkeypatch.setattr(passes, "PASS_CHUNK", chunk)
        part = tc.train(from_counts=words, **options)
        for name in ("merges", "vocab", "words"):
            assert getattr(part, name).equals(getattr(whole, name)), (chunk, name)



@pytest.mark.parametrize("table", [_long_words, _primer], ids=["long words", "primer"])
def test_initial_pairs_counted_after_the_sort_give_the_dense_counts(monkeypatch, table):
    """The initial pairs counted by dense key as they are made (`passes.DENSE_COUNT_MAX`)
    and summed per slice after the sort give the same table."""
    words = table()
    whole = tc.train(from_counts=words, vocab_size=400)
    monkeypatch.setattr(passes, "DENSE_COUNT_MAX", 0)
    part = tc.train(from_counts=words, vocab_size=400)
    for name in ("merges", "vocab", "words"):
        assert getattr(part, name).equals(getattr(whole, name)), name
