"""`--extend` on the DuckDB engine (tokcolumnar/duckdb/extend.py, sql/12_extend.sql; issue 31).

The exactness oracle of tests/training/test_extend.py with `--engine duckdb`: training K tokens,
then extending that output to N on the same corpus, gives the files training N directly gives
(run.json aside; Parquet tables by content, without `origin`). The path another corpus takes
(the words segmented by the base's merges in SQL) gives on the same corpus the direct run's
merges, vocabulary and words, and on another corpus the Polars engine's files, byte for byte;
--resume continues a killed extension."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import run_cli
from tests.support.corpora import SMALL, corpus
from tests.support.markers import heavy, tiered
from tests.training.test_extend import CONFIGS as ALL_CONFIGS
from tests.training.test_extend import TABLES, assert_base_kept, assert_same_output
from tokcolumnar import train
from tokcolumnar.duckdb import extend as duck_extend
from tokcolumnar.training import extend as polars_extend

pytestmark = [pytest.mark.duckdb, pytest.mark.corpus]
#: The Polars oracle's configurations the DuckDB engine runs (it splits GPT-2's pattern only:
#: the cl100k and o200k runs are the Polars engine's)
CONFIGS = [c for c in ALL_CONFIGS if "pattern" not in c[1]]
DUCK = {"engine": "duckdb"}
#: Every configuration of the Polars oracle runs on DuckDB (each tie-break, the gpt2, bert and
#: subword-nmt presets, special tokens with a suffix); the fast tier runs gpt2.
FAST = "gpt2"


def assert_same_files(a: Path, b: Path) -> None:
    """Every file byte-identical but run.json; the tables (origin included) equal."""
    names = {p.name for p in a.iterdir()}
    assert names == {p.name for p in b.iterdir()}
    for name in sorted(names - {"run.json"}):
        if name in TABLES:
            assert pl.read_parquet(a / name).equals(pl.read_parquet(b / name)), name
        else:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("name,config", heavy(
    [(name, c[0]) for name in SMALL for c in CONFIGS],
    # the full run: on en_botchan gpt2 and whitespace with HF's tie-break, and gpt2 on the
    # Chinese novel; all 56 with TOKCOLUMNAR_SLOW=1 (10-140 s each; the Polars engine's oracle
    # runs every configuration on every small corpus, the DuckDB loop's tie-breaks are checked
    # against it in tests/duckdb/test_engine.py)
    full=lambda v: v in {("en_botchan.txt", "whitespace-id"),
                         ("zh_hongloumeng_300k.txt", FAST)},
    fast=lambda v: v == ("en_botchan.txt", FAST), multi=True))
def test_extend_is_training_on(tmp_path, name, config):
    """The oracle on the DuckDB engine: the base's merges replayed by the DuckDB loop, checked,
    and the loop goes on."""
    _, options, k, n = next(c for c in CONFIGS if c[0] == config)
    text = str(corpus(f"small/{name}"))
    if options.get("preset") != "subword-nmt":  # sizes above the initial vocabulary
        initial = train(text, vocab_size=1 << 20, max_merges=0, **options).vocab.height
        k, n = initial + k, initial + n
    base, direct, extended = tmp_path / "base", tmp_path / "direct", tmp_path / "extended"
    train(text, out_dir=base, vocab_size=k, **options, **DUCK)
    train(text, out_dir=direct, vocab_size=n, **options, **DUCK)
    train(text, out_dir=extended, extend=base, vocab_size=n, **DUCK)
    assert_same_output(direct, extended)
    merges = pl.read_parquet(extended / "merges.parquet")
    k_merges = pl.read_parquet(base / "merges.parquet").height
    assert merges.get_column("origin").to_list() == (
        ["base"] * k_merges + ["extend"] * (merges.height - k_merges))


# (the fast tier rebuilds in test_extend_on_another_corpus; the full run here the `id` order,
# the others with TOKCOLUMNAR_SLOW=1)
@pytest.mark.parametrize("config", heavy(
    [c[0] for c in CONFIGS], full=lambda c: c == FAST,
    fast=lambda c: False))
def test_rebuilt_state_is_the_loop_state(tmp_path, monkeypatch, config):
    """The rebuild in SQL (own ids, the words segmented by the base's merges in rounds, the
    base's merges logged first) gives on the same corpus the direct DuckDB run's merges,
    vocabulary and words, and the Polars engine's rebuild to the last column (its `count`
    included: what each base merge joined)."""
    monkeypatch.setattr(duck_extend, "_same_initial", lambda sql: False)
    monkeypatch.setattr(polars_extend, "_same_initial", lambda initial, base: False)
    _, options, k, n = next(c for c in CONFIGS if c[0] == config)
    text = str(corpus("small/en_botchan.txt"))
    if options.get("preset") != "subword-nmt":
        k, n = k + 256, n + 256
    train(text, out_dir=tmp_path / "base", vocab_size=k, **options)
    direct = train(text, vocab_size=n, **options, **DUCK)
    extended = train(text, extend=tmp_path / "base", vocab_size=n, **DUCK)
    assert direct.vocab.equals(extended.vocab)
    assert direct.words.equals(extended.words)
    assert direct.merges.drop("count").equals(extended.merges.drop("count", "origin"))
    on_polars = train(text, extend=tmp_path / "base", vocab_size=n)
    for table in ("merges", "vocab", "words"):
        assert getattr(on_polars, table).equals(getattr(extended, table)), table


# (the full run: byte-level (the replay diverges) and whitespace; bert with TOKCOLUMNAR_SLOW=1)
@pytest.mark.parametrize("preset", heavy(["gpt2", "bert", None], full=lambda p: p == "gpt2",
                                         fast=lambda p: p is None))
def test_extend_on_another_corpus(tmp_path, preset):
    """A base trained on English, extended with Russian (Chinese for byte-level, whose initial
    vocabulary is the base's: the replay diverges, the tables are built again): the base's
    tokens keep their ids, its merges their ranks, and both engines write the same files."""
    options = {"preset": preset} if preset else {}
    new = "small/zh_hongloumeng_300k.txt" if preset == "gpt2" else "small/ru_pushkin_300k.txt"
    base = train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "base",
                 vocab_size=1000, **options)
    text = str(corpus(new))
    out = tmp_path / "duckdb"
    proc = run_cli("train", text, "--extend", str(tmp_path / "base"), "--vocab-size", "3000",
                   "--engine", "duckdb", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert_base_kept(out, base, 3000)
    train(text, extend=tmp_path / "base", vocab_size=3000, out_dir=tmp_path / "polars")
    assert_same_files(tmp_path / "polars", out)


def _unordered_hf_base(path: Path) -> None:
    """A hand-made BPE tokenizer.json whose merge table is not well formed: `abc` is made by
    ranks 1 and 4, and rank 2 uses it. The encoder then merges one pair per word per round
    (the lowest rank, leftmost), not every occurrence of it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokens = ["a", "b", "c", "d", "ab", "abc", "abcd", "bc"]
    merges = [("a", "b"), ("ab", "c"), ("abc", "d"), ("b", "c"), ("a", "bc")]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))


