"""Extending a base tokenizer (`train(..., extend=BASE)`, `--extend`; issue 31).

The exactness oracle: training K tokens, then extending that output to N on the same corpus,
gives the files training N directly gives (run.json aside; Parquet tables by content, without
`origin`). On another corpus the base's tokens, ids and merges stay, HF loads the result and
encodes as we do."""

from __future__ import annotations

import csv
import io
import json
import signal
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus, small_tiered
from tests.support.hf_outputs import check_outputs_in_hf
from tests.support.markers import tiered
from tokcolumnar import train
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.training import extend as extend_module

#: (name, options, K, N): every tie-break, the three presets, special tokens with a suffix
CONFIGS = [
    ("whitespace-id", {}, 400, 1000),
    ("whitespace-lexical-max", {"tie_break": "lexical-max"}, 400, 1000),
    ("whitespace-first-seen", {"tie_break": "first-seen"}, 400, 1000),
    ("specials-suffix", {"special_tokens": ["<s>", "</s>", "<unk>"],
                         "end_of_word_suffix": "</w>"}, 400, 1000),
    ("gpt2", {"preset": "gpt2"}, 400, 1000),
    ("bert", {"preset": "bert"}, 400, 1000),
    ("subword-nmt", {"preset": "subword-nmt"}, 400, 1000),
]
TABLES = ("merges.parquet", "vocab.parquet", "words.parquet")


def assert_same_output(direct: Path, extended: Path) -> None:
    """Every file byte-identical but run.json and the tables, which hold the same rows (the
    extension's merges with an `origin` column more)."""
    names = {p.name for p in direct.iterdir()}
    assert names == {p.name for p in extended.iterdir()}
    for name in sorted(names - {"run.json", *TABLES}):
        assert (direct / name).read_bytes() == (extended / name).read_bytes(), name
    for name in TABLES:
        a = pl.read_parquet(direct / name)
        b = pl.read_parquet(extended / name).drop("origin", strict=False)
        assert a.equals(b), name


def _k_then_n(tmp_path: Path, text: Path, options: dict, k: int, n: int,
              **extend_kw) -> tuple[Path, Path, Path]:
    """K and N are sizes above the corpus's initial vocabulary (a number of merges for
    subword-nmt, as its -s)."""
    base, direct, extended = tmp_path / "base", tmp_path / "direct", tmp_path / "extended"
    if options.get("preset") != "subword-nmt":
        initial = train(str(text), vocab_size=1 << 20, max_merges=0, **options).vocab.height
        k, n = initial + k, initial + n
    train(str(text), out_dir=base, vocab_size=k, **options)
    train(str(text), out_dir=direct, vocab_size=n, **options)
    train(str(text), out_dir=extended, extend=base, vocab_size=n, **extend_kw)
    return base, direct, extended


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_tiered("en_botchan.txt"))
@pytest.mark.parametrize("config", [c[0] for c in CONFIGS])
def test_extend_is_training_on(tmp_path, name, config):
    """The oracle, for every small corpus and configuration."""
    _, options, k, n = next(c for c in CONFIGS if c[0] == config)
    base, direct, extended = _k_then_n(tmp_path, corpus(f"small/{name}"), options, k, n)
    assert_same_output(direct, extended)
    merges = pl.read_parquet(extended / "merges.parquet")
    k_merges = pl.read_parquet(base / "merges.parquet").height
    assert merges.get_column("origin").to_list() == (
        ["base"] * k_merges + ["extend"] * (merges.height - k_merges))


@pytest.mark.corpus
@pytest.mark.parametrize("config", [c[0] for c in CONFIGS])
def test_rebuilt_state_is_the_loop_state(tmp_path, monkeypatch, config):
    """The path another corpus takes (the corpus segmented by the base's merges as the encoder
    does, the loop started from that segmentation) gives, on the same corpus, the merges,
    vocabulary and words of a direct run: the loop's state after the base's merges is the
    segmentation, whatever the tie-break. (The base merges' `count` is then the weighted
    occurrences joined, which a run `a a a` of a pair (a, a) makes smaller than its pair
    count.)"""
    monkeypatch.setattr(extend_module, "_same_initial", lambda initial, base: False)
    _, options, k, n = next(c for c in CONFIGS if c[0] == config)
    text = corpus("small/en_botchan.txt")
    if options.get("preset") != "subword-nmt":  # sizes above the initial vocabulary
        k, n = k + 256, n + 256
    train(str(text), out_dir=tmp_path / "base", vocab_size=k, **options)
    direct = train(str(text), vocab_size=n, **options)
    extended = train(str(text), extend=tmp_path / "base", vocab_size=n)
    assert direct.vocab.equals(extended.vocab)
    assert direct.words.equals(extended.words)
    assert direct.merges.drop("count").equals(extended.merges.drop("count", "origin"))
    assert direct.tokenizer().to_dict() == extended.tokenizer().to_dict()


