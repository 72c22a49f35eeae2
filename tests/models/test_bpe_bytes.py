"""A byte-level BPE reads its initial symbols from the words' UTF-8 bytes
(`BPEModel.encode_byte_words`): the ids must be those of `encode_words` on the words' byte
characters, and `Tokenizer` must use that path only when every byte has its token."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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


# --- characters started from as one token (`CharTokens`) -------------------------------------
CHARS = "中文字é a"


def hf_byte_ids(vocab: dict[str, int], merges: list[tuple[str, str]], words: list[str]
                ) -> list[list[int]]:
    """HF's BPE on each word's byte characters alone (one pre-token per word)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    tok = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
    return [tok.encode(byte_chars(w)).ids for w in words]


@st.composite
def byte_tables(draw: st.DrawFn) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level vocabulary (all 256 bytes) and a random merge table over the bytes of
    `CHARS`: some random merges (partial characters, a space or a byte of one character with
    a byte of another), then often the merges that make each character whole, then random
    merges of anything made so far."""
    made = sorted(set("".join(byte_chars(c) for c in CHARS)))
    merges: list[tuple[str, str]] = []

    def add(a: str, b: str) -> None:
        if (a, b) not in merges and len(a + b) <= 9:
            merges.append((a, b))
            if a + b not in made:
                made.append(a + b)

    for _ in range(draw(st.integers(0, 6))):
        add(draw(st.sampled_from(made)), draw(st.sampled_from(made)))
    if draw(st.booleans()):
        for c in CHARS:
            parts = list(byte_chars(c))
            while len(parts) > 1:
                add(parts[0], parts[1])
                parts[:2] = [parts[0] + parts[1]]
    for _ in range(draw(st.integers(0, 25))):
        add(draw(st.sampled_from(made)), draw(st.sampled_from(made)))
    tokens = [BYTES_TO_UNICODE[b] for b in range(256)]
    tokens += [t for t in made if t not in set(tokens)]
    return {t: i for i, t in enumerate(tokens)}, merges


@given(byte_tables(), st.lists(st.text(alphabet=CHARS, min_size=1, max_size=12), min_size=1,
                               max_size=12))
def test_characters_started_as_tokens_give_hf_ids(
        table: tuple[dict[str, int], list[tuple[str, str]]], words: list[str]) -> None:
    """Pieces of long words go through `byte_symbols` (characters whole where `CharTokens`
    allows): HF's ids for any table, well formed or not (then no character is whole)."""
    vocab, merges = table
    words = [*words, "中文字中文" * 2]  # a long word: the pieces' path is taken
    model = BPEModel(vocab=vocab, merges=merges)
    got = model.encode_byte_words(pl.Series(words, dtype=pl.String)).to_list()
    assert got == hf_byte_ids(vocab, merges, words)


def test_a_character_whose_first_byte_merges_first_stays_bytes() -> None:
    """中 (E4 B8 AD) is made by merges of rank 1 and 2, but a space merges with its first
    byte at rank 0: inside " 中" the space takes that byte first, so 中 may not start as one
    token; 文 may."""
    space, e4, b8, ad = (BYTES_TO_UNICODE[b] for b in (0x20, 0xE4, 0xB8, 0xAD))
    wen = byte_chars("文")
    merges = [(space, e4), (e4, b8), (e4 + b8, ad), (wen[0], wen[1]), (wen[:2], wen[2])]
    tokens = [BYTES_TO_UNICODE[b] for b in range(256)]
    tokens += [space + e4, e4 + b8, e4 + b8 + ad, wen[:2], wen]
    vocab = {t: i for i, t in enumerate(tokens)}
    model = BPEModel(vocab=vocab, merges=merges)
    chars = model.char_tokens()
    assert chars is not None
    token = chars.tokens_of(model, np.array([ord("中"), ord("文")], dtype=np.uint32))
    assert token.tolist() == [-1, vocab[wen]]
    words = [" 中中 中文文文", "文中 文 中 中文"]
    got = model.encode_byte_words(pl.Series(words, dtype=pl.String)).to_list()
    assert got == hf_byte_ids(vocab, merges, words)
