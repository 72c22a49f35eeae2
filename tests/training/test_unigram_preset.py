"""`--preset sentencepiece` (spm_train --model_type=unigram with its defaults: the nmt_nfkc rule,
16 threads) and `--byte-fallback` against the real SentencePiece: the same pieces and float32
scores; SentencePiece loading our tokenizer.model encodes every line as the model spm_train
wrote, and our encoder as HF loading our tokenizer.json."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus, small_tiered


def spm_model(src: Path, prefix: Path, **options) -> list[tuple[str, float]]:
    """spm_train's pieces (all, meta included) and scores with its defaults but `options`."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(prefix),
                                   model_type="unigram", minloglevel=2, **options)
    sp = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


def our_pieces(out: Path) -> list[tuple[str, float]]:
    vocab = pl.read_parquet(out / "vocab.parquet")
    return list(zip(vocab["token"].to_list(), vocab["score"].to_list()))


def encodes_alike(out: Path, reference_model: str, lines: list[str]) -> None:
    """SentencePiece with our tokenizer.model = SentencePiece with spm_train's model, and our
    encoder = HF with our tokenizer.json, on every line."""
    import sentencepiece as spm
    from tokenizers import Tokenizer as HFTokenizer

    from tokcolumnar.tokenizer import Tokenizer

    ref = spm.SentencePieceProcessor(model_file=reference_model)
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    assert sp.encode(lines) == ref.encode(lines)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    ours = Tokenizer.load(out).encode_ids(lines)["ids"].to_list()
    assert ours == [e.ids for e in hf.encode_batch(lines)]


# 8,000 pieces is more than most small corpora hold (spm_train refuses them too): 4,000
SIZES = {"zh_hongloumeng_300k.txt": 8000}


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_tiered("en_botchan.txt"))
def test_preset_sentencepiece_as_spm_train(tmp_path: Path, name: str) -> None:
    src = corpus(f"small/{name}")
    size = SIZES.get(name, 4000)
    expected = spm_model(src, tmp_path / "spm", vocab_size=size)
    out = tmp_path / "out"
    proc = run_cli("train", str(src), "--preset", "sentencepiece", "--vocab-size", str(size),
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert our_pieces(out) == expected
    lines = src.read_text(encoding="utf-8").split("\n")
    encodes_alike(out, str(tmp_path / "spm.model"), lines)


LINES = [f"line {i}: the quick brown fox {'jumps' if i % 2 else 'sleeps'} over dog {i % 7}"
         for i in range(60)] + ["  Über   naïve café  ", "ｆｕｌｌ ｗｉｄｔｈ ①", "x"]


@pytest.mark.parametrize("args,options", [
    (["--preset", "sentencepiece", "--vocab-size", "48"], {}),
    (["--model", "unigram", "--byte-fallback", "--vocab-size", "310"],
     {"normalization_rule_name": "identity"}),
    (["--preset", "sentencepiece", "--byte-fallback", "--vocab-size", "300"], {})])
def test_options_as_spm_train(tmp_path: Path, args: list[str], options: dict) -> None:
    """The preset's normalization (full-width forms, ①, runs of spaces) and byte fallback (the
    256 byte pieces after the meta pieces, an unknown character spelled in bytes)."""
    src = tmp_path / "in.txt"
    src.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    size = int(args[args.index("--vocab-size") + 1])
    expected = spm_model(src, tmp_path / "spm", vocab_size=size,
                         byte_fallback="--byte-fallback" in args, **options)
    out = tmp_path / "out"
    proc = run_cli("train", str(src), *args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert our_pieces(out) == expected
    encodes_alike(out, str(tmp_path / "spm.model"),
                  LINES + ["Zürich ☃ 3", "日本語", "ｘ  ｙ", "\tTab\u00a0nbsp"])


@pytest.mark.parametrize("args,needle", [
    (["--byte-fallback", "--model", "wordpiece"],
     "--byte-fallback applies to --model bpe and unigram only"),
    (["--preset", "sentencepiece", "--normalizer", "nfkc"],
     "--preset sentencepiece fixes --normalizer nmt_nfkc"),
    (["--preset", "sentencepiece", "--model", "bpe"], "--preset sentencepiece fixes --model"),
    pytest.param(["--normalizer", "nmt_nfkc", "--engine", "duckdb"],
                 "nmt_nfkc runs on the Polars engine", marks=pytest.mark.duckdb)])
def test_refusals(tmp_path: Path, args: list[str], needle: str) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a b c\n", encoding="utf-8")
    proc = run_cli("train", str(src), *args, "--out", str(tmp_path / "out"))
    assert_clean_error(proc, needle)




def test_lines_read_as_one_chunk(tmp_path: Path) -> None:
    """The lines of several inputs reach the normalizer as one chunk: Polars builds the
    `nmt_nfkc` automaton once per chunk (~0.45 CPU-s each)."""
    from tokcolumnar.config import TrainConfig
    from tokcolumnar.training.unigram_pipeline import read_lines

    paths = []
    for i in range(3):
        paths.append(tmp_path / f"part{i}.txt")
        paths[-1].write_text(f"line {i}\nother {i}\n", encoding="utf-8")
    lines = read_lines([str(p) for p in paths], TrainConfig(model="unigram"))
    assert lines.to_list() == ["line 0", "other 0", "line 1", "other 1", "line 2", "other 2"]
    assert lines.n_chunks() == 1


@pytest.mark.corpus
def test_summary_line_counts_em_rounds_not_merges(tmp_path: Path) -> None:
    """A Unigram run is pruned in EM rounds: the summary says how many (rounds.parquet's
    rows), not "0 merges"."""
    out = tmp_path / "out"
    proc = run_cli("train", str(corpus("small/en_botchan.txt")), "--preset", "sentencepiece",
                   "--vocab-size", "2000", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rounds = pl.read_parquet(out / "rounds.parquet").height
    assert rounds >= 1
    summary = proc.stderr.strip().splitlines()[-1]
    assert summary.startswith("trained unigram vocab of 2,000 tokens")
    assert f"({rounds:,} EM rounds)" in summary and "merges" not in summary
