"""Decoders give exactly HF `tokenizers`' text, and byte-level decoding inverts byte-level
pre-tokenization for any UTF-8 text."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer
from tokenizers import decoders as hfd
from tokenizers.models import WordLevel

from tests.support.examples import examples
from tests.support.hf_text import corpus_ids, corpus_path, read_lines, text_strategy
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text import decoders as D
from tokcolumnar.text.bytelevel import BYTES_TO_UNICODE, byte_map
from tokcolumnar.text.pretokenizers import ByteLevel

FAST = examples(3)

BYTE_CHARS = "".join(BYTES_TO_UNICODE.values())


# --- byte level ----------------------------------------------------------------------------


@FAST
@given(texts=st.lists(text_strategy(), min_size=1, max_size=6))
def test_byte_level_round_trip_and_hf(texts):
    dec, hf = D.ByteLevelDecoder(), hfd.ByteLevel()
    for add_prefix_space in (False, True):
        pieces = ByteLevel(add_prefix_space=add_prefix_space).apply(texts)
        for text, toks in zip(texts, pieces):
            out = dec.decode(toks)
            expect = " " + text if add_prefix_space and text and not text.startswith(" ") \
                else text
            assert out == expect
            assert out == hf.decode(toks)


@FAST
@given(data=st.binary(max_size=40), cuts=st.lists(st.integers(0, 40), max_size=8),
       extra=st.lists(st.text(max_size=3), max_size=3))
def test_byte_level_invalid_utf8_like_hf(data, cuts, extra):
    """Arbitrary bytes (truncated and invalid sequences, surrogates, overlongs) cut anywhere,
    plus tokens with characters outside the byte alphabet: same text as HF."""
    mapped = "".join(BYTES_TO_UNICODE[b] for b in data)
    bounds = sorted({0, len(mapped), *(c for c in cuts if c <= len(mapped))})
    tokens = [mapped[a:b] for a, b in zip(bounds, bounds[1:])] + extra
    assert D.ByteLevelDecoder().decode(tokens) == hfd.ByteLevel().decode(tokens)


@pytest.mark.corpus
@pytest.mark.parametrize("name", corpus_ids())
def test_byte_level_round_trip_on_corpus(name):
    path, limit = corpus_path(name)
    lines = list(read_lines(path, limit))[:5000]
    dec = D.ByteLevelDecoder()
    for line, toks in zip(lines, ByteLevel().apply(lines)):
        assert dec.decode(toks) == line
    assert byte_map("".join(lines[:50])) == "".join(
        t for toks in ByteLevel().apply(lines[:50]) for t in toks)


# --- the others, against HF ----------------------------------------------------------------


def hf_decode(decoder, tokens):
    """HF's text, or None where HF 0.23 panics (its Strip decoder indexes out of bounds when a
    token is shorter than start + stop and made of the stripped character)."""
    try:
        return decoder.decode(tokens)
    except KeyboardInterrupt:
        raise
    except BaseException:  # pyo3's PanicException derives from BaseException
        return None


PIECES = ["a", "b", "Z", " ", ".", ",", "?", "!", "'", "n't", "'s", "'m", "'ve", "'re", "do",
          " do not", "not", "##", "#", "</w>", "<", "w", ">", "▁", "_", "é", "中", "\n", "<0x",
          "41>", "E5>", "8f>", "ab>", "zz>"]


def piece_lists():
    return st.lists(st.lists(st.sampled_from(PIECES), max_size=5).map("".join), max_size=8)


PAIRS = [
    (D.BPEDecoder(), hfd.BPEDecoder()),
    (D.BPEDecoder("</w>"), hfd.BPEDecoder("</w>")),
    (D.BPEDecoder("_"), hfd.BPEDecoder("_")),
    (D.WordPieceDecoder(), hfd.WordPiece()),
    (D.WordPieceDecoder("##", False), hfd.WordPiece("##", False)),
    (D.WordPieceDecoder("#", True), hfd.WordPiece("#", True)),
    (D.MetaspaceDecoder(), hfd.Metaspace()),
    (D.MetaspaceDecoder("▁", "first"), hfd.Metaspace("▁", "first")),
    (D.MetaspaceDecoder("▁", "never", False), hfd.Metaspace("▁", "never", False)),
    (D.MetaspaceDecoder("_", "always"), hfd.Metaspace("_", "always")),
    (D.ByteFallbackDecoder(), hfd.ByteFallback()),
    (D.FuseDecoder(), hfd.Fuse()),
    (D.StripDecoder(" ", 1, 0), hfd.Strip(" ", 1, 0)),
    (D.StripDecoder("a", 2, 3), hfd.Strip("a", 2, 3)),
    (D.ReplaceDecoder("▁", " "), hfd.Replace("▁", " ")),
    (D.ReplaceDecoder(r"\s+|##", "$1-", regex=True), hfd.Replace(Regex(r"\s+|##"), "$1-")),
    (D.SequenceDecoder([D.ReplaceDecoder("▁", " "), D.ByteFallbackDecoder(), D.FuseDecoder(),
                        D.StripDecoder(" ", 1, 0)]),
     hfd.Sequence([hfd.Replace("▁", " "), hfd.ByteFallback(), hfd.Fuse(),
                   hfd.Strip(" ", 1, 0)])),
    (D.ByteLevelDecoder(), hfd.ByteLevel()),
]


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=lambda x: type(x).__name__)
@FAST
@given(tokens=piece_lists())
def test_decoders_match_hf(ours, theirs, tokens):
    expected = hf_decode(theirs, tokens)
    assume(expected is not None)
    assert ours.decode(tokens) == expected


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=lambda x: type(x).__name__)
@given(tokens=st.lists(text_strategy(max_pieces=3), max_size=6))
def test_decoders_match_hf_on_any_text(ours, theirs, tokens):
    expected = hf_decode(theirs, tokens)
    assume(expected is not None)
    assert ours.decode(tokens) == expected


def test_examples():
    assert D.WordPieceDecoder().decode(["un", "##aff", "##able", ",", "do", "n't", "."]) \
        == "unaffable, don't."
    assert D.BPEDecoder().decode(["lo", "w</w>", "est</w>"]) == "low est"
    assert D.MetaspaceDecoder().decode(["▁Hey", "▁friend", "!"]) == "Hey friend!"
    assert D.ByteLevelDecoder().decode(["Hello", "Ġworld", "Ċ", "ä¸Ń"]) == "Hello world\n中"
    assert D.ByteFallbackDecoder().decode(["<0xE5>", "<0x8f>", "<0xab>", "a"]) == "叫a"


def test_no_decoder_joins_with_spaces_like_hf():
    vocab = {"a": 0, "b": 1, "##c": 2, "[UNK]": 3}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokens = ["a", "##c", "b"]
    assert D.decode_tokens(tokens, None) == tok.decode([vocab[t] for t in tokens])


@pytest.mark.parametrize("ours,theirs", PAIRS, ids=lambda x: type(x).__name__)
def test_hf_json_round_trip(ours, theirs):
    hf_json = json.loads(theirs.__getstate__())
    assert ours.to_hf() == hf_json
    again = D.decoder_from_hf(hf_json)
    assert again.to_hf() == hf_json
    assert again.decode(["▁a", "##b", "</w>", "<0x41>"]) == \
        theirs.decode(["▁a", "##b", "</w>", "<0x41>"])


def test_decoder_from_hf_edges():
    assert D.decoder_from_hf(None) is None
    legacy = D.decoder_from_hf({"type": "Metaspace", "replacement": "▁",
                                "add_prefix_space": False})
    assert legacy.decode(["▁a"]) == " a"
    with pytest.raises(TokcolumnarError):
        D.decoder_from_hf({"type": "CTC"})
