"""The dictionary segmenters (`--pre-tokenizer jieba|mecab`) against their reference libraries
and HF: on every line of the real corpora our words are the reference's segments split as HF
`WhitespaceSplit` splits them, and training gives merges identical to HF `BpeTrainer` with
`WhitespaceSplit` on the text pre-segmented by the reference and joined with spaces.

The tests that run a segmenter skip, naming the extra, when it is not installed (CI installs
both: .ci/run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from tests.support.cli import ROOT, assert_clean_error, run_cli
from tests.support.corpora import corpus
from tests.support.examples import examples
from tests.support.markers import heavy
from tokcolumnar import Tokenizer, TrainConfig, train
from tokcolumnar.errors import TokcolumnarError, TokcolumnarValueError
from tokcolumnar.text import segmenters
from tokcolumnar.text.segmenters import JIEBA_CHUNK, MECAB_MAX_LINE_BYTES, build_segmenter

WHITESPACE_SPLIT = pre_tokenizers.WhitespaceSplit()


def need(module: str, extra: str):
    return pytest.importorskip(module, reason=f"needs the extra tokcolumnar[{extra}] "
                               f"(pip install 'tokcolumnar[{extra}]')")


def rjieba_cut(hmm: bool):
    rjieba = need("rjieba", "zh")
    return lambda line: rjieba.cut(line, hmm)


def mecab_cut(split: str):
    """MeCab (fugashi + unidic-lite) as its users call it: node surfaces; with `chars`, the
    unknown kanji / kana nodes as characters."""
    fugashi = need("fugashi", "ja")
    unidic_lite = need("unidic_lite", "ja")
    dic = unidic_lite.DICDIR
    tagger = fugashi.GenericTagger(f'-r "{os.path.join(dic, "mecabrc")}" -d "{dic}"')

    def cut(line: str) -> list[str]:
        out = []
        for n in tagger(line):
            if split == "chars" and n.is_unk and n.char_type in (2, 6, 7, 8):
                out.extend(n.surface)
            else:
                out.append(n.surface)
        return out
    return cut


def reference(name: str, split: str):
    if name == "jieba":
        return rjieba_cut(split == "words")
    return mecab_cut(split)


def lines_of(path: Path) -> list[str]:
    """The lines as our reader gives them (cut at "\\n", which stays on the line)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def hf_words(segments: list[str]) -> list[str]:
    """HF `WhitespaceSplit` on the segments joined with spaces."""
    return [w for w, _ in WHITESPACE_SPLIT.pre_tokenize_str(" ".join(segments))]


def presegment(path: Path, name: str, split: str, out: Path) -> Path:
    """The corpus cut by the reference, one output line per input line (the line ending and a
    "\\r" before it left out, as our segmenters do)."""
    cut = reference(name, split)
    with open(out, "w", encoding="utf-8") as f:
        for line in lines_of(path):
            f.write(" ".join(cut(line.removesuffix("\r"))) + "\n")
    return out


CASES = [("jieba", "small/zh_hongloumeng_300k.txt", "words"),
         ("jieba", "small/zh_hongloumeng_300k.txt", "chars"),
         ("jieba", "medium/zh.txt", "words"),
         ("jieba", "medium/zh.txt", "chars"),
         ("mecab", "small/ja_wagahai_300k.txt", "words"),
         ("mecab", "small/ja_wagahai_300k.txt", "chars"),
         ("mecab", "medium/ja.txt", "words"),
         ("mecab", "medium/ja.txt", "chars")]
