"""`encode --max-file-size`: a directory of Parquet parts cut by their size on disk, in row
order, equal together to the single-file output; the marker last; the refusals."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus


@pytest.mark.corpus
@pytest.mark.parametrize("size,limit", [("100kB", 100_000), ("48KiB", 48 * 1024)])
def test_parts_within_the_size_equal_one_file(tmp_path, layout_tokenizers, size, limit):
    inputs = [str(corpus("small/en_shakespeare_500k.txt")),
              str(corpus("small/ru_pushkin_300k.txt"))]
    tok = str(layout_tokenizers["gpt2"])
    single = tmp_path / "single.parquet"
    assert run_cli("encode", *inputs, "--tokenizer", tok, "--out", str(single),
                   "--quiet").returncode == 0
    out = tmp_path / "parts"
    proc = run_cli("encode", *inputs, "--tokenizer", tok, "--out", str(out), "--max-file-size",
                   size, "--quiet")
    assert proc.returncode == 0, proc.stderr
    parts = sorted(out.glob("part-*.parquet"))
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS"] + [p.name for p in parts]
    assert [p.name for p in parts] == [f"part-{k:05d}.parquet" for k in range(len(parts))]
    sizes = [p.stat().st_size for p in parts]
    assert len(parts) >= 5, sizes
    assert all(s <= limit for s in sizes), sizes
    assert all(s >= limit / 2 for s in sizes[:-1]), sizes  # cut at the size, not before
    whole = pl.read_parquet(single)
    assert pl.read_parquet(parts).equals(whole)  # row order kept across parts
    marker = json.loads((out / "_SUCCESS").read_text(encoding="utf-8"))
    assert marker["parts"] == len(parts) and marker["rows"] == whole.height


def test_a_size_below_one_row_gives_one_row_per_part(tmp_path, layout_tokenizers):
    src = tmp_path / "in.txt"
    src.write_text("short\n" + "long words " * 2000 + "\nshort again\n", encoding="utf-8")
    out = tmp_path / "parts"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--max-file-size", "2000", "--quiet")
    assert proc.returncode == 0, proc.stderr
    parts = sorted(out.glob("part-*.parquet"))
    assert [pl.read_parquet(p).height for p in parts] == [1, 1, 1]
    assert pl.read_parquet(parts)["text"].to_list() == ["short", "long words " * 2000,
                                                        "short again"]


@pytest.mark.parametrize("extra,needle", [
    (["--max-file-size", "12XB"], "--max-file-size '12XB' is not a size"),
    (["--max-file-size", "0"], "--max-file-size must be positive"),
    (["--max-file-size", "1MB", "--rows-per-file", "10"],
     "give either --rows-per-file or --max-file-size, not both"),
    (["--max-file-size", "1MB", "--engine", "ray"],
     "--max-file-size is not available with --engine ray"),
])
def test_refusals(tmp_path, layout_tokenizers, extra, needle):
    src = tmp_path / "in.txt"
    src.write_text("a line\n", encoding="utf-8")
    out = tmp_path / "parts"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--quiet", *extra)
    assert_clean_error(proc, needle)
    assert not out.exists()
