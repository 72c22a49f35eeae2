"""The columnar Unigram trainer (tokcolumnar/training/unigram.py) against the plain-Python oracle
(tests/support/unigram_oracle.py, itself equal to spm_train: tests/models/test_unigram_oracle.py)
and, on real corpora, against SentencePiece directly: the same pieces, order and float32
scores."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models.test_unigram_oracle import corpora, vocab_for
from tests.support import unigram_oracle as uo
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.spm_reference import spm_unigram
from tokcolumnar.training import unigram as ug
from tokcolumnar.training import unigram_lattice as lattice


def columnar(lines: list[str], vocab: int, threads: int) -> list[tuple[str, float]]:
    sentences = ug.load_sentences(pl.Series(lines, dtype=pl.String))
    result = ug.train_unigram(sentences, None,
                              ug.UnigramOptions(vocab_size=vocab, num_threads=threads,
                                                hard_vocab_limit=False))
    return list(zip(result.pieces, result.scores.tolist()))


def oracle_sentences(lines: list[str]) -> list[str]:
    sentences, _ = uo.load_sentences(lines, uo.Options(vocab_size=10**9))
    return sentences


@examples(0.5)
@given(st.lists(st.text(alphabet="ab ▅", max_size=6), max_size=12))
def test_load_sentences_as_sentencepiece(lines: list[str]) -> None:
    got = ug.load_sentences(pl.Series(lines, dtype=pl.String)).to_list()
    # the oracle replaces rare characters too: compare before that, with every character kept
    expected = [s for s, _ in oracle_sentences(lines)] if got else []
    assert [s.replace("▅", "") for s in got] == [s.replace("▅", "") for s in expected]


@examples(0.5)
@given(st.lists(st.sampled_from(list("<>/unks0x4Aa ") + ["<unk>", "<s>", "</s>", "<0x4A>"]),
                max_size=20).map("".join))
def test_meta_pieces_in_the_text_become_the_boundary_as_sentencepiece(text: str) -> None:
    """`<unk>`, `<s>`, `</s>` (and the byte pieces with byte fallback) written in a line are
    replaced by U+001F, the longest match at each position first, as the oracle does."""
    meta = (*ug.META_PIECES, "<0x4A>", "<0x4A")  # a piece that is a prefix of another
    got = pl.select(ug.replace_meta_pieces(pl.lit(text), meta)).item()
    assert got == uo.replace_meta_pieces(text, meta)


#: Lines with SentencePiece's meta pieces written in them (medium/en has `<unk>` on 8,183 of its
#: lines): spm_train trains as if each one were a boundary character, not text.
META_LINES = ["the <unk> cat sat on the <s> mat", "a <unk> dog</s> ran <unk>",
              "<s>hello world</s>", "the cat <unk><unk> the dog <0x41>"] * 3 + [
                  "cats and <0x41>dogs and <unk> mice", "hello <s> there"]


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_meta_pieces_in_the_text_train_as_sentencepiece(byte_fallback: bool) -> None:
    """Without the replacement, `▁<`, `>` and the like are trained as pieces and the scores
    differ (medium/en at 8,000: a piece-set Jaccard of 0.957 against spm_train)."""
    from tokcolumnar.unigram_export import byte_pieces

    expected = spm_unigram(META_LINES, 300 if byte_fallback else 40, num_threads=1,
                           byte_fallback=byte_fallback)
    meta = list(ug.META_PIECES) + (byte_pieces() if byte_fallback else [])
    result = ug.train_unigram(
        ug.load_sentences(pl.Series(META_LINES), meta_pieces=meta), None,
        ug.UnigramOptions(vocab_size=300 if byte_fallback else 40, num_threads=1,
                          hard_vocab_limit=False, meta_pieces=len(meta)))
    assert list(zip(result.pieces, result.scores.tolist())) == expected
    oracle = uo.train(META_LINES, uo.Options(vocab_size=40, num_threads=1)).pieces
    if not byte_fallback:
        assert oracle == expected


@examples(0.5)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 10, width=32)), max_size=40),
       st.sampled_from([0, 2, 64]))
def test_sequential_f32_sums(pairs: list[tuple[int, float]], tail: int) -> None:
    """Each key's float32 sum in order, whether its slices run as NumPy steps, as Python
    floats (`_sum_per_key`, slices of fewer than `CHAIN_TAIL` values) or both."""
    keys = np.array([k for k, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64) / 3  # doubles, not floats
    expected = [0.0] * 4
    for k, v in zip(keys.tolist(), values.tolist()):
        expected[k] = uo.f32(expected[k] + v)
    old = lattice.CHAIN_TAIL
    lattice.CHAIN_TAIL = tail
    try:
        assert ug.sequential_f32_sums(keys, values, 4).tolist() == expected
    finally:
        lattice.CHAIN_TAIL = old


@examples(0.5)
@given(corpora(), st.integers(0, 25), st.sampled_from([1, 3, 16]))
def test_columnar_matches_oracle(lines: list[str], extra: int, threads: int) -> None:
    vocab = vocab_for(lines, extra)
    expected = uo.train(lines, uo.Options(vocab_size=vocab, num_threads=threads)).pieces
    assert columnar(lines, vocab, threads) == expected


def test_every_longer_substring_invalid() -> None:
    """Words whose every substring from some length on is no valid piece (`a,`: Latin then
    Common): the seeds stop at that length, as SentencePiece's (and the oracle's) do."""
    lines = ["a, b, c,", "b, a,", "c, c, a,"]
    vocab = vocab_for(lines, 2)
    expected = uo.train(lines, uo.Options(vocab_size=vocab, num_threads=1)).pieces
    assert columnar(lines, vocab, 1) == expected


def test_too_small_vocabulary() -> None:
    with pytest.raises(ug.UnigramError, match="smaller than the required characters"):
        columnar(["abcdef ghij"], 8, 1)


REAL = [("small/en_botchan.txt", 300, 400, 16), ("small/ja_wagahai_300k.txt", 30, 1000, 16),
        ("small/ar_tashkeela_plain_300k.txt", 100, 500, 4)]


@pytest.mark.corpus
@pytest.mark.parametrize("rel,lines,vocab,threads", REAL)
def test_columnar_matches_sentencepiece(rel: str, lines: int, vocab: int, threads: int) -> None:
    with open(corpus(rel), encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(lines), f)]
    expected = spm_unigram(text, vocab, num_threads=threads, hard_vocab_limit=True)
    assert columnar(text, vocab, threads) == expected


# --- the command line --------------------------------------------------------------------------

CLI_LINES = [f"line {i} the quick brown fox {'jumps' if i % 2 else 'sleeps'} over dog {i % 7}"
             for i in range(60)] + ["  Über   naïve café  ", "", "x"]


def test_cli_train_unigram(tmp_path) -> None:
    """`train --model unigram`: the pieces and scores of spm_train (identity normalization, its
    16 threads) in vocab.parquet; tokenizer.json and tokenizer.model encode alike."""
    import sentencepiece as spm
    from tokenizers import Tokenizer as HFTokenizer

    from tests.support.cli import run_cli

    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    out = tmp_path / "out"
    proc = run_cli("train", str(src), "--model", "unigram", "--vocab-size", "45", "--out",
                   str(out))
    assert proc.returncode == 0, proc.stderr
    vocab = pl.read_parquet(out / "vocab.parquet")
    assert vocab["token"].to_list()[:3] == ["<unk>", "<s>", "</s>"]
    got = list(zip(vocab["token"].to_list()[3:], vocab["score"].to_list()[3:]))
    assert got == spm_unigram(CLI_LINES, 45, num_threads=16, hard_vocab_limit=True)
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    for line in CLI_LINES + ["the fox sleeps", "Zürich  3"]:
        assert hf.encode(line).ids == sp.encode(line)
    rounds = pl.read_parquet(out / "rounds.parquet")
    assert rounds["after_pruning"].to_list()[-1] <= int(45 * 1.1)


@pytest.mark.parametrize("args,needle", [
    (["--min-frequency", "2"], "--min-frequency does not apply to --model unigram"),
    (["--pre-tokenizer", "byte-level"], "--pre-tokenizer metaspace"),
    pytest.param(["--engine", "duckdb"], "Polars engine only", marks=pytest.mark.duckdb),
    (["--vocab-size", "5"], "smaller than the required characters"),
    (["--vocab-size", "5000"], "too high for this corpus: training finds 48 pieces")])
def test_cli_unigram_refusals(tmp_path, args: list[str], needle: str) -> None:
    from tests.support.cli import assert_clean_error, run_cli

    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    proc = run_cli("train", str(src), "--model", "unigram", "--vocab-size", "45", *args,
                   "--out", str(tmp_path / "out"))
    assert_clean_error(proc, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.duckdb
def test_cli_sql_queries_unigram_tables(tmp_path) -> None:
    """The pruning rounds and the scores are tables `sql` can query."""
    from tests.support.cli import run_cli

    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in CLI_LINES), encoding="utf-8")
    out = tmp_path / "out"
    assert run_cli("train", str(src), "--model", "unigram", "--vocab-size", "45", "--out",
                   str(out)).returncode == 0
    proc = run_cli("sql", str(out), "select count(*) as n, min(after_pruning) as last "
                   "from rounds", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rounds = pl.read_parquet(out / "rounds.parquet")
    assert proc.stdout.split() == ["n,last", f"{rounds.height},{rounds['after_pruning'].min()}"]
    proc = run_cli("sql", str(out), "select token from vocab where kind = 'piece' "
                   "order by score desc, token limit 1", "--format", "csv")
    vocab = pl.read_parquet(out / "vocab.parquet")
    assert proc.stdout.split() == ["token", vocab["token"][3]]


@pytest.mark.corpus
@pytest.mark.slow
def test_columnar_matches_sentencepiece_on_medium() -> None:
    """A medium corpus (the first 12,000 lines of medium/en) with 8,000 pieces and
    SentencePiece's default 16 threads: the same pieces and scores (~1 min on two cores)."""
    with open(corpus("medium/en.txt"), encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(12_000), f)]
    expected = spm_unigram(text, 8000, num_threads=16, hard_vocab_limit=True)
    assert columnar(text, 8000, 16) == expected


