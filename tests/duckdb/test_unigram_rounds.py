"""The Unigram trainer's rounds: the pruned table (pruned.parquet, tokcolumnar/training/
unigram_log.py) holds exactly the pieces each step dropped, with the trainer's own values and the
oracle's (tests/support/unigram_oracle.py); the SQL twin of EM and pruning
(sql/14_unigram_em.sql, sql/15_unigram_prune.sql, tokcolumnar/duckdb/unigram_rounds.py) agrees
with the trainer stage by stage, and its comparisons catch a difference."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.test_unigram_oracle import corpora, vocab_for
from tests.support import unigram_oracle as uo
from tests.support.cli import run_cli
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.markers import heavy
from tests.training.test_unigram import CLI_LINES
from tokcolumnar.duckdb.engine import scripts
from tokcolumnar.duckdb.unigram_rounds import (
    check_rounds,
    compare_em,
    compare_prune,
    em_step,
    load_words,
    prune_step,
)
from tokcolumnar.models.unigram import UnigramModel
from tokcolumnar.training import unigram as ug
from tokcolumnar.training.unigram_log import UnigramTrace

pytestmark = pytest.mark.duckdb

PRUNING = ("never_best", "unused", "loss")


def trained(lines: list[str], vocab: int, threads: int = 16
            ) -> tuple[ug.UnigramResult, UnigramTrace]:
    trace = UnigramTrace()
    result = ug.train_unigram(ug.load_sentences(pl.Series(lines, dtype=pl.String)), None,
                              ug.UnigramOptions(vocab_size=vocab, num_threads=threads,
                                                hard_vocab_limit=False), trace)
    return result, trace


def botchan(lines: int | None = None) -> list[str]:
    with open(corpus("small/en_botchan.txt"), encoding="utf-8") as f:
        text = [line.rstrip("\n") for line in f]
    return text[:lines] if lines else text


def dropped(pruned: pl.DataFrame, round_: int, reasons: tuple[str, ...],
            iteration: int | None = None) -> set[str]:
    rows = pruned.filter(pl.col("round") == round_, pl.col("reason").is_in(reasons))
    if iteration is not None:
        rows = rows.filter(pl.col("iteration") == iteration)
    got = rows.get_column("piece").to_list()
    assert len(got) == len(set(got))  # a piece drops once
    return set(got)


# --- the pruned table ----------------------------------------------------------------------

def assert_as_oracle(lines: list[str], vocab: int, threads: int) -> None:
    """Each round's drops, by EM and by pruning, are the oracle's set differences, and every
    loss is the oracle's float32 loss."""
    result, _ = trained(lines, vocab, threads)
    oracle = uo.train(lines, uo.Options(vocab_size=vocab, num_threads=threads))
    pruned = result.pruned
    assert result.rounds.height == len(oracle.rounds)
    before = {p for p, _ in oracle.seeds}
    for r, (em, after) in enumerate(zip(oracle.em_rounds, oracle.rounds)):
        em_set, after_set = {p for p, _ in em}, {p for p, _ in after}
        assert dropped(pruned, r, ("em",)) == before - em_set
        assert dropped(pruned, r, PRUNING) == em_set - after_set
        losses = pruned.filter(pl.col("round") == r, pl.col("reason") == "loss")
        assert set(losses["piece"]) <= set(oracle.losses[r])
        assert losses["loss"].to_list() == [oracle.losses[r][p] for p in losses["piece"]]
        # a piece dropped without a loss had none: the oracle computed no loss for it
        assert not dropped(pruned, r, ("never_best", "unused")) & set(oracle.losses[r])
        before = after_set
    last = pruned.filter(pl.col("round") == len(oracle.rounds))
    assert set(last["reason"]) <= {"unreachable", "final_cut"}
    final = {p for p, _ in oracle.pieces}
    assert not set(last["piece"]) & final
    assert before - set(last["piece"]) <= final