# the full run: the medium corpora split into words (the chars split there, ~20 s a case, with
# TOKCOLUMNAR_SLOW=1; the small corpora have both in every tier)
TIERED = heavy(CASES, full=lambda c: c[2] == "words", fast=lambda c: c[1].startswith("small/"),
               multi=True)


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "rel", "split"), TIERED)
def test_every_line_segmented_as_the_reference(name, rel, split):
    cut = reference(name, split)
    lines = lines_of(corpus(rel))
    ours = build_segmenter(name, split).apply([line + "\n" for line in lines])
    bad = [i for i, (line, got) in enumerate(zip(lines, ours))
           if got != hf_words(cut(line.removesuffix("\r")))]
    assert len(ours) == len(lines) and not bad, \
        f"{len(bad)} lines differ, e.g. line {bad[:1]}: {lines[bad[0]][:80]!r}" if bad else ""


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "rel", "split"), TIERED)
def test_merges_identical_to_hf_on_presegmented_text(name, rel, split, tmp_path):
    path = corpus(rel)
    joined = presegment(path, name, split, tmp_path / "segmented.txt")
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf.train([str(joined)], trainers.BpeTrainer(vocab_size=30000, show_progress=False))
    (tmp_path / "hf").mkdir()
    hf.model.save(str(tmp_path / "hf"))
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, vocab_size=30000, pre_tokenizer=name, cjk_split=split)
    ours = (out / "merges.txt").read_text(encoding="utf-8")
    assert ours.count("\n") > 1000
    assert ours == (tmp_path / "hf" / "merges.txt").read_text(encoding="utf-8")
    assert json.loads((out / "vocab.json").read_text(encoding="utf-8")) == hf.get_vocab()


def test_jieba_chunks_are_cut_as_jieba_cuts():
    """Every chunk is a run of jieba's block class or one other non-space character, and
    cutting the text there changes nothing (dictionary words across scripts: T恤, AT&T, C++)."""
    cut = rjieba_cut(True)
    text = "用Python3.11写的T恤和AT&T、C++ 3.5%，１２０元 —— 使--平北将军\t好"
    chunks = pl.Series([text]).str.extract_all(JIEBA_CHUNK).item().to_list()
    assert "".join(chunks) == "".join(text.split())
    assert [w for c in chunks for w in cut(c)] == [w for w in cut(text) if w.strip()]
    assert build_segmenter("jieba").apply([text])[0] == hf_words(cut(text))


def test_mecab_words_chars_and_line_endings():
    need("fugashi", "ja")
    seg = build_segmenter("mecab")
    text = "吾輩は猫である。\r\n名前はまだ無い\n!\u2000?"
    assert seg.apply([text]) == [["吾輩", "は", "猫", "で", "ある", "。", "名前", "は", "まだ",
                                  "無い", "!", "?"]]
    # unknown katakana / kanji become characters with `chars`; unknown ASCII and digits stay
    chars = build_segmenter("mecab", "chars").apply(["トチメンボーは這入 cos 2024"])[0]
    assert chars == ["ト", "チ", "メ", "ン", "ボ", "ー", "は", "這", "入", "cos", "2024"]


