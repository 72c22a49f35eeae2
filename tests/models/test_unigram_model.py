"""The Unigram encoder (tokcolumnar/models/unigram.py) against HF `tokenizers` (its Unigram
model: Viterbi, unknown fusion, byte fallback) and, for trained models, against SentencePiece:
the same ids for every word and line."""

from __future__ import annotations

import json

import polars as pl
import pytest
import sentencepiece as spm
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.training.test_unigram import columnar
from tokcolumnar.errors import TokcolumnarValueError
from tokcolumnar.models import model_from_hf
from tokcolumnar.models.unigram import UnigramModel
from tokcolumnar.tokenizer import Tokenizer
from tokcolumnar.unigram_export import sentencepiece_file, unigram_parts

ALPHABET = "abcé文"
BYTES = [f"<0x{b:02X}>" for b in range(256)]


@st.composite
def models(draw) -> dict:
    pieces = draw(st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), min_size=1,
                           max_size=20, unique=True))
    # scores from a few values: ties between paths happen
    scores = draw(st.lists(st.sampled_from([-1.0, -2.0, -2.5, -3.0, -0.5]),
                           min_size=len(pieces), max_size=len(pieces)))
    byte_fallback = draw(st.booleans())
    vocab = [["<unk>", 0.0]] + [[p, s] for p, s in zip(pieces, scores)]
    if byte_fallback:
        vocab += [[b, 0.0] for b in BYTES]
    return {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": byte_fallback}


def hf_ids(model: dict, words: list[str]) -> list[list[int]]:
    hf = HFTokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": model}))
    return [hf.encode(w, add_special_tokens=False).ids for w in words]


@examples(1)
@given(models(), st.lists(st.text(alphabet=ALPHABET + "xü", min_size=1, max_size=10),
                          min_size=1, max_size=8))
def test_encode_words_as_hf(model: dict, words: list[str]) -> None:
    ours = model_from_hf(model)
    assert isinstance(ours, UnigramModel)
    got = ours.encode_words(pl.Series(words, dtype=pl.String)).to_list()
    assert got == hf_ids(model, words)
    assert ours.to_hf() == model


def test_from_hf_checks() -> None:
    with pytest.raises(TokcolumnarValueError, match=r"vocab\[0\] must be \[piece, score\]"):
        model_from_hf({"type": "Unigram", "unk_id": 0, "vocab": [["a"]]})
    with pytest.raises(TokcolumnarValueError, match="unk_id 3 is not a piece id"):
        model_from_hf({"type": "Unigram", "unk_id": 3, "vocab": [["a", -1.0]]})
    no_unk = model_from_hf({"type": "Unigram", "unk_id": None, "vocab": [["a", -1.0]]})
    with pytest.raises(TokcolumnarValueError, match="no unk_id"):
        no_unk.encode_words(pl.Series(["ab"]))


LINES = ["The quick brown fox jumps over the lazy dog.", "A quick brown dog!",
         "lazy foxes, lazy dogs", "over and over again", "the end"]
HELD = ["the quick dog", "  brown   foxes jump ", "Über naïve café 漢字", "", "a\tb", "zzz",
        "dog▁", " the ▁ ", "▁", "a ▁▁b"]


def test_tokenizer_json_encodes_as_hf_and_spm() -> None:
    trained = columnar(LINES, 39, 1)
    pieces, scores = [p for p, _ in trained], [s for _, s in trained]
    tok = Tokenizer.from_unigram(unigram_parts(pieces, scores))
    hf = HFTokenizer.from_str(tok.to_str())
    sp = spm.SentencePieceProcessor(model_proto=sentencepiece_file(pieces, scores))
    ours = Tokenizer.from_hf_dict(json.loads(tok.to_str()))
    got = ours.encode_ids(HELD + LINES)["ids"].to_list()
    assert got == [e.ids for e in hf.encode_batch(HELD + LINES)]
    assert got == [sp.encode(line) for line in HELD + LINES]
    assert hf.decode(got[0]) == sp.decode(got[0]) == "the quick dog"


@pytest.mark.corpus
@pytest.mark.slow
def test_held_out_lines_as_hf_and_spm() -> None:
    with open(corpus("small/en_botchan.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    train, held = lines[:3000], lines[3000:]
    trained = columnar(train, 2000, 16)
    pieces, scores = [p for p, _ in trained], [s for _, s in trained]
    tok = Tokenizer.from_unigram(unigram_parts(pieces, scores))
    hf = HFTokenizer.from_str(tok.to_str())
    sp = spm.SentencePieceProcessor(model_proto=sentencepiece_file(pieces, scores))
    got = Tokenizer.from_hf_dict(json.loads(tok.to_str())).encode_ids(held)["ids"].to_list()
    assert got == [e.ids for e in hf.encode_batch(held)]
    assert got == [sp.encode(line) for line in held]


def test_ties_keep_the_longest_last_piece() -> None:
    # "ab" alone and "a" + "b" score the same: HF keeps the first candidate to reach the end
    model = {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
             "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["ab", -2.0], ["c", -2.0],
                       ["bc", -3.0]]}
    words = ["ab", "abc", "abab", "xab", "xxa"]
    got = model_from_hf(model).encode_words(pl.Series(words)).to_list()
    assert got == hf_ids(model, words)
    assert got[0] == [3] and got[3] == [0, 3] and got[4] == [0, 1]


def test_byte_fallback_as_spm() -> None:
    """SentencePiece's byte fallback: the 256 BYTE pieces are meta pieces (the trained pieces
    are the same with 256 fewer places), and an unknown character is spelled in bytes; our
    tokenizer.json (HF) and tokenizer.model encode and decode as spm_train's model."""
    from tests.support.spm_reference import spm_unigram
    from tokcolumnar.training import unigram as ug

    vocab = 256 + 39
    expected = spm_unigram(LINES, vocab, num_threads=1, byte_fallback=True,
                           hard_vocab_limit=True)
    result = ug.train_unigram(ug.load_sentences(pl.Series(LINES)), None,
                              ug.UnigramOptions(vocab_size=vocab, num_threads=1,
                                                meta_pieces=3 + 256))
    assert list(zip(result.pieces, result.scores.tolist())) == expected
    pieces, scores = result.pieces, result.scores.tolist()
    tok = Tokenizer.from_unigram(unigram_parts(pieces, scores, byte_fallback=True))
    hf = HFTokenizer.from_str(tok.to_str())
    sp = spm.SentencePieceProcessor(model_proto=sentencepiece_file(pieces, scores,
                                                                   byte_fallback=True))
    ours = Tokenizer.from_hf_dict(json.loads(tok.to_str()))
    got = ours.encode_ids(HELD)["ids"].to_list()
    assert got == [e.ids for e in hf.encode_batch(HELD)] == [sp.encode(line) for line in HELD]
    assert any(3 <= i < 259 for ids in got for i in ids)  # some bytes were used
    for ids in got:
        assert hf.decode(ids) == sp.decode(ids) == ours.decode(ids)