def test_unordered_merge_table_base(tmp_path):
    """The rebuild's segmentation when the base's table is not well formed (a round merges
    the leftmost lowest-rank pair of each word): the Polars engine's files."""
    _unordered_hf_base(tmp_path / "base.json")
    assert not json.loads((tmp_path / "base.json").read_text())["normalizer"]
    text = tmp_path / "new.txt"
    text.write_text("abcd bcd abcabc aabcd abcbcd dcba abab cdcd\n" * 3 + "bcab abcd\n",
                    encoding="utf-8")
    for engine in ("duckdb", "polars"):
        train(str(text), extend=tmp_path / "base.json", vocab_size=20, engine=engine,
              out_dir=tmp_path / engine)
    assert_same_files(tmp_path / "polars", tmp_path / "duckdb")
    words = pl.read_parquet(tmp_path / "duckdb" / "words.parquet")
    assert words.filter(pl.col("word") == "abcd").get_column("tokens").to_list() == [["abcd"]]


# (the fast tier and the full run: en_botchan killed at merge 3; the later kill point and the
# larger corpus with TOKCOLUMNAR_SLOW=1, for CI's budget)
@pytest.mark.parametrize("new,point", heavy(
    [("small/en_botchan.txt", "merge:3"), ("small/en_botchan.txt", "merge:40"),
     ("small/en_shakespeare_500k.txt", "merge:3")],
    full=lambda v: False, fast=lambda v: v[1] == "merge:3" and "botchan" in v[0],
    multi=True))