@examples(0.3)
@given(corpora(), st.integers(0, 25), st.sampled_from([1, 3, 16]))
def test_pruned_table_as_the_oracle(lines: list[str], extra: int, threads: int) -> None:
    assert_as_oracle(lines, vocab_for(lines, extra), threads)


@pytest.mark.corpus
def test_pruned_table_as_the_oracle_on_botchan() -> None:
    """100 lines of botchan, 200 pieces: 16,000 seeds pruned in rounds (the oracle ~5 s)."""
    assert_as_oracle(botchan(100), 200, 16)


def segments(pieces: list[str], scores: np.ndarray, words: list[str]) -> list[list[int]]:
    """The words' best segmentations over the pieces (our encoder; id 0 the unknown piece)."""
    model = UnigramModel([("<unk>", 0.0)] + list(zip(pieces, scores.tolist())), unk_id=0)
    return model.encode_words(pl.Series(words, dtype=pl.String)).to_list()


@pytest.mark.corpus
def test_pruned_table_holds_each_steps_drops() -> None:
    """botchan at 1,000 pieces (6 rounds): each step's rows are the set difference of the
    pieces before and after it, with the trainer's own expected counts, frequencies and losses;
    the reasons hold (an `em` piece expected < 0.5, a `never_best` one segmented into 2+
    pieces, an `unused` one of frequency 0, a `loss` one ranked below every candidate kept)."""
    result, trace = trained(botchan(), 1000)
    pruned = result.pruned
    assert pruned.schema == {"round": pl.UInt32, "iteration": pl.UInt8, "reason": pl.String,
                             "id": pl.UInt32, "piece": pl.String, "score": pl.Float64,
                             "expected": pl.Float64, "freq": pl.Float64, "loss": pl.Float64}
    for step in trace.em:
        before, after = trace.pieces(step.seeds), trace.pieces(step.seeds_after)
        rows = pruned.filter(pl.col("round") == step.round, pl.col("iteration") == step.iteration)
        assert set(rows["reason"]) <= {"em"}
        assert set(rows["piece"]) == set(before) - set(after)
        assert rows["piece"].to_list() == before.gather(rows["id"]).to_list()
        assert rows["expected"].to_numpy().tolist() == step.expected[rows["id"]].tolist()
        assert rows["score"].to_numpy().tolist() == step.scores[rows["id"]].tolist()
        assert (rows["expected"] < 0.5).all()
        assert (step.expected[np.isin(step.seeds, step.seeds_after)] >= 0.5).all()
    assert len(trace.prunes) == result.rounds.height >= 4
    for step, round_row in zip(trace.prunes, result.rounds.iter_rows(named=True)):
        p = step.pruning
        before = trace.pieces(step.seeds)
        kept = set(trace.pieces(step.seeds[p.kept]))
        rows = pruned.filter(pl.col("round") == step.round, pl.col("iteration").is_null())
        assert set(rows["piece"]) == set(before) - kept
        assert round_row["pieces"] - round_row["after_pruning"] == \
            pruned.filter(pl.col("round") == step.round).height
        ids = rows["id"].to_numpy()
        assert rows["freq"].to_numpy().tolist() == p.freq[ids].tolist()
        unused = rows.filter(pl.col("reason") == "unused")
        assert (unused["freq"] == 0).all()
        never = rows.filter(pl.col("reason") == "never_best")["piece"].to_list()
        assert all(len(ids_) >= 2 for ids_ in segments(before.to_list(), step.scores, never))
        losses = rows.filter(pl.col("reason") == "loss")
        assert losses["loss"].to_numpy().tolist() == p.loss[losses["id"]].tolist()
        assert rows.filter(pl.col("reason") != "loss")["loss"].null_count() == \
            rows.filter(pl.col("reason") != "loss").height
        # the ranking: every candidate dropped by its loss ranks below every one kept
        cand_kept = np.isin(step.seeds, step.seeds[p.kept]) & ~np.isnan(p.loss)
        if losses.height:
            assert losses["loss"].max() <= p.loss[cand_kept].min()
            assert len(kept) == p.pruned_size
    final = set(result.pieces)
    last = pruned.filter(pl.col("round") == result.rounds.height)
    assert set(last["reason"]) <= {"unreachable", "final_cut"}
    after_last = set(trace.pieces(trace.prunes[-1].seeds[trace.prunes[-1].pruning.kept]))
    assert not set(last["piece"]) & final
    assert after_last - set(last["piece"]) == final & after_last
    # the rest of the final vocabulary: required characters put back by finalize
    assert all(len(p) == 1 for p in final - after_last)


