"""Counting in ordered units (`corpus.units`, no Ray): the words table — counts and
first_seen — is the single-machine count's, whatever the cut into units, for text, JSONL and
Parquet inputs, compressed ones and lists of mixed inputs."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.corpora import corpus
from tests.support.examples import examples
from tokcolumnar import count_words
from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus.sources import expand_inputs, file_digests, run_scope
from tokcolumnar.corpus.units import count_units, plan_units
from tokcolumnar.errors import TokcolumnarError

PRETOKENIZERS = ["whitespace", "byte-level", "metaspace", "bert", "none"]


def unit_count(inputs: list[str], unit_bytes: int, **options) -> pl.DataFrame:
    units = plan_units(inputs, options.get("format"), unit_bytes=unit_bytes)
    return count_units(units, TrainConfig(**options, show_progress=False))


def assert_same_as_single(inputs: list[str], unit_bytes: int, **options) -> int:
    """Compare with count_words (the same words table, or the same error); returns the number
    of units."""
    try:
        expected = count_words(inputs, show_progress=False, **options)
    except TokcolumnarError as e:
        with pytest.raises(TokcolumnarError, match=re.escape(str(e))):
            unit_count(inputs, unit_bytes, **options)
        return len(plan_units(inputs, options.get("format"), unit_bytes=unit_bytes))
    got = unit_count(inputs, unit_bytes, **options)
    assert got.schema == expected.schema
    assert got.equals(expected)
    return len(plan_units(inputs, options.get("format"), unit_bytes=unit_bytes))


# Lines with runs of spaces, \r, empty lines, non-ASCII and a line without its newline.
LINE = st.text(alphabet="ab é文 \r.", min_size=0, max_size=12)


@examples(1)
@given(lines=st.lists(LINE, min_size=0, max_size=30), last_newline=st.booleans(),
       unit_bytes=st.integers(1, 40), pre=st.sampled_from(PRETOKENIZERS))
def test_text_units_match_single_count(tmp_path_factory, lines, last_newline, unit_bytes, pre):
    text = "\n".join(lines) + ("\n" if last_newline else "")
    f = tmp_path_factory.mktemp("u") / "a.txt"
    f.write_bytes(text.encode())
    assert_same_as_single([str(f)], unit_bytes, pre_tokenizer=pre)


@examples(0.5)
@given(rows=st.lists(st.one_of(st.none(), LINE), min_size=1, max_size=30),
       unit_bytes=st.integers(1, 200), row_group=st.integers(1, 7),
       pre=st.sampled_from(PRETOKENIZERS))
def test_jsonl_and_parquet_units_match_single_count(tmp_path_factory, rows, unit_bytes,
                                                    row_group, pre):
    d = tmp_path_factory.mktemp("u")
    jsonl, parquet = d / "a.jsonl", d / "b.parquet"
    jsonl.write_text("".join(json.dumps({"n": i, "text": r}) + "\n" for i, r in enumerate(rows)))
    pq.write_table(pa.table({"text": pa.array(rows, pa.string())}), parquet,
                   row_group_size=row_group)
    assert_same_as_single([str(jsonl), str(parquet), str(jsonl)], unit_bytes, pre_tokenizer=pre)


def test_first_seen_in_a_later_unit_is_its_corpus_position(tmp_path):
    """An oracle independent of the program: whitespace-separated words of plain ASCII, so the
    positions are Python's str.split positions."""
    text = "a b c\n" * 50 + "d a e\n" + "f g\n" * 30
    f = tmp_path / "a.txt"
    f.write_text(text)
    units = plan_units([str(f)], unit_bytes=64)
    assert len(units) > 5
    got = count_units(units, TrainConfig(pre_tokenizer="whitespace-split"))
    words = text.split()
    first = {w: words.index(w) for w in set(words)}
    assert dict(zip(got["word"], got["first_seen"])) == first
    assert dict(zip(got["word"], got["count"])) == {w: words.count(w) for w in first}


