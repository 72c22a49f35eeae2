"""The DuckDB engine never drops data: on every input the Polars engine accepts it gives the
same words, byte for byte, and it refuses the others with the same one-line error. These are
the inputs DuckDB's own readers got wrong (read_csv for compressed text: truncated files read
in part, control characters and lone CRs, lines over 2 MB; read_json: non-string values)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from unittest import mock

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import assert_clean_error, run_cli
from tests.support.engines import duckdb_count, polars_count, train_duckdb
from tests.support.examples import examples
from tests.support.markers import SLOW_ONLY, tiered
from tokcolumnar.config import TrainConfig
from tokcolumnar.corpus import readers
from tokcolumnar.duckdb import count as duckdb_count_module
from tokcolumnar.duckdb.crosscheck import compare_results, crosscheck
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.training.pipeline import train

pytestmark = pytest.mark.duckdb
PRETOKENIZERS = ["whitespace", "none", "byte-level"]


def compress(data: bytes, codec: str) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    out = pa.BufferOutputStream()
    with pa.CompressedOutputStream(out, codec) as z:
        z.write(data)
    return out.getvalue().to_pybytes()


def write(path: Path, data: bytes) -> str:
    ext = path.suffix
    codec = {".gz": "gzip", ".zst": "zstd", ".bz2": "bz2"}.get(ext)
    path.write_bytes(compress(data, codec) if codec else data)
    return str(path)


def same_words(path: str, **options) -> pl.DataFrame:
    """The words table of both engines, asserted identical."""
    cfg = TrainConfig(show_progress=False, **options)
    want = polars_count(path, cfg)
    got = duckdb_count(path, cfg)
    assert got.equals(want), (path, options)
    return want


def same_error(path: str, **options) -> str:
    """Both engines refuse, with the same message."""
    cfg = TrainConfig(show_progress=False, **options)
    with pytest.raises(TokcolumnarError) as polars_error:
        polars_count(path, cfg)
    with pytest.raises(TokcolumnarError) as duckdb_error:
        duckdb_count(path, cfg)
    assert str(duckdb_error.value) == str(polars_error.value)
    return str(polars_error.value)


def lines_with_ends(data: bytes) -> Counter:
    """The `none` pre-tokenizer's words, computed independently: lines split at LF only."""
    return Counter(x.decode() for x in re.findall(rb"[^\n]*\n|[^\n]+$", data))


def as_dict(words: pl.DataFrame) -> dict[str, int]:
    return dict(zip(words["word"], words["count"]))


TEXT = ("Hello, world! The quick brown fox.\n" * 3000 + "naïve café 東京 x\n" * 2000).encode()


@pytest.mark.parametrize("ext", tiered(["txt.gz", "txt.zst", "jsonl.gz", "csv.zst"],
                                        lambda e: e == "txt.gz"))
