"""`encode --keep-columns`: input columns of Parquet, JSONL and CSV inputs written beside the
outputs row for row (also across many batches), and the refusals: unknown columns, columns
that would be overwritten, a text input's only column."""

from __future__ import annotations

import json

import polars as pl
import pytest
from tokenizers import Tokenizer as HFTokenizer

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus
from tests.support.hf_text import encoded_rows
from tokcolumnar.encode import dataset


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    lines = encoded_rows(corpus("small/en_botchan.txt"))
    n = len(lines)
    return pl.DataFrame({
        "doc_id": list(range(n)),
        "text": lines,
        "source": [f"botchan-{k % 7}" for k in range(n)],
        "score": [k / 8 for k in range(n)],
        "note": [None if k % 3 else f"note {k}" for k in range(n)],
    })


def write(df: pl.DataFrame, path, fmt: str) -> None:
    {"parquet": df.write_parquet, "jsonl": df.write_ndjson, "csv": df.write_csv}[fmt](path)


@pytest.mark.corpus
@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_kept_columns_equal_the_input(tmp_path, layout_tokenizers, table, fmt):
    src = tmp_path / f"in.{fmt}"
    write(table, src, fmt)
    out = tmp_path / "o.parquet"
    tok = layout_tokenizers["gpt2"]
    proc = run_cli("encode", str(src), "--tokenizer", str(tok), "--out", str(out),
                   "--keep-columns", "score,doc_id,note", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["text", "score", "doc_id", "note", "ids", "n_tokens"]
    if fmt == "csv":  # CSV has no null string: an empty field is read as "" (Arrow's rule)
        table = table.with_columns(pl.col("note").fill_null(""))
    for name in ("text", "score", "doc_id", "note"):
        assert df[name].to_list() == table[name].to_list(), name
    hf = HFTokenizer.from_file(str(tok / "tokenizer.json"))
    assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(table["text"].to_list())]
    # all: every input column, in the input's order (the text column dropped by --drop-text)
    proc = run_cli("encode", str(src), "--tokenizer", str(tok), "--out", str(out),
                   "--keep-columns", "all", "--drop-text", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["doc_id", "source", "score", "note", "ids", "n_tokens"]
    assert df.drop("ids", "n_tokens").to_dicts() == table.drop("text").to_dicts()


@pytest.mark.corpus
def test_rows_stay_aligned_across_batches(tmp_path, layout_tokenizers, table, monkeypatch):
    """Small batches encoded in parallel, over two inputs: every kept value stays with its
    row."""
    monkeypatch.setattr(dataset, "BATCH_BYTES", 2000)
    half = table.height // 2
    first, second = tmp_path / "a.parquet", tmp_path / "b.jsonl"
    table.head(half).write_parquet(first, row_group_size=500)
    table.slice(half).write_ndjson(second)
    out = tmp_path / "o.parquet"
    rows = dataset.encode_files(layout_tokenizers["bert"], [str(first), str(second)], str(out),
                                keep_columns=["doc_id", "source"], progress=False)
    df = pl.read_parquet(out)
    assert rows == table.height
    assert df.select("text", "doc_id", "source").to_dicts() == table.select(
        "text", "doc_id", "source").to_dicts()
    hf = HFTokenizer.from_file(str(layout_tokenizers["bert"] / "tokenizer.json"))
    assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(table["text"].to_list())]


def test_text_input_has_only_the_text_column(tmp_path, layout_tokenizers):
    src = tmp_path / "in.txt"
    src.write_text("one line\ntwo lines\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    args = ["encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
            str(out), "--quiet"]
    assert_clean_error(run_cli(*args, "--keep-columns", "lang"),
                       "no column 'lang' to keep (--keep-columns; columns: text)")
    assert not out.exists()
    assert run_cli(*args, "--keep-columns", "all").returncode == 0
    assert pl.read_parquet(out).columns == ["text", "ids", "n_tokens"]
    assert pl.read_parquet(out)["text"].to_list() == ["one line", "two lines"]


@pytest.mark.parametrize("keep,drop_text,needle", [
    ("doc_id,nope", False, "no column 'nope' to keep (--keep-columns; columns: doc_id, text, "
                           "n_tokens)"),
    ("n_tokens", False, "input column 'n_tokens' (--keep-columns) has the name of an output"),
    ("all", True, "input column 'n_tokens' (--keep-columns) has the name of an output"),
    ("doc_id,,text", False, "--keep-columns: give input column names, each once"),
    ("doc_id,doc_id", False, "--keep-columns: give input column names, each once"),
    ("all,doc_id", False, "give it alone"),
    ("text", True, "--drop-text drops it: choose one"),
])
def test_refusals(tmp_path, layout_tokenizers, keep, drop_text, needle):
    src = tmp_path / "in.parquet"
    pl.DataFrame({"doc_id": [1, 2], "text": ["a b", "c"], "n_tokens": [3, 4]}).write_parquet(src)
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--quiet", "--keep-columns", keep,
                   *(["--drop-text"] if drop_text else []))
    assert_clean_error(proc, needle)
    assert not out.exists()


def test_refused_with_distributed_engines(tmp_path, layout_tokenizers):
    src = tmp_path / "in.txt"
    src.write_text("a\n", encoding="utf-8")
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(tmp_path / "o"), "--keep-columns", "text", "--engine", "spark")
    assert_clean_error(proc, "--keep-columns is not available with --engine spark")


def test_python_inputs(tmp_path, layout_tokenizers):
    """From Python: a data frame's (or Arrow table's) columns can be kept; an iterator of
    texts has only the text."""
    df = pl.DataFrame({"text": ["a b", "c d e", None], "k": [1, 2, 3]})
    hf = HFTokenizer.from_file(str(layout_tokenizers["gpt2"] / "tokenizer.json"))
    want = [e.ids for e in hf.encode_batch(["a b", "c d e", ""])]
    out = tmp_path / "o.parquet"
    for data in (df, df.to_arrow(), df.lazy()):
        assert dataset.encode_files(layout_tokenizers["gpt2"], data, str(out),
                                    keep_columns=["k"], progress=False) == 3
        got = pl.read_parquet(out)
        assert got.columns == ["text", "k", "ids", "n_tokens"]
        assert got["k"].to_list() == [1, 2, 3] and got["ids"].to_list() == want
    assert dataset.encode_files(layout_tokenizers["gpt2"], iter(["a b", "c d e"]), str(out),
                                keep_columns="all", progress=False) == 2
    assert pl.read_parquet(out).columns == ["text", "ids", "n_tokens"]


def test_a_kept_column_arrow_cannot_type_is_one_error(tmp_path, layout_tokenizers):
    """Arrow types a JSONL column from its first block: null there and strings later is
    refused by the reader, in one line, while batches are being encoded."""
    src = tmp_path / "in.jsonl"
    rows = [{"text": f"line {k} of some text", "m": None} for k in range(60_000)]
    rows.append({"text": "late", "m": "now a string"})
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--keep-columns", "m", "--max-line-bytes", "100000", "--quiet")
    assert_clean_error(proc, "changed from null to string")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