def test_units_are_line_aligned_byte_ranges_and_row_groups(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 100 + b"\n" + b"y\n" * 10 + b"z")
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": ["a"] * 10}), p, row_group_size=3)
    g = tmp_path / "c.txt.gz"
    g.write_bytes(gzip.compress(b"a\n" * 100))
    units = plan_units([str(f), str(p), str(g)], unit_bytes=4)
    assert [u.index for u in units] == list(range(len(units)))
    assert all(len(u.sources) == 1 for u in units)  # no file small enough to pack
    parts = [u.sources[0] for u in units]
    ranges = [s.byte_range for s in parts if s.path == f]
    assert ranges[0] == (0, 101)  # the long line stays whole
    data = f.read_bytes()
    assert all(data[b - 1:b] == b"\n" for _, b in ranges[:-1])  # cut after a line end
    assert ranges[-1] == (len(data) - 1, len(data))  # the last line, without its newline
    assert [a for a, _ in ranges[1:]] == [b for _, b in ranges[:-1]]
    assert [s.row_groups for s in parts if s.path == p] == [(0,), (1,), (2,), (3,)]
    assert [s.byte_range for s in parts if s.path == g] == [None]


@examples(0.5)
@given(files=st.lists(st.tuples(st.lists(LINE, max_size=6), st.booleans()), min_size=1,
                      max_size=12),
       unit_bytes=st.integers(1, 120), pre=st.sampled_from(PRETOKENIZERS))
def test_packed_small_files_match_single_count(tmp_path_factory, files, unit_bytes, pre):
    """Small files (empty ones, last lines without a newline) packed into units: the words
    table of the files read one by one; a unit's sources are consecutive files in order."""
    d = tmp_path_factory.mktemp("p")
    for i, (lines, last_newline) in enumerate(files):
        text = "\n".join(lines) + ("\n" if last_newline and lines else "")
        (d / f"f{i:03d}.txt").write_bytes(text.encode())
    units = plan_units([str(d)], unit_bytes=unit_bytes)
    # (a file larger than a unit is several units: its path repeats)
    assert list(dict.fromkeys(s.path for u in units for s in u.sources)) == sorted(d.iterdir())
    assert all(s.byte_range is None for u in units if len(u.sources) > 1 for s in u.sources)
    assert_same_as_single([str(d)], unit_bytes, pre_tokenizer=pre)


def test_many_small_files_are_few_units_with_the_first_seen_of_the_text(tmp_path):
    """An oracle independent of the program: 300 files of ASCII words (some empty, some
    without a last newline, some gzipped), counted in packed units: counts and first_seen
    are those of Python's str.split over the files' text in order."""
    texts = []
    for i in range(300):
        text = "" if i % 37 == 0 else " ".join(f"w{(i * 7 + k) % 101}" for k in range(i % 9 + 1))
        text += "\n" if i % 3 else ""
        path = tmp_path / f"f{i:03d}.txt"
        if i % 50 == 7:
            path = path.with_name(path.name + ".gz")
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        texts.append(text)
    units = plan_units([str(tmp_path)], unit_bytes=2_000)
    assert 2 < len(units) < 10
    assert [s.path.name for u in units for s in u.sources] == sorted(
        p.name for p in tmp_path.iterdir())
    got = count_units(units, TrainConfig(pre_tokenizer="whitespace-split"))
    words = [w for text in texts for w in text.split()]
    first = {w: words.index(w) for w in set(words)}
    assert dict(zip(got["word"], got["first_seen"])) == first
    assert dict(zip(got["word"], got["count"])) == {w: words.count(w) for w in first}


def test_a_large_file_among_small_ones_keeps_its_ranges(tmp_path):
    """Small files before and after a large one pack around it; the large one's byte ranges
    are units of their own; the Parquet and JSONL files pack with the text files."""
    (tmp_path / "a.txt").write_text("one two\n")
    (tmp_path / "b.txt").write_text("three\n" * 100)  # 600 bytes: ranges of ~100
    pq.write_table(pa.table({"text": ["four five", None, "six"]}), tmp_path / "c.parquet")
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "seven"}) + "\n")
    (tmp_path / "e.txt").write_text("")
    units = plan_units([str(tmp_path)], unit_bytes=100)
    names = [[s.path.name for s in u.sources] for u in units]
    assert names[0] == ["a.txt"] and names[1][0] == "b.txt"
    assert all(n == ["b.txt"] for n in names[1:7])
    assert [n for pack in names[7:] for n in pack] == ["c.parquet", "d.jsonl", "e.txt"]
    assert len(units) - 7 < 3  # packed
    assert_same_as_single([str(tmp_path)], 100, pre_tokenizer="whitespace")