@given(st.lists(st.integers(0, (1 << 34)), max_size=300), st.sampled_from([1 << 8, 1 << 20,
                                                                          1 << 34]))
def test_stable_argsort_is_numpys(values: list[int], top: int) -> None:
    """The radix passes give NumPy's stable permutation (ties keep their order), for keys of
    up to 16 bits, up to 32 bits, and beyond (NumPy's own sort)."""
    key = np.array([v % top for v in values], dtype=np.int64)
    assert ug.stable_argsort(key).tolist() == np.argsort(key, kind="stable").tolist()


@given(st.lists(st.text(st.sampled_from(["▁", "a", "é", "東", "\x00", " ", "\x1f"]), max_size=12),
                max_size=8))
def test_split_words_is_the_word_regex(sentences):
    """`split_words` (a split at a NUL put before each `▁`) gives each sentence's words as the
    regex `WORD_RE` does: a word at the start and before each `▁`, none empty; the regex
    itself where a sentence holds a NUL."""
    series = pl.Series("sentence", sentences, dtype=pl.String)
    want = [re.findall(ug.WORD_RE, s) for s in sentences]
    assert ug.split_words(series).to_list() == want
    assert ug.split_words(series.filter(~series.str.contains("\x00", literal=True))).to_list() \
        == [w for w, s in zip(want, sentences) if "\x00" not in s]