def test_encoding_word_ids_and_from_dir(tmp_path):
    """The trained directory restores the segmenter (tokenizer.json alone: WhitespaceSplit,
    for pre-segmented text); our ids and word_ids on raw text equal HF's on the text the
    reference pre-segmented."""
    cut = rjieba_cut(True)
    texts = ["我来到北京清华大学，用Python3.11写代码。", "他说：今天天气很好！", ""]
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("\n".join(texts * 20) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    train([str(corpus_file)], out_dir=out, vocab_size=200, pre_tokenizer="jieba",
          model="wordpiece", special_tokens=["[UNK]"], unk_token="[UNK]")
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["settings"]["pre_tokenizer"] == "jieba" and "rjieba" in run["versions"]
    assert 0 < run["timings_s"]["count_segmenter"] <= run["timings_s"]["count"]
    tok = Tokenizer.from_dir(out)
    assert type(tok.pre_tokenizer).__name__ == "JiebaSplit"
    got = tok.encode_batch(texts)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    want = hf.encode_batch([" ".join(cut(t)) for t in texts])
    assert [e.ids for e in got] == [e.ids for e in want]
    assert [e.word_ids for e in got] == [e.word_ids for e in want]
    assert got[0].word_ids[:3] == [0, 1, 2] and len(set(got[0].word_ids)) == 10
    assert Tokenizer.from_file(out / "tokenizer.json").pre_tokenizer.to_hf() == \
        {"type": "WhitespaceSplit"}


def test_settings_refused():
    with pytest.raises(TokcolumnarValueError, match="--cjk-split applies to"):
        TrainConfig(pre_tokenizer="whitespace", cjk_split="chars")
    with pytest.raises(TokcolumnarValueError, match="DuckDB engine cannot"):
        TrainConfig(pre_tokenizer="jieba", engine="duckdb")
    with pytest.raises(TokcolumnarValueError, match="unknown cjk-split"):
        TrainConfig(pre_tokenizer="mecab", cjk_split="runs")
    assert TrainConfig(pre_tokenizer="JIEBA").cjk_split == "words"


def test_bert_normalizer_does_not_space_out_ideographs():
    need("rjieba", "zh")
    normalizer, seg = TrainConfig(pre_tokenizer="jieba", normalizer="bert").text_components()
    assert normalizer.to_hf()["handle_chinese_chars"] is False
    assert seg.apply(["清华大学"]) == [["清华大学"]]


def test_missing_extra_is_one_error_line(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "rjieba.py").write_text("raise ImportError('simulated: not installed')\n")
    (tmp_path / "c.txt").write_text("我来到北京\n", encoding="utf-8")
    proc = run_cli("train", str(tmp_path / "c.txt"), "--out", str(tmp_path / "o"),
                   "--pre-tokenizer", "jieba", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{fake}"})
    assert_clean_error(proc, "--pre-tokenizer jieba needs rjieba: pip install "
                       "'tokcolumnar[zh]'")


def test_mecab_refuses_a_line_too_long(tmp_path):
    need("fugashi", "ja")
    with pytest.raises(TokcolumnarError, match="longer than MeCab can segment"):
        build_segmenter("mecab").apply(["a" * (MECAB_MAX_LINE_BYTES + 1)])
    (tmp_path / "c.txt").write_text("猫\n" + "a" * 200_000 + "\n", encoding="utf-8")
    proc = run_cli("train", str(tmp_path / "c.txt"), "--out", str(tmp_path / "o"),
                   "--pre-tokenizer", "mecab", "--quiet")
    assert_clean_error(proc, "a line of 200,000 bytes is longer than MeCab can segment")


def test_cli_encode_word_ids_with_mecab(tmp_path):
    """`tokcolumnar encode --word-ids` with a MeCab-trained directory: the ids and word ids of
    HF loading our tokenizer.json on the text MeCab pre-segmented."""
    cut = mecab_cut("words")
    texts = ["吾輩は猫である。名前はまだ無い。", "どこで生れたかとんと見当がつかぬ。"]
    src = tmp_path / "c.txt"
    src.write_text("\n".join(texts * 10) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    train([str(src)], out_dir=out, vocab_size=120, pre_tokenizer="mecab", model="wordpiece",
          special_tokens=["[UNK]"], unk_token="[UNK]")
    enc = tmp_path / "enc.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(out), "--out", str(enc),
                   "--word-ids", "--quiet")
    assert proc.returncode == 0, proc.stderr
    got = pl.read_parquet(enc)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    want = hf.encode_batch([" ".join(cut(t)) for t in texts * 10])
    assert got.get_column("ids").to_list() == [e.ids for e in want]
    assert got.get_column("word_ids").to_list() == [e.word_ids for e in want]


@pytest.mark.corpus
@pytest.mark.parametrize(("preset", "rel"), [("bert-zh-wwm", "small/zh_hongloumeng_300k.txt"),
                                             ("bert-ja", "small/ja_wagahai_300k.txt")])
def test_word_presets_encode_as_hf_on_presegmented_text(preset, rel, tmp_path):
    """A word-preset directory: HF loading its tokenizer.json ([CLS] ... [SEP], the preset's
    normalizer, WhitespaceSplit) encodes every line, normalized and pre-segmented by the
    reference with the preset's --cjk-split, to our ids on the raw line."""
    need(*{"bert-zh-wwm": ("rjieba", "zh"), "bert-ja": ("fugashi", "ja")}[preset])
    path = corpus(rel)
    out = tmp_path / "out"
    train([str(path)], out_dir=out, preset=preset, vocab_size=8000)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))["settings"]
    name, split = run["pre_tokenizer"], run["cjk_split"]
    assert (name, split) == {"bert-zh-wwm": ("jieba", "chars"), "bert-ja": ("mecab", "words")}[
        preset]
    cut = reference(name, split)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    lines = [line.removesuffix("\r") for line in lines_of(path)]
    want = hf.encode_batch([" ".join(cut(hf.normalizer.normalize_str(t))) for t in lines])
    got = Tokenizer.from_dir(out).encode_batch(lines)
    assert got[0].tokens[0] == "[CLS]"
    bad = [i for i, (a, b) in enumerate(zip(got, want))
           if a.ids != b.ids or a.word_ids != b.word_ids]
    assert len(got) == len(want) and not bad, f"line {bad[:1]} differs"
    # words, not characters: some tokens hold two or more CJK characters
    assert any(len(t) > 1 and "\u4e00" <= t[0] <= "\u9fff" for t in hf.get_vocab())