def test_cli_writes_the_pruned_table(tmp_path: Path) -> None:
    """`train --model unigram` writes pruned.parquet beside rounds.parquet, names it in
    run.json, and `sql` queries it as `pruned`."""
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    out = tmp_path / "out"
    assert run_cli("train", str(src), "--model", "unigram", "--vocab-size", "45", "--out",
                   str(out)).returncode == 0
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert "pruned.parquet" in json.dumps(run)
    pruned = pl.read_parquet(out / "pruned.parquet")
    rounds = pl.read_parquet(out / "rounds.parquet")
    per_round = pruned.filter(pl.col("round") < rounds.height).group_by("round").len()
    assert dict(per_round.iter_rows()) == {
        r: b - a for r, b, a in zip(rounds["round"], rounds["pieces"], rounds["after_pruning"])
        if b != a}
    proc = run_cli("sql", str(out), "select reason, count(*) as n from pruned group by reason "
                   "order by reason", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    expected = pruned.group_by("reason").len().sort("reason")
    assert proc.stdout.split()[1:] == [f"{r},{n}" for r, n in expected.iter_rows()]


# --- the SQL twin --------------------------------------------------------------------------

def test_sql_digamma_is_sentencepieces() -> None:
    """tc_digamma equals `unigram.digamma` bit for bit: 20,000 values over the range EM
    meets (expected counts from 0.5 to the corpus' token count), both sides of 7."""
    rng = np.random.default_rng(32)
    xs = np.r_[np.geomspace(0.5, 1e8, 10_000), rng.uniform(0.5, 8.0, 10_000),
               [0.5, 1.0, 6.999999, 7.0, 7.5, 123456.789]]
    with scripts() as sql:
        sql.run("unigram_em", "macros")
        sql.con.register("xs", pl.DataFrame({"i": np.arange(len(xs)), "x": xs}))
        got = sql.con.sql("SELECT tc_digamma(x) AS d FROM xs ORDER BY i").pl()["d"]
    assert got.to_numpy().tolist() == ug.digamma(xs).tolist()


@examples(0.1)
@given(corpora(), st.integers(0, 25))
def test_sql_rounds_on_generated_corpora(lines: list[str], extra: int) -> None:
    _, trace = trained(lines, vocab_for(lines, extra))
    with scripts() as sql:
        sql.con.execute("SET threads = 1")
        checks = list(check_rounds(sql, trace))
    assert [c.line for c in checks if not c.ok] == []
    assert len(checks) == len(trace.em) + len(trace.prunes)


@pytest.fixture(scope="module")
def botchan_4000() -> tuple[UnigramTrace, pl.DataFrame, pl.DataFrame]:
    """botchan at 4,000 pieces (one round: 2 EM iterations and a pruning), with the SQL
    results of its second EM iteration and of its pruning."""
    _, trace = trained(botchan(), 4000)
    step, prune = trace.em[-1], trace.prunes[-1]
    with scripts() as sql:
        sql.con.execute("SET threads = 1")
        word_max = load_words(sql, trace.words, trace.counts)
        em = em_step(sql, trace.pieces(step.seeds), step.scores, word_max)
        pr = prune_step(sql, trace.pieces(prune.seeds), prune.scores, word_max, trace.desired,
                        trace.shrinking_factor)
    return trace, em, pr


@pytest.mark.corpus
def test_sql_em_and_pruning_agree_on_botchan(botchan_4000) -> None:
    trace, em, pr = botchan_4000
    check = compare_em(trace.em[-1], trace, em)
    assert check.ok, check.line
    prune = trace.prunes[-1]
    check = compare_prune(prune, trace, pr, prune.seeds[prune.pruning.kept])
    assert check.ok, check.line
    assert "near-ties" not in check.line
    assert pr["kept"].sum() == prune.pruning.pruned_size


@pytest.mark.corpus
def test_sql_comparisons_catch_a_difference(botchan_4000) -> None:
    """A score off by 1e-3, a piece kept instead of another far from the cut, a frequency off
    by one: each is reported with the piece."""
    trace, em, pr = botchan_4000
    step = trace.em[-1]
    scores = step.scores_after.copy()
    scores[7] += np.float32(1e-3)
    check = compare_em(dataclasses.replace(step, scores_after=scores), trace, em)
    assert not check.ok and repr(trace.pieces(step.seeds_after)[7]) in check.line
    prune = trace.prunes[-1]
    p = prune.pruning
    kept = p.kept.copy()
    worst = int(np.nanargmin(p.loss))  # the lowest loss: dropped, far below the cut
    swapped = sorted([int(kept[-1]), worst])
    kept[-1] = worst
    check = compare_prune(prune, trace, pr, prune.seeds[kept])
    assert not check.ok and "2 pieces kept by one side only" in check.line
    assert repr(trace.pieces(prune.seeds)[swapped[0]]) in check.line
    freq = p.freq.copy()
    freq[3] += 1
    check = compare_prune(dataclasses.replace(prune, pruning=dataclasses.replace(p, freq=freq)),
                          trace, pr, prune.seeds[p.kept])
    assert not check.ok and "Viterbi frequencies differ" in check.line


@pytest.mark.corpus
@pytest.mark.parametrize("name,vocab", heavy(
    [("en_botchan.txt", 2000), ("zh_hongloumeng_300k.txt", 4000)],
    # every round replayed: ~20 s at 2,000 pieces (4 rounds); the Chinese novel's words are
    # whole lines (~4 CPU-minutes). The fast tier has botchan at 4,000 (one round):
    # tests/duckdb/test_unigram_sql.py::test_crosscheck_command
    full=lambda v: v[0] == "en_botchan.txt", fast=lambda v: False, multi=True))
def test_crosscheck_replays_every_round(name: str, vocab: int) -> None:
    proc = run_cli("crosscheck", str(corpus(f"small/{name}")), "--preset", "sentencepiece",
                   "--vocab-size", str(vocab), "--quiet", timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("identical: ") and "segmented alike" in lines[0]
    assert any(" EM iteration 1: " in line for line in lines)
    assert any(" pruning: " in line for line in lines)
    assert all(line.startswith("identical: ") for line in lines)
    assert " EM iterations and " in lines[-1]


def test_crosscheck_stops_at_the_first_difference(tmp_path: Path, monkeypatch) -> None:
    """A stage that does not agree: its line after MISMATCH, no later stage, exit 1."""
    import io

    from tokcolumnar.config import TrainConfig
    from tokcolumnar.duckdb import crosscheck as cc
    from tokcolumnar.duckdb.unigram_rounds import StageCheck

    def stages(sql, trace):  # noqa: ANN001, ANN202 - the replaced check_rounds
        yield StageCheck(True, "identical: stage one")
        yield StageCheck(False, "stage two differs")
        yield StageCheck(True, "identical: stage three")

    monkeypatch.setattr(cc, "check_rounds", stages)
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    out = io.StringIO()
    assert cc.crosscheck([str(src)], TrainConfig(model="unigram", vocab_size=45,
                                                 pre_tokenizer="metaspace"), out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("identical: seeds: ")  # the first stage, before the rounds
    assert lines[2:] == ["identical: stage one", "MISMATCH: stage two differs"]
