"""Extending a Unigram base (`--extend DIR` on a `--model unigram` output;
`training/extend_unigram.py`): the base's ids, pieces and scores stay; the pieces appended are
SentencePiece's own model of the new corpus (spm_train, the same options) minus the base's,
characters first, then by score; sentencepiece, HF and our encoder agree on the result."""

from __future__ import annotations

import polars as pl
import pytest

from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus
from tests.support.spm_reference import spm_unigram
from tokcolumnar import Tokenizer

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def english_base(tmp_path_factory):
    out = tmp_path_factory.mktemp("unigram") / "en2k"
    proc = run_cli("train", str(corpus("small/en_botchan.txt")), "--preset", "sentencepiece",
                   "--vocab-size", "2000", "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("byte_fallback", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_english_base_extended_with_chinese(tmp_path, english_base, byte_fallback):
    import sentencepiece as spm
    from tokenizers import Tokenizer as HFTokenizer

    lines = corpus("small/zh_hongloumeng_300k.txt").read_text(encoding="utf-8").splitlines()
    held = [line for i, line in enumerate(lines) if i % 50 == 0]
    train_lines = [line for i, line in enumerate(lines) if i % 50]
    src = tmp_path / "zh_train.txt"
    src.write_text("".join(line + "\n" for line in train_lines), encoding="utf-8")
    base = english_base
    if byte_fallback:
        base = tmp_path / "en-bytes"
        proc = run_cli("train", str(corpus("small/en_botchan.txt")), "--preset",
                       "sentencepiece", "--byte-fallback", "--vocab-size", "2000", "--out",
                       str(base), "-q")
        assert proc.returncode == 0, proc.stderr
    out = tmp_path / "ext"
    proc = run_cli("train", str(src), "--extend", str(base), "--vocab-size", "4000",
                   "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    vocab = pl.read_parquet(out / "vocab.parquet")
    old = pl.read_parquet(base / "vocab.parquet")
    # every base id, piece, kind and score
    assert vocab.height == 4000
    assert vocab.head(old.height).drop("origin").equals(old)
    assert vocab["origin"].to_list() == ["base"] * old.height + ["extend"] * (4000 - old.height)
    # the appended pieces: spm_train's model of the new corpus at 4000 (the preset's options:
    # nmt_nfkc, 16 threads), its pieces the base lacks, characters first, then by score
    ref = spm_unigram(train_lines, 4000, num_threads=16, normalization_rule_name="nmt_nfkc",
                      byte_fallback=byte_fallback)
    known = set(old["token"].to_list())
    new = sorted(((p, s) for p, s in ref if p not in known),
                 key=lambda ps: (len(ps[0]) > 1, -ps[1], ps[0]))
    got = list(zip(vocab["token"].to_list()[old.height:], vocab["score"].to_list()[old.height:]))
    assert got == new[:4000 - old.height]
    # sentencepiece (tokenizer.model), HF (tokenizer.json) and our encoder: the same ids
    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    ours = Tokenizer.from_dir(out).encode_ids(held).get_column("ids").to_list()
    assert ours == [sp.encode(line) for line in held]
    assert ours == [e.ids for e in hf.encode_batch(held)]
    # the base spells Chinese as <unk> (id 0) or, with byte fallback, in 3 byte pieces a
    # character; the extension in pieces of its own
    before = Tokenizer.from_dir(base).encode_ids(held).get_column("ids").to_list()
    unknown = [sum(i == 0 for i in ids) for ids in (sum(before, []), sum(ours, []))]
    if byte_fallback:
        assert unknown == [0, 0]
        assert sum(map(len, ours)) * 2 < sum(map(len, before))
    else:  # (2,000 new pieces do not spell every character of the novel: some <unk> stay)
        assert unknown[1] * 2 < unknown[0], unknown


@pytest.mark.parametrize("args,needle", [
    (["--vocab-size", "2000"], "is not above the base's 2,000 tokens"),
    (["--vocab-size", "3000", "--normalizer", "nfc"], "contradicts the base"),
    (["--vocab-size", "100000"], "pieces that the base"),
])
def test_bad_unigram_extension_is_one_line(tmp_path, english_base, args, needle):
    src = tmp_path / "zh.txt"
    src.write_text("".join(corpus("small/zh_hongloumeng_300k.txt").read_text(
        encoding="utf-8").splitlines(keepends=True)[:300]), encoding="utf-8")
    proc = run_cli("train", str(src), "--extend", str(english_base), *args,
                   "--out", str(tmp_path / "o"))
    assert_clean_error(proc, needle)
    assert not (tmp_path / "o").exists()
