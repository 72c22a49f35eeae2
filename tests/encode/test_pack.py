"""`encode --pack N`: the blocks against HF's ids of each line (add_special_tokens=False)
followed by the separator, streamed across batches; the separator rule; the refusals."""

from __future__ import annotations

import itertools
import json
import shutil

import polars as pl
import pytest
from tokenizers import Tokenizer as HFTokenizer

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus
from tests.support.hf_text import encoded_rows
from tokcolumnar import Tokenizer
from tokcolumnar.encode import dataset
from tokcolumnar.encode.pack import pack_separator


def hf_stream(tok_dir, lines: list[str], eos: str) -> list[int]:
    hf = HFTokenizer.from_file(str(tok_dir / "tokenizer.json"))
    eos_id = hf.token_to_id(eos)
    assert eos_id is not None
    docs = hf.encode_batch(lines, add_special_tokens=False)
    return list(itertools.chain.from_iterable(e.ids + [eos_id] for e in docs))


@pytest.mark.corpus
@pytest.mark.parametrize("which,eos,name", [
    ("gpt2", "<|endoftext|>", "small/en_botchan.txt"),
    ("bert", "[SEP]", "small/udhr_multiscript.txt")])
def test_blocks_are_hf_ids_with_separators(tmp_path, layout_tokenizers, which, eos, name):
    src = corpus(name)
    want = hf_stream(layout_tokenizers[which], encoded_rows(src), eos)
    out = tmp_path / "packed.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers[which]),
                   "--out", str(out), "--pack", "512", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["ids", "n_tokens"]
    blocks = df["ids"].to_list()
    assert list(itertools.chain.from_iterable(blocks)) == want
    assert all(len(b) == 512 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 512
    assert df["n_tokens"].to_list() == [len(b) for b in blocks]
    assert len(blocks) == -(-len(want) // 512)
    # --pack-drop-last: only the full blocks
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers[which]),
                   "--out", str(out), "--pack", "512", "--pack-drop-last", "--quiet",
                   "--columns", "ids")
    assert proc.returncode == 0, proc.stderr
    dropped = pl.read_parquet(out)
    assert dropped.columns == ["ids"]
    assert dropped["ids"].to_list() == [want[k:k + 512]
                                        for k in range(0, len(want) // 512 * 512, 512)]


@pytest.mark.corpus
def test_documents_span_batches(tmp_path, layout_tokenizers, monkeypatch):
    """Many small batches encoded in parallel: the blocks still follow the input order, and a
    document cut by a block boundary continues in the next block."""
    src = corpus("small/en_taylorswift_wiki.txt")
    want = hf_stream(layout_tokenizers["gpt2"], encoded_rows(src), "<|endoftext|>")
    monkeypatch.setattr(dataset, "BATCH_BYTES", 3000)
    out = tmp_path / "o.parquet"
    rows = dataset.encode_files(layout_tokenizers["gpt2"], [str(src)], str(out), pack=100,
                                progress=False)
    blocks = pl.read_parquet(out)["ids"].to_list()
    assert rows == len(blocks) == -(-len(want) // 100)
    assert list(itertools.chain.from_iterable(blocks)) == want


def test_separator_rule(layout_tokenizers):
    gpt2 = Tokenizer.from_dir(layout_tokenizers["gpt2"])
    bert = Tokenizer.from_dir(layout_tokenizers["bert"])
    plain = Tokenizer.from_dir(layout_tokenizers["plain"])
    assert pack_separator(gpt2) == gpt2.token_to_id("<|endoftext|>")
    assert pack_separator(bert) == bert.token_to_id("[SEP]")
    assert pack_separator(bert, "[PAD]") == bert.token_to_id("[PAD]")
    with pytest.raises(Exception, match="--pack-separator TOKEN"):
        pack_separator(plain)
    token = plain.id_to_token(5)
    assert pack_separator(plain, token) == 5


def test_tokenizer_without_end_of_text(tmp_path, layout_tokenizers):
    src = tmp_path / "in.txt"
    src.write_text("one document\nanother one\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    args = ["encode", str(src), "--tokenizer", str(layout_tokenizers["plain"]), "--out",
            str(out), "--pack", "4", "--quiet"]
    assert_clean_error(run_cli(*args), "--pack-separator TOKEN")
    assert not out.exists()
    assert_clean_error(run_cli(*args, "--pack-separator", "<|nope|>"),
                       "--pack-separator '<|nope|>' is not a token")
    hf = HFTokenizer.from_file(str(layout_tokenizers["plain"] / "tokenizer.json"))
    sep = hf.id_to_token(3)
    assert run_cli(*args, "--pack-separator", sep).returncode == 0
    want = hf_stream(layout_tokenizers["plain"], ["one document", "another one"], sep)
    blocks = pl.read_parquet(out)["ids"].to_list()
    assert list(itertools.chain.from_iterable(blocks)) == want


@pytest.mark.parametrize("extra,needle", [
    (["--pack", "0"], "--pack must be a whole number of ids, at least 1"),
    (["--pack", "8", "--columns", "ids,word_ids"], "per-document column 'word_ids'"),
    (["--pack", "8", "--word-ids"], "per-document column 'word_ids'"),
    (["--pack", "8", "--keep-columns", "text"], "cannot be kept beside them"),
    (["--pack-drop-last"], "--pack-drop-last goes with --pack N"),
    (["--pack-separator", "[SEP]"], "--pack-separator goes with --pack N"),
    (["--pack", "1000", "--pack-drop-last"], "fill no block of --pack 1,000"),
    (["--pack", "8", "--engine", "ray"], "--pack is not available with --engine ray"),
])
def test_refusals(tmp_path, layout_tokenizers, extra, needle):
    src = tmp_path / "in.txt"
    src.write_text("a short document\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--quiet", *extra)
    assert_clean_error(proc, needle)
    assert not out.exists()


def test_configured_eos_of_an_hf_directory(tmp_path, layout_tokenizers):
    """A tokenizer directory with HF's tokenizer_config.json: its eos_token is the separator
    (unless --pack-separator names another)."""
    tok_dir = tmp_path / "hf_dir"
    shutil.copytree(layout_tokenizers["plain"], tok_dir)
    hf = HFTokenizer.from_file(str(tok_dir / "tokenizer.json"))
    eos, other = hf.id_to_token(7), hf.id_to_token(9)
    config = tok_dir / "tokenizer_config.json"
    config.write_text(json.dumps({"eos_token": {"content": eos, "special": True}}),
                      encoding="utf-8")
    src = tmp_path / "in.txt"
    lines = ["one document", "", "another one, longer than the others"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    args = ["encode", str(src), "--tokenizer", str(tok_dir), "--out", str(out), "--pack", "5",
            "--quiet"]
    assert run_cli(*args).returncode == 0
    blocks = pl.read_parquet(out)["ids"].to_list()
    assert list(itertools.chain.from_iterable(blocks)) == hf_stream(tok_dir, lines, eos)
    assert run_cli(*args, "--pack-separator", other).returncode == 0
    blocks = pl.read_parquet(out)["ids"].to_list()
    assert list(itertools.chain.from_iterable(blocks)) == hf_stream(tok_dir, lines, other)
    config.write_text(json.dumps({"eos_token": "<not-there>"}), encoding="utf-8")
    assert_clean_error(run_cli(*args),
                       "the eos_token of tokenizer_config.json '<not-there>' is not a token")
