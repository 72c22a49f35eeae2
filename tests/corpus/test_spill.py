"""Counting in bounded memory (`corpus.spill`): whatever the budget — nothing spilled, a spill
after every unit, or in between — the words table is the in-memory count's (`count_words`),
first_seen included; with --max-words, the in-memory count's most frequent words."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.corpora import corpus
from tokcolumnar import count_words
from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus.spill import MANIFEST, count_bounded, unit_bytes_for
from tokcolumnar.corpus.units import plan_units
from tokcolumnar.memory import keep_most_frequent
from tokcolumnar.workdir import WorkDir


def bounded(inputs: list[str], work: Path, budget: int, unit_bytes: int | None = None,
            **options) -> tuple[pl.DataFrame, int, WorkDir]:
    cfg = TrainConfig(**options, show_progress=False)
    units = plan_units(inputs, cfg.format, unit_bytes or unit_bytes_for(budget))
    wd = WorkDir.open(work, inputs=inputs, fingerprint={}, resume=False)
    words, spilled = count_bounded(units, cfg, wd, budget, checkpoint_every=1e9)
    return words, spilled, wd


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["en_shakespeare_500k.txt", "zh_hongloumeng_300k.txt",
                                  "udhr_multiscript.txt"])
@pytest.mark.parametrize("pre_tokenizer", ["whitespace", "byte-level"])
@pytest.mark.parametrize("budget", [1, 40_000, 300_000, 1 << 30])
def test_spilled_count_is_the_in_memory_count(tmp_path, name, pre_tokenizer, budget):
    path = str(corpus(f"small/{name}"))
    expected = count_words([path], pre_tokenizer=pre_tokenizer, show_progress=False)
    got, spilled, _ = bounded([path], tmp_path / "w", budget, pre_tokenizer=pre_tokenizer)
    assert got.schema == expected.schema
    assert got.equals(expected)
    # the smallest budgets spill (a 1-byte budget after every unit); the largest never
    if budget <= 40_000:
        assert spilled > 0
    if budget == 1 << 30:
        assert spilled == 0


@pytest.mark.corpus
@pytest.mark.parametrize("max_words", [1, 50, 999, 10**9])
def test_spilled_max_words_keeps_the_in_memory_most_frequent(tmp_path, max_words):
    path = str(corpus("small/en_shakespeare_500k.txt"))
    expected = keep_most_frequent(count_words([path], show_progress=False), max_words)
    got, spilled, _ = bounded([path], tmp_path / "w", 20_000, max_words=max_words)
    assert spilled > 0
    assert got.equals(expected)
    assert got.height == min(max_words, count_words([path], show_progress=False).height)


def test_max_words_breaks_ties_by_first_seen():
    words = pl.DataFrame({"word": ["a", "b", "c", "d"], "count": [2, 5, 2, 2],
                          "first_seen": [3, 0, 1, 2]},
                         schema={"word": pl.String, "count": pl.UInt64, "first_seen": pl.UInt64})
    # b (5), then among the 2s: c (seen at 1), d (at 2); a (at 3) is dropped; order kept
    assert keep_most_frequent(words, 3)["word"].to_list() == ["b", "c", "d"]


LINE = st.text(alphabet="ab é文 \r.", min_size=0, max_size=12)


@settings(max_examples=40, deadline=None)
@given(files=st.lists(st.lists(LINE, min_size=0, max_size=30), min_size=1, max_size=3),
       budget=st.sampled_from([1, 64, 400, 1 << 30]),
       unit_bytes=st.sampled_from([1, 7, 40, 1 << 20]))
def test_spilled_count_on_generated_corpora(tmp_path_factory, files, budget, unit_bytes):
    d = tmp_path_factory.mktemp("c")
    paths = []
    for i, lines in enumerate(files):
        p = d / f"f{i}.txt"
        p.write_text("\n".join(lines), encoding="utf-8", newline="")
        paths.append(str(p))
    try:
        expected = count_words(paths, show_progress=False)
    except Exception as e:  # noqa: BLE001 - the same refusal (no words) on both sides
        with pytest.raises(type(e), match="no words"):
            bounded(paths, d / "w", budget, unit_bytes)
        return
    got, _, _ = bounded(paths, d / "w", budget, unit_bytes)
    assert got.equals(expected)


@pytest.mark.corpus
def test_manifest_lists_finished_units_and_runs(tmp_path):
    path = str(corpus("small/en_botchan.txt"))
    _, spilled, wd = bounded([path], tmp_path / "w", 1, unit_bytes=50_000)
    state = wd.read_json(MANIFEST)
    assert state["done"] == len(state["plan"]) == len(state["unit_tokens"]) > 1
    assert len(state["runs"]) == state["done"]  # a budget of 1 byte spills every unit
    assert state["spilled_bytes"] == spilled > 0
    assert all((wd.file(r) / "p000.parquet").is_file() for r in state["runs"])


@pytest.mark.corpus
def test_resumed_count_skips_finished_units_and_drops_unlisted_runs(tmp_path):
    """A count killed after its first spill, with later runs half-written (not in the
    manifest): resuming counts the remaining units only and gives the in-memory words."""
    path = str(corpus("small/en_botchan.txt"))
    expected = count_words([path], show_progress=False)
    _, _, wd = bounded([path], tmp_path / "w", 1, unit_bytes=50_000)
    state = wd.read_json(MANIFEST)
    assert len(state["runs"]) > 2
    cut = {**state, "done": 1, "unit_tokens": state["unit_tokens"][:1],
           "runs": state["runs"][:1]}
    wd.write_json(MANIFEST, cut)
    cfg = TrainConfig(show_progress=False)
    units = plan_units([path], None, 50_000)
    resumed = WorkDir.open(tmp_path / "w", inputs=[path], fingerprint={}, resume=True)
    assert resumed.resumed
    got, _ = count_bounded(units, cfg, resumed, 1, checkpoint_every=1e9)
    assert got.equals(expected)
    # the stale runs were deleted and counted again: one run per unit, as before
    assert resumed.read_json(MANIFEST)["runs"] == state["runs"]