@pytest.mark.corpus
@pytest.mark.parametrize("options", tiered(
    [{"max_merges": 700}, {"min_frequency": 3}, {"max_token_length": 4}],
    lambda o: "max_merges" in o))
def test_loop_options_work_as_for_a_fresh_run(tmp_path, options):
    text = corpus("small/en_botchan.txt")
    train(str(text), out_dir=tmp_path / "base", vocab_size=500,
          **{k: v for k, v in options.items() if k != "max_merges"})
    direct = train(str(text), vocab_size=1100, **options)
    extended = train(str(text), extend=tmp_path / "base", vocab_size=1100, **options)
    for table in ("merges", "vocab", "words"):
        assert getattr(direct, table).equals(getattr(extended, table).drop("origin",
                                                                          strict=False))


@pytest.mark.corpus
def test_extend_from_counts(tmp_path):
    """--from-counts: the counted words of the corpus give the same extension."""
    text = corpus("small/en_botchan.txt")
    proc = run_cli("count", str(text), "--preset", "gpt2", "--out", str(tmp_path / "w.parquet"))
    assert proc.returncode == 0, proc.stderr
    train(from_counts=str(tmp_path / "w.parquet"), out_dir=tmp_path / "base", vocab_size=600,
          preset="gpt2")
    train(from_counts=str(tmp_path / "w.parquet"), out_dir=tmp_path / "direct",
          vocab_size=1200, preset="gpt2")
    proc = run_cli("train", "--from-counts", str(tmp_path / "w.parquet"), "--extend",
                   str(tmp_path / "base"), "--vocab-size", "1200", "--out",
                   str(tmp_path / "extended"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert_same_output(tmp_path / "direct", tmp_path / "extended")


@pytest.mark.corpus
@pytest.mark.parametrize("preset", ["gpt2", "bert", None])
def test_extend_on_another_corpus(tmp_path, preset):
    """A base trained on English, extended with Russian (or Chinese, byte-level): the base's
    tokens keep their ids, its merges their ranks; the new characters and merges come after;
    HF loads every file and encodes held-apart lines as we do."""
    options = {"preset": preset} if preset else {}
    new = "small/zh_hongloumeng_300k.txt" if preset == "gpt2" else "small/ru_pushkin_300k.txt"
    base = train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "base",
                 vocab_size=1000, **options)
    lines = corpus(new).read_text(encoding="utf-8").splitlines()
    (tmp_path / "new.txt").write_text("\n".join(lines[:-50]) + "\n", encoding="utf-8")
    out = tmp_path / "extended"
    proc = run_cli("train", str(tmp_path / "new.txt"), "--extend", str(tmp_path / "base"),
                   "--vocab-size", "3000", "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    vocab = pl.read_parquet(out / "vocab.parquet")
    merges = pl.read_parquet(out / "merges.parquet")
    assert vocab.height == 3000
    assert vocab.head(base.vocab.height).select("id", "token", "kind").equals(
        base.vocab.select("id", "token", "kind"))
    assert merges.head(base.merges.height).select("rank", "left", "right", "id").equals(
        base.merges.select("rank", "left", "right", "id"))
    assert set(merges.get_column("origin").head(base.merges.height)) == {"base"}
    assert set(merges.get_column("origin").tail(merges.height - base.merges.height)) == {
        "extend"}
    assert merges.tail(merges.height - base.merges.height).get_column("id").min() \
        >= base.vocab.height
    # the base's tokenizer around the model is kept as it was
    a = json.loads((tmp_path / "base" / "tokenizer.json").read_text(encoding="utf-8"))
    b = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor", "added_tokens"):
        assert a[key] == b[key], key
    check_outputs_in_hf(out, lines[-50:])


def _corrupt_merges(base: Path) -> None:
    merges = pl.read_parquet(base / "merges.parquet")
    merges = merges.with_columns(pl.when(pl.col("rank") == 3).then(pl.col("left_id") + 1)
                                 .otherwise(pl.col("left_id")).alias("left_id"))
    merges.write_parquet(base / "merges.parquet")


@pytest.mark.corpus
@pytest.mark.parametrize("args,needle", [
    (["--vocab-size", "300"], "--vocab-size 300 is not above the base's 400 tokens"),
    (["--vocab-size", "400"], "--vocab-size 400 is not above the base's 400 tokens"),
    ([], "--extend needs --vocab-size above the base's 400 tokens"),
    (["--vocab-size", "900", "--pre-tokenizer", "bert"],
     "--pre-tokenizer bert contradicts the base, which has --pre-tokenizer whitespace"),
    (["--vocab-size", "900", "--special-tokens", "<s>"],
     "--special-tokens '<s>' contradicts the base, which has --special-tokens ''"),
    (["--vocab-size", "900", "--lowercase"],
     "--lowercase contradicts the base, which has no --lowercase"),
    (["--vocab-size", "900", "--model", "wordpiece"],
     "--model wordpiece contradicts the base, which has --model bpe"),
    (["--vocab-size", "900", "--corrupt"], "its merges do not build its vocabulary (merge 3"),
    (["--vocab-size", "900", "--not-ours"], "not a readable tokcolumnar output directory"),
    (["--vocab-size", "900", "--a-file"], "not a tokcolumnar output directory or a "
     "tokenizer.json"),
    (["--vocab-size", "900", "--wordpiece-json"], "a WordPiece model cannot be extended from "
     "a tokenizer.json"),
])
def test_bad_extension_is_one_line(tmp_path, args, needle):
    text = corpus("small/en_botchan.txt")
    base = tmp_path / "base"
    train(str(text), out_dir=base, vocab_size=400)
    if "--corrupt" in args:
        _corrupt_merges(base)
    if "--not-ours" in args:
        base = tmp_path / "empty"
        base.mkdir()
    if "--a-file" in args:
        base = tmp_path / "base" / "vocab.parquet"
    if "--wordpiece-json" in args:
        train(str(text), out_dir=tmp_path / "bert", vocab_size=400, preset="bert")
        base = tmp_path / "bert" / "tokenizer.json"
    args = [a for a in args if a not in ("--corrupt", "--not-ours", "--a-file",
                                         "--wordpiece-json")]
    proc = run_cli("train", str(text), "--extend", str(base), "--out", str(tmp_path / "out"),
                   *args)
    assert_clean_error(proc, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.corpus
@pytest.mark.duckdb
def test_duckdb_engine_extends(tmp_path):
    """--engine duckdb extends as the Polars engine does (its own tests:
    tests/duckdb/test_extend_duckdb.py); an engine that cannot is refused."""
    text = corpus("small/en_botchan.txt")
    train(str(text), out_dir=tmp_path / "base", vocab_size=400)
    on_duckdb = train(str(text), extend=tmp_path / "base", vocab_size=900, engine="duckdb")
    on_polars = train(str(text), extend=tmp_path / "base", vocab_size=900)
    for table in ("merges", "vocab", "words"):
        assert getattr(on_duckdb, table).equals(getattr(on_polars, table)), table
    with pytest.raises(TokcolumnarError, match="--extend runs on the Polars and DuckDB "
                                               "engines only"):
        train(str(text), extend=tmp_path / "base", vocab_size=900, engine="ray")


@pytest.mark.corpus
def test_out_may_not_be_the_base(tmp_path):
    text = corpus("small/en_botchan.txt")
    train(str(text), out_dir=tmp_path / "base", vocab_size=400)
    before = (tmp_path / "base" / "merges.parquet").read_bytes()
    with pytest.raises(TokcolumnarError):
        train(str(text), out_dir=tmp_path / "base", extend=tmp_path / "base", vocab_size=900,
              force=True)
    assert (tmp_path / "base" / "merges.parquet").read_bytes() == before



def _hf_byte_level(text: Path, vocab_size: int, path: Path) -> dict:
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train([str(text)], vocab_size=vocab_size, min_frequency=2,
              special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save(str(path))
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.corpus
@pytest.mark.parametrize("sizes", tiered([("small", 2000, 4000), ("medium", 8000, 16000)],
                                         lambda s: s[0] == "small"))
def test_hf_english_base_extended_with_chinese(tmp_path, sizes):
    """An HF-trained byte-level BPE on English, extended with Chinese: the base's ids and
    merges stay, its normalizer, pre-tokenizer, decoder, post-processor and added tokens too;
    HF encodes every held-apart line to our ids; `compare` reports more bytes per token on
    Chinese (medium, 8k -> 16k: 1.00 -> 3.38 on one line in 50 of medium/zh.txt)."""
    tier, k, n = sizes
    en = corpus("small/en_shakespeare_500k.txt" if tier == "small" else "medium/en.txt")
    zh = corpus("small/zh_hongloumeng_300k.txt" if tier == "small" else "medium/zh.txt")
    if tier == "medium":  # the first 8 MB of the English corpus
        with en.open("rb") as f:
            (tmp_path / "en.txt").write_bytes(f.read(8_000_000))
        en = tmp_path / "en.txt"
    base = _hf_byte_level(en, k, tmp_path / "en.json")
    lines = zh.read_text(encoding="utf-8").splitlines()
    held = lines[::50]
    (tmp_path / "zh.txt").write_text("\n".join(x for i, x in enumerate(lines) if i % 50) + "\n",
                                     encoding="utf-8")
    (tmp_path / "held.txt").write_text("\n".join(held) + "\n", encoding="utf-8")
    out = tmp_path / "zh"
    proc = run_cli("train", str(tmp_path / "zh.txt"), "--extend", str(tmp_path / "en.json"),
                   "--vocab-size", str(n), "--out", str(out), "--quiet", timeout=900)
    assert proc.returncode == 0, proc.stderr
    new = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert len(new["model"]["vocab"]) == n
    assert all(new["model"]["vocab"][t] == i for t, i in base["model"]["vocab"].items())
    assert new["model"]["merges"][:len(base["model"]["merges"])] == base["model"]["merges"]
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor", "added_tokens"):
        assert new[key] == base[key], key
    merges = pl.read_parquet(out / "merges.parquet")
    assert merges.filter(pl.col("origin") == "base").height == len(base["model"]["merges"])
    check_outputs_in_hf(out, held)
    proc = run_cli("compare", str(tmp_path / "en.json"), str(out), "--text",
                   str(tmp_path / "held.txt"), "--format", "csv", timeout=900)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    before, after = (float(r["bytes_per_token"]) for r in rows)
    assert after > 2 * before, (before, after)


@pytest.mark.corpus
@pytest.mark.parametrize("new,point", tiered(
    [("small/en_botchan.txt", "merge:3"), ("small/en_botchan.txt", "merge:120"),
     ("small/en_shakespeare_500k.txt", "merge:3")],
    lambda v: v[1] == "merge:3", multi=True))
def test_extension_killed_then_resumed(tmp_path, new, point):
    """--resume continues an extension where its checkpoint left it: while the base's merges
    are replayed (pass 3), after them (pass 120: the replay takes 79 passes), and on the
    rebuilt path."""
    text = corpus(new)
    train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "base", vocab_size=600)
    args = ["train", str(text), "--extend", str(tmp_path / "base"), "--vocab-size", "1400",
            "--quiet", "--checkpoint-every", "0"]
    proc = run_cli(*args, "--out", str(tmp_path / "whole"))
    assert proc.returncode == 0, proc.stderr
    killed = run_cli(*args, "--out", str(tmp_path / "out"), env={"TOKCOLUMNAR_TEST_KILL": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = run_cli(*args, "--out", str(tmp_path / "out"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    whole, out = tmp_path / "whole", tmp_path / "out"
    assert {p.name for p in whole.iterdir()} == {p.name for p in out.iterdir()}
    for p in whole.iterdir():
        if p.name in TABLES:
            assert pl.read_parquet(p).equals(pl.read_parquet(out / p.name)), p.name
        elif p.name != "run.json":
            assert p.read_bytes() == (out / p.name).read_bytes(), p.name
