"""SentencePiece's `.model` files (tokcolumnar/models/sentencepiece_model.py): what we write
loads in `sentencepiece.SentencePieceProcessor` and encodes as the model spm_train trained on
the same corpus; what spm_train writes (nmt_nfkc's compiled char map included) reads back to
its pieces, scores and types, and written again encodes the same."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import sentencepiece as spm

from tests.support.corpora import corpus
from tests.training.test_unigram import columnar
from tokcolumnar.errors import TokcolumnarValueError
from tokcolumnar.models import sentencepiece_model as spmodel
from tokcolumnar.tokenizer import Tokenizer

LINES = ["The quick brown fox jumps over the lazy dog.", "A quick brown dog!",
         "lazy foxes, lazy dogs", "over and over again", "the end"]
HELD = ["the quick dog", "brown foxes jump", "Über naïve café", "  spaced   out  ", "z"]


def spm_model(lines: list[str], vocab: int, **options) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in.txt"
        src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(Path(d) / "m"),
                                       vocab_size=vocab, model_type="unigram", minloglevel=2,
                                       **options)
        return (Path(d) / "m.model").read_bytes()


def test_our_model_loads_and_encodes_as_spm() -> None:
    vocab = 39
    reference = spm.SentencePieceProcessor(
        model_proto=spm_model(LINES, vocab, normalization_rule_name="identity", num_threads=1))
    trained = columnar(LINES, vocab, 1)
    ours = spmodel.unigram_model([p for p, _ in trained], [s for _, s in trained],
                                 spmodel.NormalizerSpec(name="identity"))
    sp = spm.SentencePieceProcessor(model_proto=ours.to_bytes())
    assert sp.get_piece_size() == reference.get_piece_size()
    assert [sp.id_to_piece(i) for i in range(vocab)] == \
        [reference.id_to_piece(i) for i in range(vocab)]
    assert sp.is_unknown(0) and sp.is_control(1) and sp.is_control(2)
    for line in LINES + HELD:
        assert sp.encode(line) == reference.encode(line)


def test_spm_model_round_trip() -> None:
    data = spm_model(LINES, 38)  # the default nmt_nfkc rule: a compiled char map
    model = spmodel.SentencePieceModel.from_bytes(data)
    sp = spm.SentencePieceProcessor(model_proto=data)
    assert [p.piece for p in model.pieces] == [sp.id_to_piece(i) for i in range(38)]
    assert [p.score for p in model.pieces] == [sp.get_score(i) for i in range(38)]
    assert [p.type for p in model.pieces[:3]] == [spmodel.UNKNOWN, spmodel.CONTROL,
                                                  spmodel.CONTROL]
    assert model.normalizer.name == "nmt_nfkc" and model.normalizer.precompiled_charsmap
    again = spm.SentencePieceProcessor(model_proto=model.to_bytes())
    for line in LINES + HELD + ["ｆｕｌｌ\u3000width ①"]:
        assert again.encode(line) == sp.encode(line)
        assert again.normalize(line) == sp.normalize(line)


@pytest.mark.parametrize("data", [b"", b"\x0a\x05ab", b"\x0f", b"\x0a\xff\xff\xff\xff\xff"
                                  b"\xff\xff\xff\xff\xff\x01"])
def test_not_a_model(data: bytes) -> None:
    with pytest.raises(TokcolumnarValueError, match="not a SentencePiece model"):
        spmodel.SentencePieceModel.from_bytes(data)


@pytest.mark.corpus
def test_held_out_lines_encode_as_spm() -> None:
    with open(corpus("small/en_botchan.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    train, held = lines[:1500], lines[1500:2500]
    reference = spm.SentencePieceProcessor(
        model_proto=spm_model(train, 1000, normalization_rule_name="identity"))
    trained = columnar(train, 1000, 16)
    ours = spmodel.unigram_model([p for p, _ in trained], [s for _, s in trained],
                                 spmodel.NormalizerSpec(name="identity"))
    sp = spm.SentencePieceProcessor(model_proto=ours.to_bytes())
    assert [sp.encode(line) for line in held] == [reference.encode(line) for line in held]


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_read_spm_model_as_tokenizer(byte_fallback: bool) -> None:
    """spm_train's `.model` (identity rule) read as our tokenizer encodes and decodes as
    SentencePieceProcessor."""
    vocab = 38 + (256 if byte_fallback else 0)
    data = spm_model(LINES, vocab, normalization_rule_name="identity",
                     byte_fallback=byte_fallback)
    sp = spm.SentencePieceProcessor(model_proto=data)
    tok = Tokenizer.from_sentencepiece(data)
    got = tok.encode_ids(LINES + HELD)["ids"].to_list()
    assert got == [sp.encode(line) for line in LINES + HELD]
    for ids in got:
        if 0 not in ids:  # SentencePiece decodes <unk> as " ⁇ ", HF skips it (a special token)
            assert tok.decode(ids) == sp.decode(ids)


def test_read_nmt_nfkc_model_as_tokenizer() -> None:
    """spm_train's default rule: its compiled char map becomes a `Precompiled` normalizer, and
    the tokenizer encodes as SentencePieceProcessor (full-width forms, ligatures, other
    spaces and control characters included)."""
    data = spm_model(LINES, 38)
    sp = spm.SentencePieceProcessor(model_proto=data)
    texts = LINES + HELD + ["ｔｈｅ　ｑｕｉｃｋ ﬁx", "\tlazy\u00a0dog\x07", "①②"]
    got = Tokenizer.from_sentencepiece(data).encode_ids(texts)["ids"].to_list()
    assert got == [sp.encode(line) for line in texts]


def test_named_rule_without_charsmap_is_refused() -> None:
    model = spmodel.SentencePieceModel.from_bytes(spm_model(LINES, 38))
    model.normalizer.precompiled_charsmap = b""
    with pytest.raises(TokcolumnarValueError, match="rule 'nmt_nfkc' has no compiled char map"):
        Tokenizer.from_sentencepiece(model.to_bytes())


def test_cli_encode_with_a_model_file(tmp_path: Path) -> None:
    """`encode --tokenizer m.model`: spm_train's model (nmt_nfkc) read as a tokenizer, the ids
    and tokens SentencePieceProcessor gives; a file that is no model is refused cleanly."""
    import polars as pl

    from tests.support.cli import assert_clean_error, run_cli

    model = tmp_path / "m.model"
    model.write_bytes(spm_model(LINES, 38))
    sp = spm.SentencePieceProcessor(model_file=str(model))
    texts = LINES + HELD + ["ｔｈｅ　ｑｕｉｃｋ ﬁx"]
    src = tmp_path / "in.txt"
    src.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "out.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(model), "--out", str(out),
                   "--columns", "ids,tokens")
    assert proc.returncode == 0, proc.stderr
    got = pl.read_parquet(out)
    assert got["ids"].to_list() == sp.encode(texts)
    # (an unknown piece is `<unk>`, as in HF; SentencePiece's pieces show the text it covers)
    assert got["tokens"].to_list() == [[sp.id_to_piece(i) for i in ids]
                                       for ids in sp.encode(texts)]
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\x0a\x05abc")
    proc = run_cli("encode", str(src), "--tokenizer", str(bad), "--out",
                   str(tmp_path / "o2.parquet"))
    assert_clean_error(proc, str(bad))
