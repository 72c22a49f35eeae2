"""tiktoken's format: a byte-level BPE run writes `tokenizer.tiktoken` and records its pattern
and special tokens in run.json; tiktoken with that file and pattern (and `Tokenizer.to_tiktoken`)
encodes every line of the corpora to our ids."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support.corpora import corpus, small_tiered
from tests.support.markers import with_name
from tests.support.tiktoken_check import check_tiktoken_outputs
from tokcolumnar import Tokenizer, train
from tokcolumnar.text.bytelevel import BYTE_ALPHABET
from tokcolumnar.text.patterns import PATTERNS

tiktoken = pytest.importorskip("tiktoken")
load = pytest.importorskip("tiktoken.load")


def check_tiktoken(path, out, pattern: str) -> None:
    train([str(path)], out_dir=out, pattern=pattern, vocab_size=30000,
          initial_alphabet=list(BYTE_ALPHABET), special_tokens=["<|endoftext|>"])
    check_tiktoken_outputs(out, path, PATTERNS[pattern].regex, {"<|endoftext|>": 0})


# gpt2 on every small corpus; the LLM patterns there once, with a special token: each run of
# tests/training/test_llm_patterns.py (every small corpus) makes the same checks
@pytest.mark.corpus
@pytest.mark.parametrize("pattern,name", [
    *with_name("gpt2", small_tiered("en_taylorswift_wiki.txt")),
    *[(p, "en_taylorswift_wiki.txt") for p in ("cl100k", "o200k", "qwen2")]])
def test_tiktoken_encodes_as_we_do(pattern, name, tmp_path):
    check_tiktoken(corpus(f"small/{name}"), tmp_path / "out", pattern)


def test_file_format(tmp_path):
    text = "hello world\nhello there\n" * 20
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    train([str(tmp_path / "c.txt")], out_dir=out, pattern="cl100k", vocab_size=270,
          initial_alphabet=list(BYTE_ALPHABET))
    lines = (out / "tokenizer.tiktoken").read_text(encoding="ascii").splitlines()
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    assert len(lines) == len(vocab) > 256
    first = lines[0].split()
    assert base64.b64decode(first[0]) == b"!" and first[1] == str(vocab["!"])  # byte 0x21
    assert [int(x.split()[1]) for x in lines] == sorted(vocab.values())


def test_without_every_byte_no_file(tmp_path):
    (tmp_path / "c.txt").write_text("ab ab ab\n", encoding="utf-8")
    out = tmp_path / "out"
    train([str(tmp_path / "c.txt")], out_dir=out, pattern="qwen2", vocab_size=50)
    assert not (out / "tokenizer.tiktoken").exists()
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))["tiktoken"]
    assert record["file"] is None and "256 bytes" in record["not_written"]
    with pytest.raises(ValueError, match="tiktoken needs them all"):
        Tokenizer.from_dir(out).to_tiktoken()


def test_not_byte_level_has_no_tiktoken(tmp_path):
    (tmp_path / "c.txt").write_text("ab ab ab\n", encoding="utf-8")
    out = tmp_path / "out"
    train([str(tmp_path / "c.txt")], out_dir=out, vocab_size=50)
    assert not (out / "tokenizer.tiktoken").exists()
    assert "tiktoken" not in json.loads((out / "run.json").read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="byte-level BPE only"):
        Tokenizer.from_dir(out).to_tiktoken()


@pytest.mark.corpus
def test_cli_encode_with_a_tiktoken_file(tmp_path):
    """`encode --tokenizer FILE.tiktoken --pattern NAME --special-tokens ...`: our ids (and
    tiktoken's) from the vocabulary alone."""
    from tests.support.cli import run_cli
    from tests.support.hf_text import encoded_rows

    path = corpus("small/udhr_multiscript.txt")
    out = tmp_path / "tok"
    train([str(path)], out_dir=out, pattern="o200k", vocab_size=8000,
          initial_alphabet=list(BYTE_ALPHABET), special_tokens=["<|endoftext|>"])
    ids = tmp_path / "ids.parquet"
    proc = run_cli("encode", str(path), "--tokenizer", str(out / "tokenizer.tiktoken"),
                   "--pattern", "gpt4o", "--special-tokens", "<|endoftext|>=0", "--out",
                   str(ids), "--quiet")
    assert proc.returncode == 0, proc.stderr
    import polars as pl

    got = pl.read_parquet(ids).get_column("ids").to_list()
    rows = encoded_rows(path)
    assert got == Tokenizer.from_dir(out).encode_ids(rows).get_column("ids").to_list()
    enc = tiktoken.Encoding("t", pat_str=PATTERNS["o200k"].regex,
                            mergeable_ranks=load.load_tiktoken_bpe(str(out / "tokenizer.tiktoken")),
                            special_tokens={"<|endoftext|>": 0})
    assert got == enc.encode_ordinary_batch(rows)
    # without --pattern, or --pattern with a tokenizer.json: one error line
    for args in ((str(out / "tokenizer.tiktoken"),), (str(out), "--pattern", "cl100k")):
        bad = run_cli("encode", str(path), "--tokenizer", *args, "--out",
                      str(tmp_path / "x.parquet"), "--quiet")
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
        assert bad.stderr.startswith("tokcolumnar: error: ")
