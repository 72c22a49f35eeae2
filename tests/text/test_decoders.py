"""Decoders give exactly HF `tokenizers`' text, and byte-level decoding inverts byte-level
pre-tokenization for any UTF-8 text."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
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


# --- columnar decoding (DecodeTable, decode_rows) ---------------------------------------------


POSITIONAL = [(ours, theirs) for ours, theirs in PAIRS if ours.positional]


def test_positional_decoders_are_the_expected_ones():
    """The decoders the columnar path takes; the others (whose text is not one piece per token)
    must keep decoding row by row."""
    assert {type(o).__name__ for o, _ in POSITIONAL} == {
        "BPEDecoder", "WordPieceDecoder", "MetaspaceDecoder", "ByteLevelDecoder"}
    assert D.DecodeTable.build(["a"], D.SequenceDecoder([D.FuseDecoder()])) is None


def _rows_as_ids(rows):
    """The token rows as a list[u32] Series over a vocabulary of their distinct tokens."""
    vocab = sorted({t for row in rows if row is not None for t in row})
    index = {t: i for i, t in enumerate(vocab)}
    ids = pl.Series("ids", [None if row is None else [index[t] for t in row] for row in rows],
                    dtype=pl.List(pl.UInt32))
    return vocab, ids


@pytest.mark.parametrize("ours,theirs", [*POSITIONAL, (None, None)],
                         ids=lambda x: type(x).__name__)
@FAST
@given(rows=st.lists(st.one_of(st.none(), piece_lists()), max_size=6),
       skip_first=st.booleans())
def test_decode_rows_equals_hf_row_by_row(ours, theirs, rows, skip_first):
    """A column of rows (empty rows, null rows, one-token rows, a skipped id) decodes to HF's
    text of each row (no decoder: HF joins with spaces)."""
    vocab, ids = _rows_as_ids(rows)
    skip = np.zeros(len(vocab), dtype=bool)
    if skip_first and vocab:
        skip[0] = True
    want = []
    for row in rows:
        if row is None:
            want.append(None)
            continue
        kept = [t for t in row if not skip[vocab.index(t)]]
        text = D.decode_tokens(kept, None) if theirs is None else hf_decode(theirs, kept)
        assume(text is not None)
        want.append(text)
    table = D.DecodeTable.build(vocab, ours)
    assert D.decode_rows(ids, table, skip).to_list() == want


@FAST
@given(data=st.lists(st.binary(max_size=12), max_size=6),
       cuts=st.lists(st.integers(0, 12), max_size=4))
def test_decode_rows_byte_level_invalid_utf8_like_hf(data, cuts):
    """Rows whose bytes are not UTF-8 (characters cut between tokens) decode as HF's
    from_utf8_lossy."""
    rows = []
    for chunk in data:
        mapped = "".join(BYTES_TO_UNICODE[b] for b in chunk)
        bounds = sorted({0, len(mapped), *(c for c in cuts if c <= len(mapped))})
        rows.append([mapped[a:b] for a, b in zip(bounds, bounds[1:]) if b > a])
    vocab, ids = _rows_as_ids(rows)
    table = D.DecodeTable.build(vocab, D.ByteLevelDecoder())
    assert D.decode_rows(ids, table, None).to_list() == [
        hfd.ByteLevel().decode(row) for row in rows]


@FAST
@given(rows=st.lists(st.binary(max_size=8), max_size=8))
def test_utf8_broken_rows_lists_every_invalid_row(rows):
    """Every row left out of `utf8_broken_rows` is valid UTF-8 on its own (the rows listed may
    include valid ones: they only cost a Python decode)."""
    data = np.frombuffer(b"".join(rows), dtype=np.uint8)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    broken = set(D.utf8_broken_rows(data, offsets).tolist())
    for i, row in enumerate(rows):
        if i not in broken:
            row.decode("utf-8")  # raises if the row is invalid
        else:
            assert row  # an empty row is never listed
