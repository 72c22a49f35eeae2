"""Corpus reading and counting: formats, compression, globs, Python objects, determinism."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import cli_env, command
from tests.support.corpora import corpus
from tokcolumnar import count_words, train
from tokcolumnar.cli import main
from tokcolumnar.corpus import counting, readers
from tokcolumnar.text.normalizers import NORMALIZER_NAMES, build_normalizer
from tokcolumnar.text.pretokenizers import PRETOKENIZER_NAMES, ByteLevel, build_pretokenizer

TEXT = "The cat sat.\nThe dog, the cat!\r\n\nnaïve café 東京\n"
LINES = TEXT.splitlines(keepends=True)


def words_dict(df: pl.DataFrame) -> dict[str, int]:
    return dict(zip(df["word"].to_list(), df["count"].to_list()))


WHITESPACE_WORDS = Counter(["The", "cat", "sat", ".", "The", "dog", ",", "the", "cat", "!",
                            "naïve", "café", "東京"])


def test_text_file_whitespace_counts(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text(TEXT, encoding="utf-8")
    w = count_words([str(f)])
    assert words_dict(w) == dict(WHITESPACE_WORDS)
    assert w["first_seen"].to_list() == sorted(w["first_seen"].to_list())
    assert w["word"].to_list()[:3] == ["The", "cat", "sat"]


def test_line_endings_are_kept(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text(TEXT, encoding="utf-8")
    w = count_words([str(f)], pre_tokenizer="none")
    assert words_dict(w) == dict(Counter(LINES))


def test_line_without_final_newline(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one two\nthree", encoding="utf-8")
    assert words_dict(count_words([str(f)], pre_tokenizer="none")) == {"one two\n": 1,
                                                                       "three": 1}


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_text(tmp_path, suffix):
    f = tmp_path / f"a.txt{suffix}"
    codec = "gzip" if suffix == ".gz" else "zstd"
    with pa.CompressedOutputStream(str(f), codec) as out:
        out.write(TEXT.encode())
    assert words_dict(count_words([str(f)])) == dict(WHITESPACE_WORDS)


def test_chunk_boundaries_do_not_split_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "CHUNK_BYTES", 7)
    f = tmp_path / "a.txt"
    f.write_text(TEXT * 5, encoding="utf-8")
    assert words_dict(count_words([str(f)], pre_tokenizer="none")) == {
        k: 5 * v for k, v in Counter(LINES).items()}


def test_directory_and_glob(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("alpha beta\n", encoding="utf-8")
    (d / "sub" / "b.txt").write_text("beta gamma\n", encoding="utf-8")
    with gzip.open(d / "c.txt.gz", "wt", encoding="utf-8") as g:
        g.write("gamma delta\n")
    want = {"alpha": 1, "beta": 2, "gamma": 2, "delta": 1}
    assert words_dict(count_words([str(d)])) == want
    assert words_dict(count_words([str(d / "**" / "*.txt*")])) == want
    assert words_dict(count_words([str(d / "*.txt")])) == {"alpha": 1, "beta": 1}


def test_parquet_jsonl_csv_columns(tmp_path):
    df = pl.DataFrame({"id": [1, 2, 3], "body": LINES[:3]})
    df.write_parquet(tmp_path / "t.parquet")
    df.write_ndjson(tmp_path / "t.jsonl")
    df.write_csv(tmp_path / "t.csv")
    want = words_dict(count_words(iter(LINES[:3])))
    for name in ("t.parquet", "t.jsonl", "t.csv"):
        assert words_dict(count_words([str(tmp_path / name)], column="body")) == want, name
    with gzip.open(tmp_path / "t.jsonl.gz", "wb") as g:
        g.write((tmp_path / "t.jsonl").read_bytes())
    assert words_dict(count_words([str(tmp_path / "t.jsonl.gz")], column="body")) == want
    assert words_dict(count_words([str(tmp_path / "t.csv")], column="body",
                                  format="csv")) == want


def test_python_objects():
    want = dict(WHITESPACE_WORDS)
    assert words_dict(count_words(pl.DataFrame({"text": LINES}))) == want
    assert words_dict(count_words(pl.DataFrame({"text": LINES}).lazy())) == want
    assert words_dict(count_words(pa.table({"text": LINES}))) == want
    assert words_dict(count_words(x for x in LINES)) == want


@pytest.mark.corpus
def test_count_then_train_from_counts_is_identical(tmp_path):
    f = corpus("small/en_botchan.txt")
    words = tmp_path / "words.parquet"
    assert main(["count", str(f), "--out", str(words), "--quiet"]) == 0
    assert main(["train", "--from-counts", str(words), "--out", str(tmp_path / "a"),
                 "--vocab-size", "3000", "--quiet"]) == 0
    assert main(["train", str(f), "--out", str(tmp_path / "b"), "--vocab-size", "3000",
                 "--quiet"]) == 0
    for name in ("merges.txt", "vocab.json", "tokenizer.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    w = pl.read_parquet(tmp_path / "b" / "words.parquet")
    assert w.columns == ["word", "count", "first_seen", "tokens", "ids"]
    assert (w["tokens"].list.join("") == w["word"]).all()


def digest(d: Path) -> dict[str, str]:
    return {n: hashlib.sha256((d / n).read_bytes()).hexdigest()
            for n in ("merges.txt", "vocab.json", "tokenizer.json", "merges.parquet",
                      "vocab.parquet", "words.parquet")}


@pytest.mark.corpus
def test_deterministic_across_runs_and_thread_counts(tmp_path):
    f = corpus("small/en_shakespeare_500k.txt")
    outs = []
    for i, threads in enumerate(["1", "2", "2"]):
        out = tmp_path / f"o{i}"
        subprocess.run(command("train", str(f), "--out", str(out), "--vocab-size", "4000",
                               "--quiet"), check=True, timeout=300,
                       env=cli_env({"POLARS_MAX_THREADS": threads}))
        outs.append(digest(out))
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.corpus
def test_train_from_python_matches_cli(tmp_path):
    f = corpus("small/en_taylorswift_wiki.txt")
    r = train([str(f)], vocab_size=2000)
    assert main(["train", str(f), "--out", str(tmp_path / "o"), "--vocab-size", "2000",
                 "--quiet"]) == 0
    m = pl.read_parquet(tmp_path / "o" / "merges.parquet")
    assert m.equals(r.merges)
    assert r.vocab.height == 2000


LINE_TEXT = st.text(alphabet=st.sampled_from(list("ab cÉé.\t東京 ,x1\u00a0")), max_size=12)


@given(st.lists(LINE_TEXT.map(lambda s: s + "\n"), min_size=1, max_size=40),
       st.sampled_from(PRETOKENIZER_NAMES), st.sampled_from(NORMALIZER_NAMES),
       st.integers(1, 4), st.integers(2, 3), st.integers(1, 40))
@settings(max_examples=40, deadline=None)
def test_unit_folding_equals_one_table(lines, pre, norm, lines_per_chunk, fold, batch_bytes):
    """Counting chunk by chunk, chunks concatenated up to COUNT_BYTES and partial tables
    folded per unit into a running table (`CountFolder`; both patched small so batches form
    and several units fold), gives the table of counting the whole text as one chunk: words,
    counts and first_seen."""
    normalizer, pretokenizer = build_normalizer(norm), build_pretokenizer(pre)
    chunks = [pl.Series("text", lines[i:i + lines_per_chunk])
              for i in range(0, len(lines), lines_per_chunk)]
    whole = pl.Series("text", lines)
    one, _ = counting.count_chunk(whole, normalizer, pretokenizer, 0)
    want = counting.sort_words(counting.map_words(one, pretokenizer).filter(
        pl.col("word").str.len_bytes() > 0))
    if want.height == 0:  # no words: count_chunks refuses the input
        return
    old = counting.FOLD, counting.COUNT_BYTES
    counting.FOLD, counting.COUNT_BYTES = fold, batch_bytes
    try:
        got = counting.count_chunks(chunks, normalizer, pretokenizer, first_seen=True)
    finally:
        counting.FOLD, counting.COUNT_BYTES = old
    assert got.equals(want)


# Whitespace of every kind the chunk cut must handle: ASCII space and LF (the cut points),
# CR / CRLF, tab, no-break space, ideographic space, line separator, runs and empty lines.
CHUNK_TEXT = st.lists(st.sampled_from(
    [" ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "\u2028", "\x0b", "a", "b", "É",
     "東", ".", ",", "'", "1", "-", "\ufdd0"]), max_size=30).map("".join)
CHUNKED = [name for name in PRETOKENIZER_NAMES
           if build_pretokenizer(name).chunk_expr(pl.col("t")) is not None]


def test_chunked_pretokenizers():
    """The chunk path is on for the pre-tokenizers that drop ASCII spaces and line feeds, and
    for byte-level (cut before spaces)."""
    assert set(CHUNKED) == {"whitespace", "whitespace-split", "subword-nmt", "byte-level"}


@given(st.lists(CHUNK_TEXT, min_size=1, max_size=12),
       st.sampled_from([*CHUNKED, "byte-level add_prefix_space"]),
       st.sampled_from([None, *NORMALIZER_NAMES]), st.integers(0, 50))
@settings(max_examples=80, deadline=None)
def test_chunk_decomposition_equals_direct_regex(texts, pre, norm, offset):
    """Counting through the chunks (split on spaces and line feeds, regex on the distinct
    chunks, positions from the chunks' piece counts) gives the table of running the
    pre-tokenizer's regex over the whole texts: words, counts, first_seen and the number of
    pre-tokens; with and without positions, null texts included."""
    pretokenizer = (ByteLevel(add_prefix_space=True) if pre == "byte-level add_prefix_space"
                    else build_pretokenizer(pre))
    normalizer = build_normalizer(norm) if norm else None
    series = pl.Series("text", [*texts, None], dtype=pl.String)
    col = pl.col("text") if normalizer is None else normalizer.expr(pl.col("text"))
    direct = (series.to_frame().select(pretokenizer.split_expr(col).alias("word"))
              .to_series().explode().drop_nulls().to_list())
    want_first: dict[str, int] = {}
    for position, word in enumerate(direct):
        want_first.setdefault(word, offset + position)
    part, n = counting.count_chunk(series, normalizer, pretokenizer, offset)
    assert n == len(direct)
    assert dict(zip(part["word"], part["count"])) == Counter(direct)
    assert dict(zip(part["word"], part["first_seen"])) == want_first
    plain, n_plain = counting.count_chunk(series, normalizer, pretokenizer)
    assert n_plain == len(direct)
    assert dict(zip(plain["word"], plain["count"])) == Counter(direct)
    assert plain.columns == ["word", "count"]


def test_distinct_codes_any_numbering():
    """Codes in order of appearance are kept; other codes (gaps, any order) are renumbered
    0..D-1; each code's first index comes with them."""
    def distinct(values):
        codes, first = counting.distinct_codes(np.array(values, dtype=np.uint32))
        return codes.tolist(), first.tolist()

    assert distinct([0, 1, 0, 2, 1, 3]) == ([0, 1, 0, 2, 1, 3], [0, 1, 3, 5])
    assert distinct([2, 0, 0, 1, 2]) == ([2, 0, 0, 1, 2], [1, 3, 0])
    assert distinct([0, 2, 1]) == ([0, 2, 1], [0, 2, 1])
    assert distinct([7, 3, 7, 9]) == ([1, 0, 1, 2], [1, 0, 3])
    assert distinct([]) == ([], [])


def test_prefetched_keeps_order_raises_in_order_and_stops():
    """The items come in order; an error of the drawing comes after the items before it; a
    caller that stops early leaves no thread drawing."""
    import threading

    assert list(counting.prefetched(iter(range(50)))) == list(range(50))

    def failing():
        yield from range(3)
        raise ValueError("drawn 3")

    got: list[int] = []
    with pytest.raises(ValueError, match="drawn 3"):
        for value in counting.prefetched(failing()):
            got.append(value)
    assert got == [0, 1, 2]

    drawn: list[int] = []

    def endless():
        i = 0
        while True:
            drawn.append(i)
            yield i
            i += 1

    stream = counting.prefetched(endless())
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert not any(t.name == "tokcolumnar-reader" for t in threading.enumerate())
    assert len(drawn) <= 6  # the three taken, one waiting, one blocked at most


@pytest.mark.corpus
@pytest.mark.parametrize("pre", ["whitespace", "byte-level", "bert"])
@pytest.mark.parametrize("large", [False, True])
def test_two_batches_at_once_same_table(monkeypatch, pre, large):
    """Two batches counted at once (folded in order with their positions shifted; with and
    without a large count's heap) give the table of the one-batch count: words, counts,
    first_seen."""
    from tokcolumnar import malloc

    text = corpus("small/en_botchan.txt").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    chunks = [pl.Series("text", lines[i:i + 50]) for i in range(0, len(lines), 50)]
    pretokenizer = build_pretokenizer(pre)
    monkeypatch.setattr(counting, "COUNT_BYTES", 8000)  # many batches
    monkeypatch.setattr(counting, "FOLD", 3)
    monkeypatch.setattr(malloc, "large_count", large)
    monkeypatch.setattr(counting, "COUNT_BATCHES", 1)
    one = counting.count_chunks(chunks, None, pretokenizer, first_seen=True)
    monkeypatch.setattr(counting, "COUNT_BATCHES", 2)
    two = counting.count_chunks(chunks, None, pretokenizer, first_seen=True)
    assert two.equals(one)
    assert one.height > 1000


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_ordered_map_keeps_order_and_raises_in_order(workers):
    """Results come in the items' order whatever finishes first; an error is raised when its
    item's turn comes, after the results before it, and no later item is drawn past the
    window."""
    import time

    drawn: list[int] = []

    def items():
        for i in range(10):
            drawn.append(i)
            yield i

    def slow_first(i: int) -> int:
        if i % 3 == 0:
            time.sleep(0.01)  # earlier items finish last
        return i * i

    assert list(counting.ordered_map(slow_first, items(), workers)) == [i * i for i in range(10)]

    def fail_at_4(i: int) -> int:
        if i == 4:
            raise ValueError("item 4")
        return i

    drawn.clear()
    got: list[int] = []
    with pytest.raises(ValueError, match="item 4"):
        for value in counting.ordered_map(fail_at_4, items(), workers):
            got.append(value)
    assert got == [0, 1, 2, 3]
    assert max(drawn) < 4 + workers