def test_a_range_reports_invalid_utf8_at_its_file_offset(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"ok line\n" * 20 + b"bad \xff\n")
    with pytest.raises(TokcolumnarError, match="invalid UTF-8 at byte 164"):
        unit_count([str(f)], 16)


@pytest.mark.corpus
@pytest.mark.parametrize("pre", [pytest.param(p, marks=pytest.mark.slow) if p != "whitespace"
                                 else p for p in ["whitespace", "byte-level", "metaspace", "bert"]])
def test_real_corpora_in_units_match_single_count(tmp_path, pre):
    en = corpus("small/en_botchan.txt")
    ja = corpus("small/ja_wagahai_300k.txt")
    zh = corpus("small/zh_hongloumeng_300k.txt")
    gz = tmp_path / "en.txt.gz"
    gz.write_bytes(gzip.compress(en.read_bytes()))
    lines = ja.read_text().splitlines(keepends=True)
    parquet, jsonl = tmp_path / "ja.parquet", tmp_path / "zh.jsonl"
    pq.write_table(pa.table({"text": lines}), parquet, row_group_size=500)
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n"
                             for t in zh.read_text().splitlines(keepends=True)))
    inputs = [str(en), str(parquet), str(gz), str(jsonl), str(Path(ja))]
    n_units = assert_same_as_single(inputs, 20_000, pre_tokenizer=pre)
    assert n_units > 30


def test_a_small_file_with_invalid_utf8_among_packed_ones_is_reported_as_read_alone(tmp_path):
    """A small file read whole (`units._small_text`) that is not UTF-8 is read again by the
    reader, whose error names the file and byte, as the single count's does."""
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text(f"word{i} other\n")
    (tmp_path / "f2.txt").write_bytes(b"fine\nbroken \xff here\n")
    with pytest.raises(TokcolumnarError, match=re.escape(f"{tmp_path / 'f2.txt'}: invalid "
                                                         "UTF-8 at byte 12")):
        unit_count([str(tmp_path)], 1000, pre_tokenizer="whitespace")
    assert_same_as_single([str(tmp_path)], 1000, pre_tokenizer="whitespace")


@pytest.mark.parametrize("pre", ["whitespace", "byte-level"])
def test_a_small_file_that_grew_since_the_plan_is_read_to_its_end(tmp_path, pre):
    """Units keep each file's size as listed; a file that grew since is read whole as it is
    now (by the reader), not cut at its listed size: the words of the files as read."""
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text(f"alpha{i} beta\n")
    units = plan_units([str(tmp_path)], unit_bytes=1000)
    assert len(units) == 1 and len(units[0].sources) == 4
    with open(tmp_path / "f1.txt", "a") as f:
        f.write("grown words here\n" * 3 + "last")
    got = count_units(units, TrainConfig(pre_tokenizer=pre, show_progress=False))
    assert got.equals(count_words([str(tmp_path)], pre_tokenizer=pre, show_progress=False))
    assert dict(zip(got["word"], got["count"])).get("words" if pre == "whitespace"
                                                    else "Ġwords") == 3


def test_the_reader_leaves_the_digests_of_the_small_files_it_read_whole(tmp_path):
    """Within a run scope, the count of packed small files leaves each file's digests (the
    fingerprints' hashes) as `file_digests` would read them: a file changed after the count
    still has the digests of the bytes the count read, equal to hashlib's."""
    texts = [b"", b"one two\n", b"no newline", "é 文\n".encode() * 50]
    for i, data in enumerate(texts):
        (tmp_path / f"f{i}.txt").write_bytes(data)
    units = plan_units([str(tmp_path)], unit_bytes=10_000)
    assert len(units) == 1
    with run_scope():
        count_units(units, TrainConfig(pre_tokenizer="whitespace", show_progress=False))
        (tmp_path / "f1.txt").write_bytes(b"ONE TWO\n")  # same size, after the count
        recorded = [file_digests(s) for s in expand_inputs([str(tmp_path)])]
    for digests, data in zip(recorded, texts):
        both = hashlib.blake2b(digest_size=16)
        both.update(data)
        assert (digests.size, digests.head_sha256, digests.head_tail_blake2b) == (
            len(data), hashlib.sha256(data).hexdigest(), both.hexdigest())
    assert file_digests(expand_inputs([str(tmp_path)])[1]).head_sha256 == hashlib.sha256(
        b"ONE TWO\n").hexdigest()  # outside the scope: read again
