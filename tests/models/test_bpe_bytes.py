"""A byte-level BPE reads its initial symbols from the words' UTF-8 bytes
(`BPEModel.encode_byte_words`): the ids must be those of `encode_words` on the words' byte
characters, and `Tokenizer` must use that path only when every byte has its token."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.corpora import PRIMER
from tokcolumnar import Tokenizer, train
from tokcolumnar.models import BPEModel
from tokcolumnar.text.bytelevel import BYTES_TO_UNICODE


@pytest.fixture(scope="module")
def byte_level_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpt2") / "o"
    train([str(PRIMER)], out_dir=out, vocab_size=700, preset="gpt2")
    return out


@pytest.fixture(scope="module")
def byte_level(byte_level_dir: Path) -> Tokenizer:
    return Tokenizer.from_dir(byte_level_dir)


def byte_chars(word: str) -> str:
    return "".join(BYTES_TO_UNICODE[b] for b in word.encode("utf-8"))


@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=20))
def test_byte_words_encode_as_their_byte_characters(byte_level: Tokenizer,
                                                    words: list[str]) -> None:
    model = byte_level.model
    assert isinstance(model, BPEModel) and model.byte_ids() is not None
    expected = model.encode_words(pl.Series([byte_chars(w) for w in words], dtype=pl.String))
    # a sliced Series (an Arrow array with an offset) reads the right bytes too
    padded = pl.Series(["x", *words, "y"], dtype=pl.String).slice(1, len(words))
    for series in (pl.Series(words, dtype=pl.String), padded):
        assert model.encode_byte_words(series).to_list() == expected.to_list()


def test_the_byte_path_needs_every_byte_token(byte_level: Tokenizer) -> None:
    """Without the token of byte 0xFF the tokenizer keeps the character path (and HF drops the
    unknown byte character, as `encode_words` does)."""
    model = byte_level.model
    assert isinstance(model, BPEModel)
    vocab = {t: i for t, i in model.vocab.items() if t != BYTES_TO_UNICODE[0xFF]}
    merges = [(a, b) for a, b in model.merges if BYTES_TO_UNICODE[0xFF] not in a + b]
    partial = BPEModel(vocab=vocab, merges=merges)
    assert partial.byte_ids() is None
    assert byte_level.word_cache().encode_kept == model.encode_byte_words_kept



def test_the_word_cache_keeps_the_words_left_whole(byte_level_dir: Path) -> None:
    """Words cut into pieces (a long run of CJK characters, which the merges trained on
    PRIMER never join) are not kept in the word cache, whole words are; the ids stay HF's
    when the same texts come again (the long words then from the piece cache)."""
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(byte_level_dir / "tokenizer.json"))
    tok = Tokenizer.from_dir(byte_level_dir)  # a cache of its own
    long_run = "中文字符串的一个很长的句子里有许多汉字"
    texts = [f"{long_run} the words", f"words {long_run}，the", "the the words"]
    expected = [hf.encode(t).ids for t in texts]
    for _ in range(2):
        assert tok.encode_ids(texts).get_column("ids").to_list() == expected
    cached = set(tok.word_cache().words.to_list())
    assert {" the", " words", "the", "words"} <= cached
    assert not any(long_run in w for w in cached)
    model = tok.model
    assert isinstance(model, BPEModel)
    _, kept = model.encode_byte_words_kept(pl.Series([" " + long_run, long_run, "words"]))
    assert kept.tolist() == [False, False, True]
