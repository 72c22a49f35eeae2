"""`--preset llama2` and `train --model bpe --byte-fallback` (docs/llama2.md) against the real
references: the vocabulary and merges of HF's `BpeTrainer` on the same words (the 256 byte
pieces given to it as special tokens after `<unk>` `<s>` `</s>`), and the three encoders of
the result — HF loading our tokenizer.json, SentencePiece loading our tokenizer.model, ours —
giving the same ids on every line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import MEDIUM, corpus, small_scripts
from tests.support.markers import heavy, tiered
from tokcolumnar.tokenizer import Tokenizer

SPECIAL = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{b:02X}>" for b in range(256)]


def read_lines(src: Path) -> list[str]:
    return src.read_text(encoding="utf-8").split("\n")


def hf_bpe_trainer(lines: list[str], vocab_size: int, limit_alphabet: int | None = None,
                   llama2: bool = True) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """HF's BpeTrainer on the words we train on: Llama 2's normalizers (`▁` before every line,
    spaces as `▁`) and a word before each `▁` (`Metaspace(prepend_scheme="never")`), or
    HF's default `Whitespace` pre-tokenizer; the byte pieces as special tokens."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    tok = HFTokenizer(models.BPE())
    if llama2:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    options = {"limit_alphabet": limit_alphabet} if limit_alphabet else {}
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL + BYTES, show_progress=False, **options))
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], [tuple(m) for m in model["merges"]]


