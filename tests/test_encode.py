"""The encoder: HF-identical ids on arbitrary text (special tokens inside text included), the
`encode` command writing Parquet, and decoding."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from tests.support.corpora import PRIMER as DATA
from tests.support.corpora import corpus
from tests.support.examples import examples
from tokcolumnar import Tokenizer, train
from tokcolumnar.cli import main


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = {}
    for name, kw in {"ws": {"special_tokens": ["<unk>", "<s>"]},
                     "suffix": {"end_of_word_suffix": "</w>", "special_tokens": ["[X]"]},
                     "gpt2": {"preset": "gpt2"}}.items():
        d = tmp_path_factory.mktemp(name) / "o"
        train([str(DATA)], out_dir=d, vocab_size=700, **kw)
        out[name] = d
    return out


TEXTS = st.text(alphabet=st.sampled_from(list("the pair merge token<s>[X]|endoftext ,.!é文\n\t")),
                max_size=80)


@examples(1.5)
@given(st.lists(TEXTS, min_size=1, max_size=5), st.sampled_from(["ws", "suffix", "gpt2"]))
def test_encode_matches_hf(trained, texts, which):
    d = trained[which]
    ours = Tokenizer.from_dir(d).encode_batch(texts)
    theirs = HFTokenizer.from_file(str(d / "tokenizer.json")).encode_batch(texts)
    assert [e.ids for e in ours] == [e.ids for e in theirs]
    assert [e.tokens for e in ours] == [e.tokens for e in theirs]



@given(st.lists(TEXTS, min_size=2, max_size=8), st.data())
def test_a_series_of_several_chunks_encodes_as_hf(trained, texts, data):
    """A batch joined from the reader's pieces is a Series of several chunks (encoded as one:
    `encode_raw` rechunks it); its ids and offsets are HF's, row for row."""
    d = trained["gpt2"]
    cut = data.draw(st.integers(1, len(texts) - 1))
    series = pl.concat([pl.Series(texts[:cut], dtype=pl.String),
                        pl.Series(texts[cut:], dtype=pl.String)], rechunk=False)
    assert series.n_chunks() == 2
    ours = Tokenizer.from_dir(d).encode_frame(series, offsets=True)
    theirs = HFTokenizer.from_file(str(d / "tokenizer.json")).encode_batch(texts)
    assert ours.get_column("ids").to_list() == [e.ids for e in theirs]
    assert [list(zip(s, e)) for s, e in zip(ours.get_column("starts").to_list(),
                                             ours.get_column("ends").to_list())] \
        == [e.offsets for e in theirs]

def test_special_tokens_inside_text(trained):
    tok = Tokenizer.from_dir(trained["gpt2"])
    text = "end<|endoftext|>start and more<|endoftext|>"
    enc = tok.encode(text)
    assert "<|endoftext|>" in enc.tokens
    assert enc.ids[enc.tokens.index("<|endoftext|>")] == 0
    hf = HFTokenizer.from_file(str(trained["gpt2"] / "tokenizer.json")).encode(text)
    assert enc.ids == hf.ids
    assert enc.word_ids == hf.word_ids  # HF counts a special token in the text as a word


@pytest.mark.corpus
def test_encode_command(tmp_path, trained):
    src = corpus("small/en_botchan.txt")
    out = tmp_path / "enc.parquet"
    assert main(["encode", "--tokenizer", str(trained["ws"]), str(src), "--out", str(out),
                 "--quiet"]) == 0
    df = pl.read_parquet(out)
    lines = src.read_text(encoding="utf-8").splitlines()
    assert df.columns == ["text", "ids", "n_tokens"]
    assert df["text"].to_list() == lines
    want = Tokenizer.from_dir(trained["ws"]).encode_ids(lines)["ids"]
    assert df["ids"].to_list() == want.to_list()
    assert (df["n_tokens"] == df["ids"].list.len()).all()


def test_encode_parquet_column(tmp_path, trained):
    src = tmp_path / "in.parquet"
    pl.DataFrame({"doc": ["the merge", "pairs and tokens"], "n": [1, 2]}).write_parquet(src)
    out = tmp_path / "enc.parquet"
    assert main(["encode", "--tokenizer", str(trained["ws"] / "tokenizer.json"), str(src),
                 "--column", "doc", "--out", str(out), "--quiet"]) == 0
    df = pl.read_parquet(out)
    assert df["doc"].to_list() == ["the merge", "pairs and tokens"]
    tok = Tokenizer.from_dir(trained["ws"])
    assert df["ids"].to_list() == [tok.encode(t).ids for t in df["doc"]]


def test_decode_suffix_and_plain(trained):
    tok = Tokenizer.from_dir(trained["suffix"])
    assert tok.decode(tok.encode("the pairs merge").ids) == "the pairs merge"
    plain = Tokenizer.from_dir(trained["ws"])
    assert plain.decode(plain.encode("the pairs merge").ids) == "the pairs merge"
