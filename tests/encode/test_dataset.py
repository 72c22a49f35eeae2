"""The `encode` command: its output columns against HF, the safety rules of its options, the
bound on one huge line, and the exactness of the batch path (word cache across batches,
parallel batches) on real corpora."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from tests.support.cli import assert_clean_error, run_cli, run_measured
from tests.support.corpora import PRIMER as DATA
from tests.support.corpora import corpus
from tokcolumnar import Tokenizer, train
from tokcolumnar.encode import dataset


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = {}
    for name, kw in {"bert": {"preset": "bert"}, "gpt2": {"preset": "gpt2"}}.items():
        d = tmp_path_factory.mktemp(name) / "o"
        train([str(DATA)], out_dir=d, vocab_size=900, **kw)
        out[name] = d
    return out


def test_columns_match_hf(tmp_path, trained):
    src = tmp_path / "in.txt"
    lines = ["The pair merges, again.", "", "naïve café 東京 tokens", "[CLS] inside text"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--columns", "ids,n_tokens,tokens,word_ids,type_ids,attention_mask",
                   "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["text", "ids", "n_tokens", "tokens", "word_ids", "type_ids",
                          "attention_mask"]
    hf = HFTokenizer.from_file(str(trained["bert"] / "tokenizer.json")).encode_batch(lines)
    assert df["text"].to_list() == lines
    assert df["ids"].to_list() == [e.ids for e in hf]
    assert df["tokens"].to_list() == [e.tokens for e in hf]
    assert df["word_ids"].to_list() == [e.word_ids for e in hf]
    assert df["type_ids"].to_list() == [e.type_ids for e in hf]
    assert df["attention_mask"].to_list() == [e.attention_mask for e in hf]
    assert df["n_tokens"].to_list() == [len(e.ids) for e in hf]


def test_no_special_tokens_and_drop_text(tmp_path, trained):
    src = tmp_path / "in.txt"
    lines = ["the merge of pairs", "tokens"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--no-special-tokens", "--drop-text", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["ids", "n_tokens"]
    hf = HFTokenizer.from_file(str(trained["bert"] / "tokenizer.json"))
    assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(lines,
                                                                  add_special_tokens=False)]


def test_output_column_never_overwrites_the_input_column(tmp_path, trained):
    src = tmp_path / "in.parquet"
    pl.DataFrame({"ids": ["the text is in a column named ids"]}).write_parquet(src)
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--column", "ids", "--tokenizer", str(trained["gpt2"]),
                   "--out", str(out), "--quiet")
    assert_clean_error(proc, "'ids' has the name of an output column")
    assert not out.exists()
    proc = run_cli("encode", str(src), "--column", "ids", "--tokenizer", str(trained["gpt2"]),
                   "--out", str(out), "--quiet", "--drop-text")
    assert proc.returncode == 0, proc.stderr
    assert pl.read_parquet(out).columns == ["ids", "n_tokens"]


@pytest.mark.parametrize("columns,needle", [("ids,bogus", "unknown output column 'bogus'"),
                                            ("n_tokens", "must include ids"),
                                            ("ids,ids", "give each column once")])
def test_bad_columns_are_refused(tmp_path, trained, columns, needle):
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["gpt2"]), "--out",
                   str(tmp_path / "o.parquet"), "--columns", columns, "--quiet")
    assert_clean_error(proc, needle)


def test_huge_line_is_refused_in_bounded_memory(tmp_path, trained):
    code, err, peak, _ = run_measured(
        ["encode", "-", "--tokenizer", str(trained["gpt2"]), "--out",
         str(tmp_path / "o.parquet"), "--quiet", "--max-line-bytes", "2000000"],
        stdin_data=b"x" * 30_000_000)
    assert code == 2, err
    assert "a line of more than 2,000,000 bytes" in err and "--max-line-bytes" in err
    assert len(err.strip().splitlines()) == 1
    assert peak < 400, peak  # the 30 MB line is never held whole


def test_batches_and_cache_give_the_same_ids(tmp_path, trained, monkeypatch):
    """Small batches (many of them, in parallel, the cache filled by the first ones and then
    full) give the ids of one whole-input encode_ids call."""
    lines = DATA.read_text(encoding="utf-8").splitlines()
    tok = Tokenizer.from_dir(trained["gpt2"])
    want = Tokenizer.from_dir(trained["gpt2"]).encode_ids(lines)["ids"].to_list()
    monkeypatch.setattr(dataset, "BATCH_BYTES", 2000)
    tok.word_cache().max_words = 50
    out = tmp_path / "o.parquet"
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = dataset.encode_files(tok, [str(src)], str(out), progress=False)
    assert rows == len(lines)
    assert len(tok.word_cache()) == 50
    assert pl.read_parquet(out)["ids"].to_list() == want


def test_cached_words_in_many_chunks_stay_exact(tmp_path, trained, monkeypatch):
    """A cache grown batch by batch (one chunk of words per batch, merged past
    `MAX_CACHE_CHUNKS`) finds its words in any chunk: the input twice, the second time from
    the cache (the piece cache of the byte-level BPE's long words too), HF's ids."""
    from tokcolumnar.models import cache

    lines = DATA.read_text(encoding="utf-8").splitlines()
    lines += ["東京大学の研究者たちが新しい方法を発表した" * 3] * 3
    lines = lines + lines
    tok = Tokenizer.from_dir(trained["gpt2"])
    monkeypatch.setattr(dataset, "BATCH_BYTES", 1500)
    monkeypatch.setattr(cache, "MAX_CACHE_CHUNKS", 3)
    out = tmp_path / "o.parquet"
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset.encode_files(tok, [str(src)], str(out), progress=False)
    assert 0 < tok.word_cache().words.n_chunks() <= 4
    hf = HFTokenizer.from_file(str(trained["gpt2"] / "tokenizer.json"))
    assert pl.read_parquet(out)["ids"].to_list() == [e.ids for e in hf.encode_batch(lines)]


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["small/en_botchan.txt", "small/udhr_multiscript.txt",
                                  "small/zh_hongloumeng_300k.txt"])
def test_small_corpora_match_hf(tmp_path, trained, name):
    src = corpus(name)
    for which in ("bert", "gpt2"):
        out = tmp_path / f"{which}.parquet"
        proc = run_cli("encode", str(src), "--tokenizer", str(trained[which]), "--out",
                       str(out), "--quiet")
        assert proc.returncode == 0, proc.stderr
        df = pl.read_parquet(out)
        hf = HFTokenizer.from_file(str(trained[which] / "tokenizer.json"))
        assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(df["text"].to_list())]


def test_rows_per_file_writes_parts_then_marker(tmp_path, trained):
    lines = DATA.read_text(encoding="utf-8").splitlines()
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "parts"
    args = ["encode", str(src), "--tokenizer", str(trained["gpt2"]), "--out", str(out),
            "--rows-per-file", "7", "--quiet"]
    assert run_cli(*args).returncode == 0
    names = sorted(p.name for p in out.iterdir())
    n_parts = -(-len(lines) // 7)
    assert names == ["_SUCCESS"] + [f"part-{k:05d}.parquet" for k in range(n_parts)]
    df = pl.read_parquet(sorted(out.glob("part-*.parquet")))
    assert df["text"].to_list() == lines  # row order kept across parts
    assert all(pl.read_parquet(p).height <= 7 for p in out.glob("part-*.parquet"))
    hf = HFTokenizer.from_file(str(trained["gpt2"] / "tokenizer.json"))
    assert df["ids"].to_list() == [e.ids for e in hf.encode_batch(lines)]
    # ours (marker + parts only): replaced without --force; with a foreign file: refused
    assert run_cli(*args[:-3], "--rows-per-file", "1000", "--quiet").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "part-00000.parquet"]
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    assert_clean_error(run_cli(*args), "not empty and not a tokcolumnar output")
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"


@given(st.lists(st.lists(st.text(max_size=12), min_size=1, max_size=6), max_size=12),
       st.integers(1, 60))
def test_batches_keep_the_rows_in_order_and_end_in_two_halves(pieces: list[list[str]],
                                                              batch_bytes: int) -> None:
    """`batched` regroups the reader's pieces in order; once a batch has filled, the last full
    batch and the rest come as two batches of about half the text each (so that the
    encoding threads finish together), every row still once and in order with its kept
    columns."""
    def rows():
        n = 0
        for piece in pieces:
            yield (pl.Series(piece, dtype=pl.String),
                   pa.table({"row": list(range(n, n + len(piece)))}))
            n += len(piece)

    out = list(dataset.batched(rows(), batch_bytes, 10**6))
    flat = [t for piece in pieces for t in piece]
    assert [t for texts, _ in out for t in texts.to_list()] == flat
    assert [r for _, kept in out for r in kept.column("row").to_pylist()] \
        == list(range(len(flat)))
    sizes = [sum(len(t.encode()) for t in texts.to_list()) for texts, _ in out]
    total = sum(sizes)
    filled = any(sum(len(t.encode()) for p in pieces[:i + 1] for t in p) >= batch_bytes
                 for i in range(len(pieces)))
    if filled and len(flat) >= 2:  # the end: two halves, the first about half the text
        *_, first, second = out
        assert len(first[0]) and len(second[0])
        assert all(s >= batch_bytes for s in sizes[:-2])
        longest = max(len(t.encode()) for t in flat)
        assert min(sizes[-2], sizes[-1]) >= (sizes[-2] + sizes[-1]) / 2 - 2 * longest
    else:
        assert len(out) <= 1 and total == sum(len(t.encode()) for t in flat)