def trained(out: Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    vocab = pl.read_parquet(out / "vocab.parquet")
    merges = pl.read_parquet(out / "merges.parquet")
    return (dict(zip(vocab["token"].to_list(), vocab["id"].to_list())),
            list(zip(merges["left"].to_list(), merges["right"].to_list())))


def untied_limit(lines: list[str], below: int, llama2: bool = True) -> int:
    """A --limit-alphabet under `below` whose cut falls between two character counts: HF
    drops the characters tied at the cut in hash order (`compute_alphabet`'s unstable sort),
    ours by code point, so only an untied cut is comparable."""
    counts: Counter[str] = Counter()
    for line in lines:
        if line:
            counts.update("▁" + line.replace(" ", "▁") if llama2 else line.replace(" ", ""))
    ranked = sorted(counts.values(), reverse=True)
    return next(k for k in range(min(below, len(ranked) - 1), 0, -1)
                if ranked[k - 1] != ranked[k])


# (vocabulary size, alphabet limit below) per corpus: the CJK ones with a cut alphabet, whose
# cut characters then encode as byte pieces
SIZES = {"zh_hongloumeng_300k.txt": (4000, 1200), "ja_wagahai_300k.txt": (4000, 900),
         "udhr_multiscript.txt": (4000, 600)}


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("zh_hongloumeng_300k.txt"))
def test_llama2_trains_as_hf_bpe_trainer(tmp_path: Path, name: str) -> None:
    src = corpus(f"small/{name}")
    lines = read_lines(src)
    size, below = SIZES.get(name, (3000, None))
    limit = untied_limit(lines, below) if below else None
    out = tmp_path / "out"
    args = ["--limit-alphabet", str(limit)] if limit else []
    proc = run_cli("train", str(src), "--preset", "llama2", "--vocab-size", str(size),
                   *args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    vocab, merges = trained(out)
    assert (vocab, merges) == hf_bpe_trainer(lines, size, limit)
    assert [t for t, _ in sorted(vocab.items(), key=lambda x: x[1])][:259] == SPECIAL + BYTES


def test_byte_fallback_with_another_pre_tokenizer_trains_as_hf(tmp_path: Path) -> None:
    """`--byte-fallback` alone: the byte pieces after the special tokens, the words of any
    character pre-tokenizer (here `whitespace`), HF's merges; the characters cut by
    --limit-alphabet encode as their bytes (in HF too, its model given `byte_fallback`)."""
    from tokenizers import Tokenizer as HFTokenizer

    lines = [f"naïve café — the quick brown fox {i}" for i in range(9)] + [
        "日本語 the lazy dog, 東京", "x☃y ☃☃ Ω", "naïve ☃ Ω"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    limit = untied_limit(lines, 30, llama2=False)
    proc = run_cli("train", str(src), "--byte-fallback", "--special-tokens", ",".join(SPECIAL),
                   "--unk-token", "<unk>", "--vocab-size", "320", "--limit-alphabet",
                   str(limit), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert trained(out) == hf_bpe_trainer(lines, 320, limit, llama2=False)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    texts = lines + ["unseen ☂ ünïcödé 𝔘"]
    ours = Tokenizer.load(out)
    assert ours.encode_ids(texts)["ids"].to_list() == [e.ids for e in hf.encode_batch(texts)]
    assert "<0xE2>" in hf.encode("☂").tokens
    assert [ours.decode(e.ids) for e in hf.encode_batch(texts)] == \
        [hf.decode(e.ids) for e in hf.encode_batch(texts)]


def encodes_alike(out: Path, lines: list[str]) -> None:
    """SentencePiece with our tokenizer.model, HF with our tokenizer.json and our encoder give
    the same ids on every line, and ours HF's offsets (SentencePiece on the lines without a
    literal `<unk>` `<s>` `</s>`: HF, as with Llama 2's own tokenizer.json, takes those as the
    special tokens, where SentencePiece spells them in pieces — ours is HF there)."""
    import sentencepiece as spm
    from tokenizers import Tokenizer as HFTokenizer

    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    encodings = hf.encode_batch(lines)
    theirs = [e.ids for e in encodings]
    frame = Tokenizer.load(out).encode_frame(pl.Series(lines), offsets=True)
    assert frame["ids"].to_list() == theirs
    # offsets too: the `▁` Prepend puts before the text spans the text's first character
    assert [list(zip(s, e)) for s, e in zip(frame["starts"].to_list(),
                                            frame["ends"].to_list())] == \
        [e.offsets for e in encodings]
    plain = [i for i, line in enumerate(lines) if not any(t in line for t in SPECIAL)]
    expected = sp.encode([lines[i] for i in plain])
    assert [ids[1:] for ids in (theirs[i] for i in plain)] == expected
    # and our reading of the tokenizer.model (`encode --tokenizer tokenizer.model`)
    from_model = Tokenizer.load(out / "tokenizer.model")
    assert from_model.encode_ids([lines[i] for i in plain])["ids"].to_list() == expected
    assert all(ids[0] == 1 for ids in theirs)  # <s> first


@pytest.mark.corpus
@pytest.mark.parametrize("name", tiered(
    ["en_botchan.txt", "zh_hongloumeng_300k.txt", "ar_tashkeela_plain_300k.txt",
     "en_shakespeare_500k.txt", "en_taylorswift_wiki.txt", "ja_wagahai_300k.txt",
     "ru_pushkin_300k.txt", "udhr_multiscript.txt"],
    lambda n: n in ("en_botchan.txt", "zh_hongloumeng_300k.txt")))
def test_three_encoders_agree_on_small_corpora(tmp_path: Path, name: str) -> None:
    src = corpus(f"small/{name}")
    lines = read_lines(src)
    size, below = SIZES.get(name, (3000, None))
    out = tmp_path / "out"
    args = ["--limit-alphabet", str(below)] if below else []
    proc = run_cli("train", str(src), "--preset", "llama2", "--vocab-size", str(size), *args,
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    # its own lines, and text it has not seen: every script of the UDHR (byte fallback)
    held_out = read_lines(corpus("small/udhr_multiscript.txt"))
    encodes_alike(out, lines + held_out + ["  two  spaces ", "▁lead", "\ttab\x00nul", " "])


@pytest.mark.corpus
@pytest.mark.slow
# the full run: zh (~25 s: a cut alphabet, the rest spelled in bytes); en (~2 minutes: 258,003
# lines through three encoders), ja and ru (10-20 s each) with TOKCOLUMNAR_SLOW=1
@pytest.mark.parametrize("name", heavy(MEDIUM, full=lambda n: n == "zh.txt",
                                       fast=lambda n: False))
def test_three_encoders_agree_on_medium_corpora(tmp_path: Path, name: str) -> None:
    src = corpus(f"medium/{name}")
    out = tmp_path / "out"
    # (medium/zh has ~9,000 characters: a cut alphabet, the rest spelled in bytes)
    proc = run_cli("train", str(src), "--preset", "llama2", "--vocab-size", "8000",
                   "--limit-alphabet", "5000", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    encodes_alike(out, read_lines(src))


def test_tokenizer_files(tmp_path: Path) -> None:
    """tokenizer.json is Llama 2's setup; tokenizer.model a SentencePiece BPE model (type 2)
    with byte fallback, BYTE pieces and scores in id order; transformers loads the
    directory and encodes as HF does, decoding back to the text."""
    from transformers import AutoTokenizer

    from tokcolumnar.models.sentencepiece_model import (
        BPE,
        BYTE,
        CONTROL,
        NORMAL,
        UNKNOWN,
        SentencePieceModel,
    )

    src = tmp_path / "in.txt"
    src.write_text("the cat sat on the mat\nthe dog sat  on a log\n" * 5, encoding="utf-8")
    out = tmp_path / "out"
    proc = run_cli("train", str(src), "--preset", "llama2", "--vocab-size", "290",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert tok["normalizer"] == {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    assert tok["pre_tokenizer"] is None
    assert tok["decoder"] == {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    model = tok["model"]
    assert (model["unk_token"], model["fuse_unk"], model["byte_fallback"]) == ("<unk>", True, True)
    assert [(t["id"], t["content"]) for t in tok["added_tokens"]] == list(enumerate(SPECIAL))
    assert tok["post_processor"]["single"] == [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                               {"Sequence": {"id": "A", "type_id": 0}}]
    sp = SentencePieceModel.from_bytes((out / "tokenizer.model").read_bytes())
    assert sp.model_type == BPE and sp.byte_fallback
    assert [p.piece for p in sp.pieces] == sorted(model["vocab"], key=model["vocab"].get)
    assert [p.type for p in sp.pieces[:259]] == [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    assert {p.type for p in sp.pieces[259:]} == {NORMAL}
    assert [p.score for p in sp.pieces[259:]] == [-float(k) for k in range(len(sp.pieces) - 259)]
    assert not sp.normalizer.remove_extra_whitespaces and sp.normalizer.add_dummy_prefix
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>",
                                                                              "<unk>")
    hf = AutoTokenizer.from_pretrained(str(out))
    text = "the cat  sat on ☃ 日本"
    ids = hf(text)["input_ids"]
    assert ids == Tokenizer.load(out).encode(text).ids
    assert hf.decode(ids, skip_special_tokens=True) == text == Tokenizer.load(out).decode(ids)


@pytest.mark.parametrize("args,message", [
    (["--byte-fallback", "--pre-tokenizer", "byte-level"],
     "--pre-tokenizer byte-level already makes every byte a symbol"),
    (["--byte-fallback", "--preset", "gpt2"], "--pre-tokenizer byte-level already makes"),
    (["--byte-fallback", "--model", "wordpiece"], "applies to --model bpe and unigram only"),
    (["--byte-fallback", "--end-of-word-suffix", "</w>"],
     "--byte-fallback does not combine with --end-of-word-suffix"),
    pytest.param(["--byte-fallback", "--engine", "duckdb"], "runs on the Polars engine only",
                 marks=pytest.mark.duckdb),
    (["--byte-fallback", "--special-tokens", "<s>,<0x41>"],
     "--special-tokens <0x41> is one of --byte-fallback's byte pieces"),
    (["--preset", "llama2", "--normalizer", "nfkc"],
     "--preset llama2 fixes --normalizer none; got --normalizer nfkc"),
    (["--preset", "llama2", "--pre-tokenizer", "whitespace"],
     "--preset llama2 fixes --pre-tokenizer metaspace"),
    (["--preset", "llama2", "--model", "unigram"], "--preset llama2 fixes --model bpe"),
    (["--preset", "llama2", "--unk-token", "[UNK]"], "--preset llama2 fixes --unk-token"),
    (["--preset", "llama2", "--special-tokens", "<s>,</s>,<unk>"],
     "--preset llama2 needs --special-tokens to start with <unk>,<s>,</s>"),
])
def test_refused_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    src = tmp_path / "in.txt"
    src.write_text("some text\n", encoding="utf-8")
    proc = run_cli("train", str(src), *args, "--out", str(tmp_path / "out"))
    assert_clean_error(proc, message)
    assert not (tmp_path / "out").exists()


def test_extending_a_byte_fallback_base_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("some text here\nand more text\n", encoding="utf-8")
    base = tmp_path / "base"
    proc = run_cli("train", str(src), "--preset", "llama2", "--vocab-size", "280",
                   "--out", str(base))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("train", str(src), "--extend", str(base), "--vocab-size", "290",
                   "--out", str(tmp_path / "out"))
    assert_clean_error(proc, "--extend does not combine with BPE byte fallback yet")
    assert not (tmp_path / "out").exists()
