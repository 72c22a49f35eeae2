"""`encode --stats`: every figure recomputed here from HF's encodings of the rows (and the
`regex` module for words), the printed lines, and the safety of OUT.stats.parquet."""

from __future__ import annotations

import collections

import numpy as np
import polars as pl
import pytest
import regex
from tokenizers import Tokenizer as HFTokenizer

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus
from tests.support.hf_text import encoded_rows
from tokcolumnar.text.words import WORD_RE


@pytest.mark.corpus
@pytest.mark.parametrize("which,name,special", [
    ("bert", "small/udhr_multiscript.txt", True),  # many [UNK]s: the primer has few scripts
    ("gpt2", "small/en_botchan.txt", True),
    ("bert", "small/ru_pushkin_300k.txt", False)])
def test_stats_equal_hf(tmp_path, layout_tokenizers, which, name, special):
    src = corpus(name)
    rows = encoded_rows(src)
    hf = HFTokenizer.from_file(str(layout_tokenizers[which] / "tokenizer.json"))
    encodings = hf.encode_batch(rows, add_special_tokens=special)
    lengths = np.array([len(e.ids) for e in encodings])
    unk = hf.token_to_id("[UNK]") if which == "bert" else None
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers[which]), "--out",
                   str(out), "--stats", *([] if special else ["--no-special-tokens"]))
    assert proc.returncode == 0, proc.stderr
    stats = pl.read_parquet(tmp_path / "o.stats.parquet").row(0, named=True)
    tokens = int(lengths.sum())
    words = sum(len(regex.findall(WORD_RE, r)) for r in rows)
    n_bytes = sum(len(r.encode("utf-8")) for r in rows)
    chars = sum(len(r) for r in rows)
    unknown = sum(e.ids.count(unk) for e in encodings) if unk is not None else 0
    assert (stats["rows"], stats["tokens"], stats["words"], stats["bytes"], stats["chars"],
            stats["unknown_tokens"]) == (len(rows), tokens, words, n_bytes, chars, unknown)
    if which == "bert" and special:
        assert unknown > 100  # the rate is really exercised
    assert stats["tokens_per_word"] == pytest.approx(tokens / words)
    assert stats["bytes_per_token"] == pytest.approx(n_bytes / tokens)
    assert stats["chars_per_token"] == pytest.approx(chars / tokens)
    assert stats["unknown_rate"] == pytest.approx(unknown / tokens)
    assert stats["unk_token"] == ("[UNK]" if unk is not None else None)
    assert (stats["min"], stats["max"]) == (lengths.min(), lengths.max())
    assert stats["mean"] == pytest.approx(lengths.mean())
    for q in (50, 95):
        assert stats[f"p{q}"] == np.percentile(lengths, q, method="inverted_cdf")
    assert {d["n_tokens"]: d["rows"] for d in stats["length_counts"]} == dict(
        collections.Counter(lengths.tolist()))
    printed = [line for line in proc.stderr.splitlines() if line.startswith("stats: ")]
    assert len(printed) == 3, proc.stderr
    assert f"{len(rows):,} rows, {tokens:,} tokens" in printed[0]
    assert f"p95 {stats['p95']:,}" in printed[1]
    assert sum(int(part.rsplit(": ", 1)[1].replace(",", ""))
               for part in printed[2].removeprefix("stats: rows by tokens ").split(", ")
               ) == len(rows)


@pytest.mark.corpus
def test_stats_of_packed_documents(tmp_path, layout_tokenizers):
    """With --pack the figures are the documents' (without separators or special tokens)."""
    src = corpus("small/en_taylorswift_wiki.txt")
    rows = encoded_rows(src)
    hf = HFTokenizer.from_file(str(layout_tokenizers["gpt2"] / "tokenizer.json"))
    lengths = [len(e.ids) for e in hf.encode_batch(rows, add_special_tokens=False)]
    out = tmp_path / "packed"
    proc = run_cli("encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
                   str(out), "--pack", "256", "--rows-per-file", "10", "--stats", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # --quiet: nothing printed
    stats = pl.read_parquet(tmp_path / "packed.stats.parquet").row(0, named=True)
    assert (stats["rows"], stats["tokens"], stats["max"]) == (len(rows), sum(lengths),
                                                              max(lengths))


def test_stats_file_is_safe(tmp_path, layout_tokenizers):
    src = tmp_path / "in.txt"
    src.write_text("a line\nanother line\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    mine = tmp_path / "o.stats.parquet"
    mine.write_text("not ours", encoding="utf-8")
    args = ["encode", str(src), "--tokenizer", str(layout_tokenizers["gpt2"]), "--out",
            str(out), "--stats", "--quiet"]
    assert_clean_error(run_cli(*args), "--stats")
    assert mine.read_text(encoding="utf-8") == "not ours" and not out.exists()
    mine.unlink()
    assert run_cli(*args).returncode == 0
    assert pl.read_parquet(mine)["rows"].to_list() == [2]
    assert run_cli(*args).returncode == 0  # ours now: replaced without --force
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "o.parquet",
                                                          "o.stats.parquet"]