def test_extension_killed_then_resumed(tmp_path, new, point):
    """--resume continues a DuckDB extension where its checkpoint left it: while the base's
    merges are replayed (pass 3), after them (pass 40: the replay takes 34), and on the
    rebuilt path (another corpus)."""
    text = corpus(new)
    train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "base", vocab_size=400)
    args = ["train", str(text), "--extend", str(tmp_path / "base"), "--vocab-size", "900",
            "--engine", "duckdb", "--quiet"]
    proc = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert proc.returncode == 0, proc.stderr
    args += ["--checkpoint-every", "0", "--out", str(tmp_path / "out")]
    killed = run_cli(*args, env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_files(tmp_path / "whole", tmp_path / "out")


@pytest.mark.parametrize("tie_break", tiered(["lexical-max", "first-seen"],
                                             lambda t: t == "lexical-max"))
def test_small_input_extends_through_the_chain(tmp_path, tie_break):
    """An input of at most 4,096 characters of distinct words runs lexical-max (and first-seen
    always) through the chain of stages 10-11: the oracle there, and the rebuild of another
    corpus as the Polars engine's."""
    lines = corpus("small/en_botchan.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "a.txt").write_text("\n".join(lines[200:260]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(lines[400:460]) + "\n", encoding="utf-8")
    a = str(tmp_path / "a.txt")
    words = train(a, vocab_size=1 << 20, max_merges=0).words
    assert words.get_column("word").str.len_chars().sum() <= 4096
    initial = train(a, vocab_size=1 << 20, max_merges=0).vocab.height
    options = {"tie_break": tie_break, **DUCK}
    train(a, out_dir=tmp_path / "base", vocab_size=initial + 60, **options)
    train(a, out_dir=tmp_path / "direct", vocab_size=initial + 200, **options)
    train(a, out_dir=tmp_path / "extended", extend=tmp_path / "base",
          vocab_size=initial + 200, **DUCK)
    assert_same_output(tmp_path / "direct", tmp_path / "extended")
    for engine in ("duckdb", "polars"):
        train(str(tmp_path / "b.txt"), out_dir=tmp_path / f"b-{engine}",
              extend=tmp_path / "base", vocab_size=initial + 200, engine=engine)
    assert_same_files(tmp_path / "b-polars", tmp_path / "b-duckdb")


# (--min-frequency with TOKCOLUMNAR_SLOW=1: tests/training/test_extend.py has it on Polars)
@pytest.mark.parametrize("options", heavy(
    [{"max_merges": 700}, {"min_frequency": 3}, {"max_token_length": 4}],
    full=lambda o: "max_token_length" in o, fast=lambda o: "max_merges" in o))
def test_loop_options_work_as_for_a_fresh_run(tmp_path, options):
    """--max-merges (counting the base's merges), --min-frequency and --max-token-length given
    to the extension: the tables of a direct DuckDB run with them."""
    text = str(corpus("small/en_botchan.txt"))
    train(text, out_dir=tmp_path / "base", vocab_size=500,
          **{k: v for k, v in options.items() if k != "max_merges"})
    direct = train(text, vocab_size=1100, **options, **DUCK)
    extended = train(text, extend=tmp_path / "base", vocab_size=1100, **options, **DUCK)
    for table in ("merges", "vocab", "words"):
        assert getattr(direct, table).equals(getattr(extended, table).drop("origin",
                                                                          strict=False))