@examples(0.5)
@given(corpora(), st.sampled_from([1, 3, 16]))
def test_expected_counts_the_same_before_and_after_release_begin(lines, threads):
    """The E-step gives the same float32 counts from a base that holds its begin order and
    from one released (piece 0 from its seed's chain nodes and the unknown slots by code), with
    every piece present and with some gone (the unknown slots of the characters gone present)."""
    sentences = ug.load_sentences(pl.Series(lines, dtype=pl.String))
    if len(sentences) == 0:
        return
    counts = np.ones(len(sentences), np.int64)
    opts = ug.UnigramOptions(vocab_size=40, num_threads=threads, hard_vocab_limit=False)
    seeds = ug.seed_pieces(sentences, counts, opts)
    words = ug.word_tokens(sentences, counts).group_by("word", maintain_order=True).agg(
        pl.col("count").sum())
    trie = ug.SeedTrie.build(seeds["piece"])
    wcounts = words["count"].to_numpy()
    n = len(seeds)
    models = [ug._Model(np.arange(n), seeds["score"].to_numpy()),
              ug._Model(np.arange(0, n, 2), seeds["score"].to_numpy()[::2])]
    held = ug.LatticeBase.build(words["word"], trie)
    released = ug.LatticeBase.build(words["word"], trie)
    released.release_begin(threads)
    assert len(released.begin.code) == 0
    for model in models:
        assert np.array_equal(ug.e_step(model, n, held, wcounts, threads),
                              ug.e_step(model, n, released, wcounts, threads))