def test_truncated_compressed_input_is_refused_by_both(tmp_path, ext):
    """A truncated .gz / .zst (DuckDB's read_csv with strict_mode=false read the first 56% and
    exited 0): both engines exit 2 with the same single line."""
    if ext.startswith("jsonl"):
        data = "".join(json.dumps({"text": x}) + "\n"
                       for x in TEXT.decode().splitlines()).encode()
    elif ext.startswith("csv"):
        data = ("text\n" + "".join(f'"{x}"\n' for x in TEXT.decode().splitlines())).encode()
    else:
        data = TEXT
    full = compress(data, "gzip" if ext.endswith("gz") else "zstd")
    f = tmp_path / f"t.{ext}"
    f.write_bytes(full[: len(full) * 2 // 3])
    errors = []
    for engine in ("polars", "duckdb"):
        proc = run_cli("count", str(f), "--out", str(tmp_path / "w.parquet"), "--engine", engine)
        errors.append(assert_clean_error(proc))
    assert errors[0] == errors[1]
    assert f"cannot read {f}" in errors[0]
    assert not (tmp_path / "w.parquet").exists()


@pytest.mark.parametrize("ext", ["txt", "txt.gz", "txt.zst", "txt.bz2"])
@pytest.mark.parametrize("pre", PRETOKENIZERS)
def test_control_characters_and_lone_cr(tmp_path, ext, pre):
    """\\x1f\\x1e\\x1d (read_csv's delimiter) and lone CRs (read_csv's line ends) are text
    like any other: the same words in both engines, and for `none` the lines as they are."""
    data = (b"\r\na\rb\r\n" + b"left\x1f\x1e\x1dright tail\n" + b"x\x1fy \x1e z\x1d\n"
            + b"cr\ronly\rline\r" + b"\x00nul and \x7f del\n" + b"last line, no end")
    f = write(tmp_path / f"c.{ext}", data)
    words = same_words(f, pre_tokenizer=pre)
    if pre == "none":
        assert as_dict(words) == lines_with_ends(data)
    assert "b" in "".join(words["word"])


@pytest.mark.slow
# zstd (30-40 s) only with TOKCOLUMNAR_SLOW=1: both decompressors are read through the same path
@pytest.mark.parametrize("ext", ["txt.gz", pytest.param("txt.zst", marks=SLOW_ONLY)])
def test_crosscheck_command_on_lone_cr(tmp_path, ext):
    """The reported case: `printf '\\r\\na\\rb\\r\\n' | gzip > c.txt.gz; tokcolumnar crosscheck
    c.txt.gz` (DuckDB lost `b`), and its variants that made DuckDB refuse."""
    for i, data in enumerate([b"\r\na\rb\r\n", b"\ra\r\rb", b"a\rb", b"\r\r\n\r"]):
        f = write(tmp_path / f"c{i}.{ext}", data)
        for pre in PRETOKENIZERS:
            proc = run_cli("crosscheck", f, "--pre-tokenizer", pre, "--vocab-size", "40",
                           "--quiet")
            if "a" in data.decode() or pre != "whitespace":
                assert proc.returncode == 0, (data, pre, proc.stdout, proc.stderr)
                assert proc.stdout.startswith("identical: "), proc.stdout
            else:  # only CRs: no words for whitespace, the same refusal
                assert "no words" in assert_clean_error(proc)


@pytest.mark.parametrize("ext", tiered(["txt.gz", "txt.zst"], lambda e: e == "txt.gz"))
def test_lines_over_2_mb_in_compressed_text(tmp_path, ext):
    """A 3 MB line (read_csv failed over 2 MB): cut into pieces where the pre-tokenizer allows,
    the same words in both engines; for `none` the same refusal (it is one 3,000,001-character
    pre-token)."""
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}" for i in range(750_000)]
    data = b"first line\n" + " ".join(words).encode() + b"\nlast line\n"
    f = write(tmp_path / f"long.{ext}", data)
    w = same_words(f, pre_tokenizer="whitespace")
    assert as_dict(w) == Counter(["first", "line", "last", "line", *words])
    w = same_words(f, pre_tokenizer="byte-level")
    assert as_dict(w)["Ġ" + words[1]] == Counter(words)[words[1]]
    msg = same_error(f, pre_tokenizer="none")
    assert "a pre-token of 3,000,000 characters exceeds --max-word-chars 1,000,000" in msg


@pytest.mark.parametrize("ext", ["gz", "zst", "bz2"])
def test_compressed_jsonl_and_csv(tmp_path, ext):
    """Compressed JSONL / CSV rows (control characters, CR, quotes, empty and null values):
    the same words; a non-string JSON value (read_json gave its JSON text) and a ragged CSV
    row: the same refusal."""
    rows = ["plain words", "a\rb\r\nc", "tab\there", "ctl\x1f\x1e\x1d end", "", "quote \" in",
            "naïve 東京", "  spaced  "]
    jsonl = "".join(json.dumps({"id": i, "text": x}) + "\n" for i, x in enumerate(rows))
    jsonl += '{"id": 99, "text": null}\n'
    csv = pl.DataFrame({"id": range(len(rows)), "text": rows}).write_csv()
    for pre in PRETOKENIZERS:
        w = same_words(write(tmp_path / f"r.jsonl.{ext}", jsonl.encode()), pre_tokenizer=pre)
        if pre == "none":
            assert as_dict(w) == Counter(x for x in rows if x)
        same_words(write(tmp_path / f"r.csv.{ext}", csv.encode()), pre_tokenizer=pre)
    bad_json = write(tmp_path / f"bad.jsonl.{ext}", b'{"text": "a b"}\n{"text": 5}\n')
    assert "cannot read" in same_error(bad_json)
    bad_csv = write(tmp_path / f"bad.csv.{ext}", b'text,n\n"a b",1\nc d\n')
    assert "cannot read" in same_error(bad_csv)


def test_parquet_inputs(tmp_path):
    """Plain Parquet stays with DuckDB's read_parquet (byte-exact); its column check gives the
    Polars engine's messages; corrupt files and invalid UTF-8 are refused by both."""
    strings = ["a b", None, "c\r\nd\x00e\x1f", "", "naïve 東京"]
    pq.write_table(pa.table({"text": pa.array(strings, pa.large_string())}),
                   tmp_path / "s.parquet")
    for pre in PRETOKENIZERS:
        w = same_words(str(tmp_path / "s.parquet"), pre_tokenizer=pre)
        if pre == "none":
            assert as_dict(w) == Counter(x for x in strings if x)
    pq.write_table(pa.table({"text": pa.array(["a b", "c", "a b"]).dictionary_encode()}),
                   tmp_path / "d.parquet")
    same_words(str(tmp_path / "d.parquet"))
    pq.write_table(pa.table({"text": pa.array([b"a"], pa.binary())}), tmp_path / "b.parquet")
    assert "text column has type Binary" in same_error(str(tmp_path / "b.parquet"))
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "n.parquet")
    assert "no column 'text'" in same_error(str(tmp_path / "n.parquet"))
    good = (tmp_path / "s.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(good[: len(good) // 2])
    for engine in ("polars", "duckdb"):
        proc = run_cli("count", str(tmp_path / "t.parquet"), "--out",
                       str(tmp_path / "w.parquet"), "--engine", engine)
        assert f"cannot read {tmp_path / 't.parquet'} as parquet" in assert_clean_error(proc)
    bad = pa.Array.from_buffers(pa.string(), 2, pa.array([b"ok", b"bad \xff"]).buffers())
    pq.write_table(pa.table({"text": bad}), tmp_path / "u.parquet")
    for count in (polars_count, duckdb_count):
        with pytest.raises(TokcolumnarError, match="u.parquet: invalid UTF-8 in the text column"):
            count(str(tmp_path / "u.parquet"), TrainConfig(show_progress=False))


@pytest.mark.slow
def test_training_on_awkward_compressed_text_is_identical(tmp_path):
    """Whole training runs (BPE and WordPiece) on compressed text with CRs, control
    characters and a long line: every table identical."""
    data = (b"\r\na\rb\r\n" + b"left\x1f\x1e\x1dright\n" * 50 + b"low lower newest widest "
            * 20_000 + b"\n" + b"tail\r")
    for ext in ("gz", "zst"):
        f = write(tmp_path / f"t.txt.{ext}", data)
        for opts in ({"pre_tokenizer": "byte-level"}, {"pre_tokenizer": "whitespace"},
                     {"model": "wordpiece", "pre_tokenizer": "whitespace"}):
            cfg = TrainConfig(show_progress=False, vocab_size=120, **opts)
            a = train(f, config=cfg)
            b = train_duckdb(f, cfg)
            assert compare_results(a, b, ("polars", "duckdb")) is None, opts


SETTINGS = examples(0.15)
ALPHABET = " \t\r\n\x1f\x1e\x1d\x00abAΣ'.1中\u0301▁é"


@pytest.mark.parametrize("pre", ["whitespace", "subword-nmt", "byte-level", "metaspace"])
@SETTINGS
@given(text=st.text(alphabet=ALPHABET, max_size=60), chunk=st.integers(1, 6),
       row=st.integers(1, 4), normalizer=st.sampled_from(["none", "nfkc", "bert"]))
def test_duckdb_reads_cut_lines_exactly(tmp_path_factory, pre, text, chunk, row, normalizer):
    """The DuckDB engine on text read in chunks of a few bytes and rows cut after a few
    characters (so nearly every line is cut): the words of the uncut lines."""
    f = tmp_path_factory.mktemp("cut") / "t.txt"
    f.write_bytes(text.encode())
    cfg = TrainConfig(show_progress=False, pre_tokenizer=pre, normalizer=normalizer)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    try:
        want = polars_count(iter(lines), cfg)
    except TokcolumnarError as e:
        want = str(e)
    with mock.patch.object(readers, "CHUNK_BYTES", chunk), \
            mock.patch.object(duckdb_count_module, "ROW_CHARS", row):
        try:
            got = duckdb_count(str(f), cfg)
        except TokcolumnarError as e:
            got = str(e)
    assert got == want if isinstance(want, str) else got.equals(want)


def test_crosscheck_needs_inputs_it_can_read_twice(tmp_path):
    """crosscheck reads its inputs once per engine: standard input and pipes are refused with
    a clear line (the second engine would see nothing); a Python iterator is read once and
    given to both."""
    proc = run_cli("crosscheck", "-", input="low lower\n")
    assert "standard input can be read only once: save it to a file" in assert_clean_error(proc)
    out: list[str] = []
    code = crosscheck(iter(["low lower", "newest widest"]),
                      TrainConfig(show_progress=False, vocab_size=30),
                      out=type("W", (), {"write": lambda self, x: out.append(x)})())
    assert code == 0
    assert "".join(out).startswith("identical: 4 words")
