"""Extending a base tokenizer (`train(..., extend=BASE)`, `--extend`; issue 31).

The exactness oracle: training K tokens, then extending that output to N on the same corpus,
gives the files training N directly gives (run.json aside; Parquet tables by content, without
`origin`), from the output directory and, for a byte-level run without a preset, from its
`tokenizer.tiktoken` with `--pattern`. On another corpus the base's tokens, ids and merges
stay, HF (and tiktoken, from a .tiktoken base) loads the result and encodes as we do."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import signal
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import MEDIUM, SCRIPTS, SMALL, corpus
from tests.support.hf_outputs import check_outputs_in_hf
from tests.support.markers import heavy, tiered
from tokcolumnar import Tokenizer, train
from tokcolumnar.config import TrainConfig
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text.bytelevel import BYTE_ALPHABET
from tokcolumnar.tiktoken_format import read_tiktoken, tiktoken_text
from tokcolumnar.training import extend as extend_module

#: (name, options, K, N): every tie-break, the three presets, special tokens with a suffix,
#: byte-level runs with the cl100k and o200k patterns (the 256 bytes as alphabet, as tiktoken
#: needs: these are also extended from their tokenizer.tiktoken)
CONFIGS = [
    ("whitespace-id", {}, 400, 1000),
    ("whitespace-lexical-max", {"tie_break": "lexical-max"}, 400, 1000),
    ("whitespace-first-seen", {"tie_break": "first-seen"}, 400, 1000),
    ("specials-suffix", {"special_tokens": ["<s>", "</s>", "<unk>"],
                         "end_of_word_suffix": "</w>"}, 400, 1000),
    ("gpt2", {"preset": "gpt2"}, 400, 1000),
    ("bert", {"preset": "bert"}, 400, 1000),
    ("subword-nmt", {"preset": "subword-nmt"}, 400, 1000),
    ("cl100k", {"pattern": "cl100k", "initial_alphabet": list(BYTE_ALPHABET)}, 400, 1000),
    ("o200k", {"pattern": "o200k", "initial_alphabet": list(BYTE_ALPHABET)}, 400, 1000),
]
#: The medium corpora's oracle: K and N above the initial vocabulary.
MEDIUM_CONFIGS = ("whitespace-id", "gpt2", "cl100k", "bert")
MEDIUM_K, MEDIUM_N = 2000, 4000
#: The medium cases of the full run; the 14 others (5-81 s each: byte-level Chinese's pieces
#: are long runs of characters, 660,000 distinct ones) run with TOKCOLUMNAR_SLOW=1, as the
#: other minutes-long references.
MEDIUM_FULL_RUN = {("en.txt", "whitespace-id"), ("en.txt", "gpt2")}
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


def assert_base_kept(out: Path, base, size: int) -> pl.DataFrame:
    """An extension's output keeps the base's (a `train` result's) ids, tokens, kinds and
    merges in their ranks, the base's merges first with `origin` "base"; its merges table."""
    vocab = pl.read_parquet(out / "vocab.parquet")
    merges = pl.read_parquet(out / "merges.parquet")
    assert vocab.height == size
    assert vocab.head(base.vocab.height).select("id", "token", "kind").equals(
        base.vocab.select("id", "token", "kind"))
    assert merges.head(base.merges.height).select("rank", "left", "right", "id").equals(
        base.merges.select("rank", "left", "right", "id"))
    assert merges.get_column("origin").to_list() == (
        ["base"] * base.merges.height + ["extend"] * (merges.height - base.merges.height))
    return merges


def _k_then_n(tmp_path: Path, text: Path, options: dict, k: int, n: int,
              **extend_kw) -> tuple[Path, Path, Path]:
    """K and N are sizes above the corpus's initial vocabulary (a number of merges for
    subword-nmt, as its -s)."""
    base, direct, extended = tmp_path / "base", tmp_path / "direct", tmp_path / "extended"
    if options.get("preset") != "subword-nmt":
        cfg = TrainConfig(**options)
        if set(cfg.initial_alphabet) == set(BYTE_ALPHABET):  # (no count needed)
            initial = len(cfg.special_tokens) + 256
        else:
            initial = train(str(text), vocab_size=1 << 20, max_merges=0, **options).vocab.height
        k, n = initial + k, initial + n
    train(str(text), out_dir=base, vocab_size=k, **options)
    train(str(text), out_dir=direct, vocab_size=n, **options)
    train(str(text), out_dir=extended, extend=base, vocab_size=n, **extend_kw)
    return base, direct, extended


def check_oracle(tmp_path: Path, text: Path, config: str, k: int | None = None,
                 n: int | None = None) -> None:
    """The oracle for one corpus and configuration (its K and N unless given); a byte-level
    run with a pattern and no preset is also extended from its tokenizer.tiktoken."""
    _, options, k0, n0 = next(c for c in CONFIGS if c[0] == config)
    base, direct, extended = _k_then_n(tmp_path, text, options, k or k0, n or n0)
    assert_same_output(direct, extended)
    merges = pl.read_parquet(extended / "merges.parquet")
    k_merges = pl.read_parquet(base / "merges.parquet").height
    assert merges.get_column("origin").to_list() == (
        ["base"] * k_merges + ["extend"] * (merges.height - k_merges))
    if "pattern" in options:
        size = pl.read_parquet(direct / "vocab.parquet").height
        train(str(text), out_dir=tmp_path / "from-tiktoken", vocab_size=size,
              extend=base / "tokenizer.tiktoken", pattern=options["pattern"])
        assert_same_output(direct, tmp_path / "from-tiktoken")
        merges = pl.read_parquet(tmp_path / "from-tiktoken" / "merges.parquet")
        assert merges.get_column("origin").to_list() == (
            ["base"] * k_merges + ["extend"] * (merges.height - k_merges))


@pytest.mark.corpus
@pytest.mark.parametrize("name,config", heavy(
    [(name, c[0]) for c in CONFIGS for name in SMALL],
    # the full run: every configuration on en_botchan and the other scripts' corpora
    # (`SCRIPTS`), the byte-level LLM patterns (three runs and one from tokenizer.tiktoken
    # each) on en_botchan and the Chinese novel; every case with TOKCOLUMNAR_SLOW=1
    full=lambda v: (v[0] in SCRIPTS and v[1] not in ("cl100k", "o200k")) or v[0] in (
        "en_botchan.txt", "zh_hongloumeng_300k.txt"),
    fast=lambda v: v[0] == "en_botchan.txt", multi=True))
def test_extend_is_training_on(tmp_path, name, config):
    """The oracle, for every small corpus and configuration."""
    check_oracle(tmp_path, corpus(f"small/{name}"), config)


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", MEDIUM)
@pytest.mark.parametrize("config", MEDIUM_CONFIGS)
def test_extend_is_training_on_medium(tmp_path, name, config):
    """The oracle on the medium corpora (7-27 MB), 2,000 merges then 4,000."""
    # the full run: medium/en.txt (whitespace, gpt2: ~10 s each); the other 14 cases (5-80 s
    # each, 1-2 minutes for byte-level BPE on medium/zh.txt) with TOKCOLUMNAR_SLOW=1
    if (name, config) not in MEDIUM_FULL_RUN and not os.environ.get("TOKCOLUMNAR_SLOW"):
        pytest.skip("the medium oracle's 16 cases take ~6 minutes (CI's budget); set "
                    "TOKCOLUMNAR_SLOW=1")
    check_oracle(tmp_path, corpus(f"medium/{name}"), config, MEDIUM_K, MEDIUM_N)


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
    merges = assert_base_kept(out, base, 3000)
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
    (["--vocab-size", "900", "--a-file"], "not a tokcolumnar output directory, a "
     "tokenizer.json or a .tiktoken file"),
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
# the medium sizes (~1 minute: medium/en then medium/zh) with TOKCOLUMNAR_SLOW=1
@pytest.mark.parametrize("sizes", heavy([("small", 2000, 4000), ("medium", 8000, 16000)],
                                        full=lambda s: False, fast=lambda s: s[0] == "small"))
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


# -- a .tiktoken base ------------------------------------------------------------------------

GPT4_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                 "<|endofprompt|>"]