# characters that exercise the chunk rules: ideographs (dictionary words and not), kana, ASCII
# letters / digits and jieba's joiners, CJK and ASCII punctuation, full-width digits, spaces of
# every kind (MeCab keeps some inside symbol tokens), characters outside U+4E00..U+9FFF, and
# characters Python strips but Rust's \s does not (\x1c) or does (\x85)
MIXED = st.text(st.sampled_from(list("我来到北京清华大学天气很好贾母凤姐T恤B超OKabcPython311"
                                     "+#&._%-，。！？、《》“”…（）,!?()１２０"
                                     "吾輩は猫であるトチメンボー這入")
                                + [" ", "\t", "\u3000", "\u2000", "\u00a0", "\u2028", "䰒", "𠀀",
                                   "\x1c", "\x85", "\u200b", "\ufeff"]),
                max_size=40)


@examples(1)
@given(MIXED)
def test_jieba_any_text_is_the_reference(text):
    cut = rjieba_cut(True)
    assert build_segmenter("jieba").apply([text])[0] == hf_words(cut(text))
    cut_chars = rjieba_cut(False)
    assert build_segmenter("jieba", "chars").apply([text])[0] == hf_words(cut_chars(text))


@examples(1)
@given(MIXED)
def test_mecab_any_line_is_the_reference(text):
    words, chars = mecab_cut("words"), mecab_cut("chars")
    assert build_segmenter("mecab").apply([text + "\n"])[0] == hf_words(words(text))
    assert build_segmenter("mecab", "chars").apply([text])[0] == hf_words(chars(text))


def test_mecab_lines_and_nul_are_separate_pieces():
    """A value holding several lines (Parquet, JSONL) is segmented line by line, and a NUL
    (where MeCab would stop reading) ends a piece, instead of losing the rest of the line."""
    cut = mecab_cut("words")
    seg = build_segmenter("mecab")
    assert seg.apply(["吾輩は猫である\r\n名前はまだ無い"])[0] == cut("吾輩は猫である") + cut(
        "名前はまだ無い")
    assert seg.apply(["猫である\x00名前"])[0] == cut("猫である") + cut("名前")


def test_jieba_many_batches_give_the_same_words(monkeypatch):
    """The distinct blocks go to rjieba in batches joined by "\\n": any batch size gives each
    text the reference's words (here 7 characters: a batch per block or two)."""
    cut = rjieba_cut(True)
    texts = ["我来到北京清华大学，天气很好。", "T恤和B超 Python3.11写的", "清华大学", "",
             "贾母凤姐说：今天天气很好！" * 3]
    monkeypatch.setattr(segmenters, "JIEBA_BATCH_CHARS", 7)
    assert build_segmenter("jieba").apply(texts) == [hf_words(cut(t)) for t in texts]
