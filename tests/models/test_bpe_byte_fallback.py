"""HF BPE models with `byte_fallback` (and `fuse_unk`) from tokenizer.json files we did not
write: a SentencePiece BPE model (`spm_train --model_type=bpe --byte_fallback`) converted by
transformers' own `SpmConverter`, and models built with HF's classes. `tokcolumnar encode` and
our `Tokenizer` give HF's ids (and offsets where our encoder has them: not through the
SentencePiece conversion's regex `Replace` normalizers, see docs/llama2.md)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import PRIMER, corpus
from tests.support.spm_reference import hf_from_spm, spm_bpe_model
from tokcolumnar.tokenizer import Tokenizer

BYTES = [f"<0x{b:02X}>" for b in range(256)]
TEXTS = ["naïve café ☃☃ 日本語", "  two  spaces ", "▁lead", "\ttab", "", " ", "x\u0301y ﬆ 𝔘"]


@pytest.fixture(scope="module")
def spm_converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tokenizer.json of an spm_train BPE model with byte fallback, by transformers."""
    d = tmp_path_factory.mktemp("spm")
    lines = PRIMER.read_text(encoding="utf-8").split("\n")
    model = spm_bpe_model(lines, 600, d / "m.model", character_coverage=0.98)
    path = d / "tokenizer.json"
    hf_from_spm(model).save(str(path))
    return path


def test_spm_conversion_is_llama_like(spm_converted: Path) -> None:
    model = json.loads(spm_converted.read_text(encoding="utf-8"))["model"]
    assert (model["type"], model["byte_fallback"], model["fuse_unk"]) == ("BPE", True, True)
    assert all(b in model["vocab"] for b in BYTES)


def test_encode_cli_gives_hf_ids(tmp_path: Path, spm_converted: Path) -> None:
    from tokenizers import Tokenizer as HFTokenizer

    lines = PRIMER.read_text(encoding="utf-8").split("\n")[:200] + TEXTS
    lines = [line for line in lines if line]  # (an empty line is no row of a text input)
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(spm_converted), "--out", str(out),
                   "--columns", "ids,tokens", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    hf = HFTokenizer.from_file(str(spm_converted)).encode_batch(lines)
    assert df["ids"].to_list() == [e.ids for e in hf]
    assert df["tokens"].to_list() == [e.tokens for e in hf]
    assert any("<0xE2>" in e.tokens for e in hf)  # byte fallback was exercised


@pytest.mark.corpus
def test_spm_converted_on_a_corpus_and_as_sentencepiece(spm_converted: Path) -> None:
    """Every line of the UDHR (every script: most characters fall back to bytes): ours = HF =
    SentencePiece's own processor on the model."""
    import sentencepiece as spm
    from tokenizers import Tokenizer as HFTokenizer

    lines = corpus("small/udhr_multiscript.txt").read_text(encoding="utf-8").split("\n")
    hf = [e.ids for e in HFTokenizer.from_file(str(spm_converted)).encode_batch(
        lines, add_special_tokens=False)]
    assert Tokenizer.from_file(spm_converted).encode_ids(lines)["ids"].to_list() == hf
    sp = spm.SentencePieceProcessor(model_file=str(spm_converted.parent / "m.model"))
    assert sp.encode(lines) == hf


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=8))
def test_any_text_as_hf(spm_converted: Path, texts: list[str]) -> None:
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(spm_converted))
    ours = Tokenizer.from_file(spm_converted)
    assert ours.encode_ids(texts)["ids"].to_list() == [e.ids for e in hf.encode_batch(texts)]


def whitespace_bpe(tmp_path: Path, byte_fallback: bool, fuse_unk: bool) -> Path:
    """An HF BPE (HF's trainer, then the model's options set) over a cut alphabet, with the
    Whitespace pre-tokenizer, whose offsets our encoder computes."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    tok = HFTokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(PRIMER.read_text(encoding="utf-8").split("\n"), trainers.BpeTrainer(
        vocab_size=500, limit_alphabet=40, show_progress=False,
        special_tokens=["<unk>"] + (BYTES if byte_fallback else [])))
    d = json.loads(tok.to_str())
    d["model"].update(byte_fallback=byte_fallback, fuse_unk=fuse_unk)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("byte_fallback,fuse_unk", [(True, True), (True, False),
                                                    (False, True)])
def test_ids_and_offsets_as_hf(tmp_path: Path, byte_fallback: bool, fuse_unk: bool) -> None:
    """A byte piece spans its byte's character, a fused unknown token its run of
    characters, as in HF."""
    from tokenizers import Tokenizer as HFTokenizer

    path = whitespace_bpe(tmp_path, byte_fallback, fuse_unk)
    lines = PRIMER.read_text(encoding="utf-8").split("\n")[:300] + TEXTS + [
        "Ωmega ΩΩ x", "ΩΩ", "é日本"]
    hf = HFTokenizer.from_file(str(path)).encode_batch(lines)
    ours = Tokenizer.from_file(path).encode_frame(pl.Series(lines), offsets=True)
    assert ours["ids"].to_list() == [e.ids for e in hf]
    assert [list(zip(s, e)) for s, e in zip(ours["starts"].to_list(),
                                            ours["ends"].to_list())] == [e.offsets for e in hf]
    unk_or_bytes = {0} | (set(range(1, 257)) if byte_fallback else set())
    assert any(unk_or_bytes & set(e.ids) for e in hf)


def test_missing_byte_piece_is_refused(tmp_path: Path) -> None:
    """HF sends a character whose byte pieces are not all there to the unknown token (and
    may emit some of its bytes first): not implemented, so refused in one line."""
    path = whitespace_bpe(tmp_path, True, True)
    d = json.loads(path.read_text(encoding="utf-8"))
    del d["model"]["vocab"]["<0x80>"]
    d["added_tokens"] = [t for t in d["added_tokens"] if t["content"] != "<0x80>"]
    path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    src = tmp_path / "in.txt"
    src.write_text("text\n", encoding="utf-8")
    proc = run_cli("encode", str(src), "--tokenizer", str(path), "--out",
                   str(tmp_path / "o.parquet"))
    assert_clean_error(proc, "byte_fallback=true needs the 256 byte pieces in the vocabulary")


@pytest.mark.corpus
@pytest.mark.parametrize("options", [
    {},  # spm_train's defaults: nmt_nfkc (its char map in the file), extra spaces removed
    {"normalization_rule_name": "nfkc"},
    {"remove_extra_whitespaces": False},  # Llama 2's: no rule, extra spaces kept
], ids=["nmt_nfkc", "nfkc", "llama2"])
def test_sentencepiece_bpe_model_as_tokenizer(tmp_path: Path, options: dict) -> None:
    """`encode --tokenizer m.model` with spm_train's BPE model: SentencePiece's ids on every
    line of two corpora and on unseen scripts (byte fallback)."""
    import sentencepiece as spm

    lines = corpus("small/en_botchan.txt").read_text(encoding="utf-8").split("\n")
    options = {"normalization_rule_name": "nmt_nfkc", "remove_extra_whitespaces": True,
               **options}
    model = spm_bpe_model(lines, 1500, tmp_path / "m.model", **options)
    texts = lines + corpus("small/udhr_multiscript.txt").read_text(
        encoding="utf-8").split("\n") + TEXTS + ["   ", "a ▁ ▁b ▁", "ｆｕｌｌ　ｗｉｄｔｈ ①"]
    texts = [t for t in texts if t and not any(s in t for s in ("<unk>", "<s>", "</s>"))]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(model), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert pl.read_parquet(out)["ids"].to_list() == sp.encode(texts)