@pytest.mark.corpus
@pytest.mark.parametrize("preset", tiered([None, "gpt4"], lambda p: p is None))
def test_tiktoken_base_with_special_tokens(tmp_path, preset):
    """A byte-level run's tokenizer.tiktoken starts at the rank after its special tokens
    (ours come first): given back by name (`--special-tokens`), they get their ids again, and
    the extension is training on. The file records no preset: from a `--preset gpt4` run, every
    file is the direct run's but tokenizer.json's post-processor (the preset's
    `ByteLevel(trim_offsets=False)`, which only moves offsets), run.json and the merges'
    `origin`."""
    text = corpus("small/en_botchan.txt")
    options = ({"preset": "gpt4"} if preset else
               {"pattern": "cl100k", "initial_alphabet": list(BYTE_ALPHABET),
                "special_tokens": GPT4_SPECIALS[:2]})
    specials = GPT4_SPECIALS if preset else GPT4_SPECIALS[:2]
    size = 256 + len(specials)
    for out, n in (("base", size + 500), ("direct", size + 1200)):
        train(str(text), out_dir=tmp_path / out, vocab_size=n, **options)
    first = (tmp_path / "base" / "tokenizer.tiktoken").read_text(encoding="ascii").split()[1]
    assert int(first) == len(specials)  # ranks start after the special tokens
    proc = run_cli("train", str(text), "--extend", str(tmp_path / "base" / "tokenizer.tiktoken"),
                   "--pattern", "gpt4" if preset else "cl100k", "--special-tokens",
                   ",".join(specials), "--vocab-size", str(size + 1200), "--out",
                   str(tmp_path / "extended"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    direct, extended = tmp_path / "direct", tmp_path / "extended"
    if preset is None:
        assert_same_output(direct, extended)
        return
    a = json.loads((direct / "tokenizer.json").read_text(encoding="utf-8"))
    b = json.loads((extended / "tokenizer.json").read_text(encoding="utf-8"))
    assert a.pop("post_processor") == {"type": "ByteLevel", "add_prefix_space": True,
                                       "trim_offsets": False, "use_regex": True}
    assert b.pop("post_processor") is None
    assert a == b
    (direct / "tokenizer.json").unlink()
    (extended / "tokenizer.json").unlink()
    assert_same_output(direct, extended)


def _tiktoken_encoding(out: Path, pattern: str):
    tiktoken_load = pytest.importorskip("tiktoken.load")
    import tiktoken

    from tokcolumnar.text.patterns import PATTERNS

    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["tiktoken"]["pat_str"] == PATTERNS[pattern].regex
    ranks = tiktoken_load.load_tiktoken_bpe(str(out / "tokenizer.tiktoken"))
    return ranks, tiktoken.Encoding("t", pat_str=PATTERNS[pattern].regex,
                                    mergeable_ranks=ranks,
                                    special_tokens=run["tiktoken"]["special_tokens"])


@pytest.mark.corpus
@pytest.mark.parametrize("specials", tiered(["first", "after"], lambda s: s == "first"))
def test_tiktoken_base_on_another_corpus(tmp_path, specials):
    """An English byte-level BPE (o200k's pattern) as a .tiktoken file, extended with Chinese:
    tiktoken, loading the extension's tokenizer.tiktoken, encodes held-apart lines to our ids
    (and HF too); the base's ranks are unchanged. The special token is the base run's (id 0,
    the ranks starting at 1) or one the base file does not have (`after`: it gets the id after
    the highest rank, as tiktoken's encodings number theirs, and the new tokens come after it).
    """
    special = ["<|endoftext|>"]
    train(str(corpus("small/en_botchan.txt")), out_dir=tmp_path / "base", vocab_size=1000,
          pattern="o200k", initial_alphabet=list(BYTE_ALPHABET),
          special_tokens=special if specials == "first" else [])
    lines = corpus("small/zh_hongloumeng_300k.txt").read_text(encoding="utf-8").splitlines()
    held = lines[-50:]
    (tmp_path / "new.txt").write_text("\n".join(lines[:-50]) + "\n", encoding="utf-8")
    base_file = tmp_path / "base" / "tokenizer.tiktoken"
    out = tmp_path / "extended"
    proc = run_cli("train", str(tmp_path / "new.txt"), "--extend", str(base_file), "--pattern",
                   "o200k", "--special-tokens", special[0], "--vocab-size", "3000", "--out",
                   str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    base_ranks, base_enc = _tiktoken_encoding(tmp_path / "base", "o200k")
    ranks, enc = _tiktoken_encoding(out, "o200k")
    assert all(ranks[b] == r for b, r in base_ranks.items())
    top = max(base_ranks.values())
    special_id = 0 if specials == "first" else top + 1
    assert enc.encode("<|endoftext|>", allowed_special="all") == [special_id]
    assert len(ranks) + 1 == 3000 and min(r for r in ranks.values() if r > top) == top + 1 + (
        specials == "after")
    ours = Tokenizer.from_dir(out)
    got = ours.encode_ids([x + "\n" for x in held]).get_column("ids").to_list()
    assert got == enc.encode_ordinary_batch([x + "\n" for x in held])
    # (the English base spends a token per byte of Chinese; the extension far fewer)
    assert 2 * sum(map(len, got)) < sum(map(len, base_enc.encode_ordinary_batch(held)))
    check_outputs_in_hf(out, held)
    merges = pl.read_parquet(out / "merges.parquet")
    base_merges = pl.read_parquet(tmp_path / "base" / "merges.parquet")
    assert merges.head(base_merges.height).select("rank", "left", "right", "id").equals(
        base_merges.select("rank", "left", "right", "id"))
    assert set(merges.get_column("origin").head(base_merges.height)) == {"base"}


@pytest.fixture(scope="module")
def tiktoken_base(tmp_path_factory) -> Path:
    """A cl100k byte-level run's tokenizer.tiktoken (600 tokens of en_botchan.txt)."""
    out = tmp_path_factory.mktemp("tiktoken-base") / "base"
    train(str(corpus("small/en_botchan.txt")), out_dir=out, vocab_size=600, pattern="cl100k",
          initial_alphabet=list(BYTE_ALPHABET))
    return out / "tokenizer.tiktoken"


def _bad_tiktoken(tmp_path: Path, good: Path, kind: str) -> Path:
    """A .tiktoken base with one thing wrong (see test_bad_tiktoken_base_is_one_line)."""
    path = tmp_path / f"{kind}.tiktoken"
    lines = good.read_text(encoding="ascii").splitlines()
    if kind == "holes":  # ranks from 2: ids 0 and 1 are no token's
        lines = [f"{b} {int(r) + 2}" for b, r in (x.split() for x in lines)]
    elif kind == "bytes":  # byte 0 missing
        lines = [x for x in lines if x.split()[0] != "AA=="]
    elif kind == "not-base64":
        lines[3] = "%%% 3"
    elif kind == "not-bpe":  # a token of 3 bytes no two lower ranks join into
        lines.append(f"{base64.b64encode(b'qzx').decode()} {len(lines)}")
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


@pytest.mark.corpus
@pytest.mark.parametrize("kind,args,needle", [
    ("ok", [], "a .tiktoken base needs --pattern (its split pattern: gpt2, cl100k, o200k"),
    ("ok", ["--pattern", "cl100k", "--special-tokens", "<s>=3"],
     "--special-tokens '<s>=3': with a .tiktoken base special tokens are names, not NAME=ID"),
    ("holes", ["--pattern", "cl100k"], "no token has ids 0..1 (2 below the highest rank"),
])
def test_bad_tiktoken_base_is_one_line(tmp_path, tiktoken_base, kind, args, needle):
    text = corpus("small/en_botchan.txt")
    base = tiktoken_base if kind == "ok" else _bad_tiktoken(tmp_path, tiktoken_base, kind)
    proc = run_cli("train", str(text), "--extend", str(base), "--vocab-size", "1200", "--out",
                   str(tmp_path / "out"), *args)
    assert_clean_error(proc, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.corpus
@pytest.mark.parametrize("kind,options,needle", [
    ("ok", {"special_tokens": ["a"]}, "the special token 'a' is the token of rank"),
    ("ok", {"pattern": "qwen2", "normalizer": "nfc"},
     "--normalizer nfc contradicts the base, which has --normalizer none"),
    ("ok", {"preset": "gpt4"}, "--preset gpt4 contradicts the base, which has no --preset"),
    ("holes", {"special_tokens": ["<s>"]}, "no token has id 1 (1 below the highest rank"),
    ("bytes", {}, "1 of the 256 bytes have no rank (e.g. b'\\x00')"),
    ("not-base64", {}, "line 4 is not `base64 rank`"),
    ("not-bpe", {}, "(b'qzx') is not the join of two tokens of lower rank"),
])
def test_bad_tiktoken_base_refused(tmp_path, tiktoken_base, kind, options, needle):
    """(The same refusals from Python; the CLI's one line is checked above.)"""
    base = tiktoken_base if kind == "ok" else _bad_tiktoken(tmp_path, tiktoken_base, kind)
    with pytest.raises(TokcolumnarError) as e:
        train(str(corpus("small/en_botchan.txt")), extend=base, vocab_size=1200,
              out_dir=tmp_path / "out", **{"pattern": "cl100k", **options})
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.corpus
def test_tiktoken_base_from_python(tmp_path):
    """`train(..., extend="x.tiktoken", pattern=...)`, an alias of the pattern and a base whose
    byte-level alphabet is not numbered as ours (tiktoken's encodings give the 256 bytes ranks
    0..255 in byte order): the extension keeps every rank, takes the rebuilt path, and
    tiktoken encodes as we do."""
    text = corpus("small/ru_pushkin_300k.txt")
    train(str(text), out_dir=tmp_path / "ours", vocab_size=800, pattern="cl100k",
          initial_alphabet=list(BYTE_ALPHABET))
    ours = read_tiktoken(str(tmp_path / "ours" / "tokenizer.tiktoken"))
    # the same vocabulary with the bytes in byte order (merges keep their relative order)
    order = [bytes([b]) for b in range(256)] + sorted(
        (t for t in ours if len(t) > 1), key=ours.__getitem__)
    (tmp_path / "base.tiktoken").write_text(tiktoken_text({t: i for i, t in enumerate(order)}),
                                            encoding="ascii")
    result = train(str(text), out_dir=tmp_path / "out", extend=tmp_path / "base.tiktoken",
                   pattern="llama3", vocab_size=1500)
    assert result.config.pattern == "cl100k"
    assert result.vocab.height == 1500
    ranks, enc = _tiktoken_encoding(tmp_path / "out", "cl100k")
    assert all(ranks[t] == i for i, t in enumerate(order))
    lines = text.read_text(encoding="utf-8").splitlines(keepends=True)[:300]
    got = Tokenizer.from_dir(tmp_path / "out").encode_ids(lines).get_column("ids").to_list()
    assert got == enc.encode_ordinary_batch(lines)
