"""Token offsets (`--columns offsets`, `Encoding.offsets`, `encode_arrow(offsets=True)`) against
HF's `Encoding.offsets`: tokenizers trained here with the whitespace (default), gpt2, bert and
subword-nmt presets, on every line of the small corpora and on random text (accents, CJK,
control characters, every kind of space), ids and offsets alike."""

from __future__ import annotations

import unicodedata

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Tokenizer as HFTokenizer

from tests.encode.conftest import PRESETS, hf_of
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import PRIMER as DATA
from tests.support.corpora import corpus, small_scripts
from tests.support.hf_text import NORM_DIFF, text_strategy
from tokcolumnar import TokcolumnarError, Tokenizer, train
from tokcolumnar.encode import dataset
from tokcolumnar.encode.offsets import code_points

# lines that reach every path: unknown characters dropped inside words (BPE without an
# unknown token), [UNK] words, accents stripped, CJK padded, control characters removed,
# runs of spaces and tabs, added tokens inside the text, empty lines
LINES = ["Héllo 東京 wörld  İstanbul ABC", "", "  x\t\ty  ", "tokens<|endoftext|>again [CLS] x",
         "naïve café 東京  x", "a\u0301\u0302b  c\x00d\x07e", "ΣΑΣ 𝔘𝔫𝔦 🎉🎉 x", " ", "\t"]


@pytest.fixture(scope="module")
def trained(preset_tokenizers):
    return preset_tokenizers


def assert_same(encodings, hf_encodings, lines):
    for line, ours, theirs in zip(lines, encodings, hf_encodings, strict=True):
        assert (ours.ids, ours.offsets) == (theirs.ids, theirs.offsets), repr(line)


@pytest.mark.parametrize("name", list(PRESETS))
def test_encode_batch_offsets_match_hf(trained, name):
    tok, hf = Tokenizer.from_dir(trained[name]), hf_of(trained[name])
    assert_same(tok.encode_batch(LINES), hf.encode_batch(LINES), LINES)
    assert_same(tok.encode_batch(LINES, add_special_tokens=False),
                hf.encode_batch(LINES, add_special_tokens=False), LINES)
    table = tok.encode_arrow(LINES, offsets=True)
    assert table.column("offsets").to_pylist() == [
        [{"start": a, "end": b} for a, b in e.offsets] for e in hf.encode_batch(LINES)]


@pytest.mark.corpus
@pytest.mark.parametrize("file", small_scripts("en_botchan.txt"))
def test_small_corpora_offsets_match_hf(tmp_path, trained, file):
    """Every line of each small corpus: ids and offsets as HF's encode_batch gives them,
    through the batch path of `encode` (parallel batches, word cache)."""
    src = corpus(f"small/{file}")
    for name, directory in trained.items():
        out = tmp_path / f"{name}.parquet"
        dataset.encode_files(str(directory), [str(src)], str(out), progress=False,
                             columns=["ids", "offsets"])
        df = pl.read_parquet(out)
        hf = hf_of(directory).encode_batch(df["text"].to_list())
        assert df["ids"].to_list() == [e.ids for e in hf], name
        got = [[(o["start"], o["end"]) for o in row] for row in df["offsets"].to_list()]
        want = [e.offsets for e in hf]
        bad = [k for k, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, (name, df["text"][bad[0]], got[bad[0]], want[bad[0]])


def test_cli_offsets_column(tmp_path, trained):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "o.parquet"
    proc = run_cli("encode", str(src), "--tokenizer", str(trained["bert"]), "--out", str(out),
                   "--columns", "ids,offsets", "--quiet")
    assert proc.returncode == 0, proc.stderr
    df = pl.read_parquet(out)
    assert df.schema["offsets"] == pl.List(pl.Struct({"start": pl.UInt32, "end": pl.UInt32}))
    lines = df["text"].to_list()
    assert lines == LINES
    hf = hf_of(trained["bert"]).encode_batch(lines)
    assert [[(o["start"], o["end"]) for o in row] for row in df["offsets"].to_list()] == [
        e.offsets for e in hf]


def test_offsets_of_a_normalizer_sequence_match_hf(tmp_path):
    """NFKC then lowercase (a Sequence) composes across characters: each step is followed as
    HF follows it (encode/alignment.py)."""
    d = tmp_path / "nfc"
    train([str(DATA)], out_dir=d, vocab_size=300, normalizer="nfkc", lowercase=True)
    tok = Tokenizer.from_dir(d)
    lines = LINES + ["ﬁne Ａ½ \u0130stanbul", "e\u0301\u0327 Ω"]
    assert_same(tok.encode_batch(lines), hf_of(d).encode_batch(lines), lines)


def test_offsets_refused_for_unsupported_pre_tokenizer(tmp_path):
    """A Split removing runs of several characters: its words are not the text's pieces in
    order; no offsets rather than wrong ones (one clean line)."""
    hf = HFTokenizer(models.BPE({"a": 0, "b": 1, "[UNK]": 2}, [], unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+"), "removed")
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = Tokenizer.from_file(path)
    with pytest.raises(TokcolumnarError, match="offsets are not available with the "
                       "pre-tokenizer Split"):
        tok.encode_arrow(["a b"], offsets=True)
    assert tok.encode_batch(["a b"])[0].offsets == []  # ids still given, offsets left empty
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    proc = run_cli("encode", str(src), "--tokenizer", str(path), "--out",
                   str(tmp_path / "o.parquet"), "--columns", "ids,offsets", "--quiet")
    assert_clean_error(proc, "offsets are not available with the pre-tokenizer Split")
    assert not (tmp_path / "o.parquet").exists()


def reorders_marks(text: str) -> bool:
    """Whether NFD reorders combining marks in `text` (canonical ordering): the text's NFD is
    not its characters' NFDs put together."""
    return "".join(unicodedata.normalize("NFD", c) for c in text) != unicodedata.normalize(
        "NFD", text)


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_random_text_offsets_match_hf(trained, name):
    tok, hf = Tokenizer.from_dir(trained[name]), hf_of(trained[name])

    # texts whose marks NFD reorders are the known difference below
    @settings(max_examples=150, deadline=None)
    @given(text_strategy(exclude=NORM_DIFF).filter(lambda t: not reorders_marks(t)))
    def check(text):
        assert_same(tok.encode_batch([text, text + " x"]), hf.encode_batch([text, text + " x"]),
                    [text, text + " x"])

    check()


@pytest.mark.xfail(strict=True, reason="known difference: after NFD reorders combining marks, "
                   "HF aligns them by position, tokcolumnar by source character")
def test_offsets_of_marks_nfd_reorders_match_hf(trained):
    # U+031C (class 220), U+1E001 (230), U+032B (220): NFD moves U+1E001 last; BERT's
    # normalizer strips the other two (HF's table has no U+1E001 as a nonspacing mark)
    text = "x \u031c\U0001e001\u032b y"
    assert reorders_marks(text)
    tok, hf = Tokenizer.from_dir(trained["bert"]), hf_of(trained["bert"])
    assert_same(tok.encode_batch([text]), hf.encode_batch([text]), [text])


def _hf_trained(model, trainer, post, **parts) -> HFTokenizer:
    hf = HFTokenizer(model)
    for k, v in parts.items():
        setattr(hf, k, v)
    hf.train([str(DATA)], trainer)
    hf.post_processor = post
    return hf


def hf_built() -> dict[str, HFTokenizer]:
    """Tokenizers built with HF's own library: RoBERTa (prefix space, offsets trimmed by its
    post-processor), byte-level with a trimming ByteLevel post-processor alone and in a
    Sequence, BERT, a normalizer / pre-tokenizer Sequence, and Metaspace (spaces replaced,
    the replacement put before the text)."""
    def byte_bpe(prefix: bool) -> dict:
        return {"model": models.BPE(), "trainer": trainers.BpeTrainer(
            vocab_size=600, special_tokens=["<s>", "</s>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
            "pre_tokenizer": pre_tokenizers.ByteLevel(add_prefix_space=prefix),
            "decoder": decoders.ByteLevel()}
    return {
        "roberta": _hf_trained(post=processors.RobertaProcessing(("</s>", 1), ("<s>", 0)),
                               **byte_bpe(True)),
        "bytelevel-trim": _hf_trained(post=processors.ByteLevel(trim_offsets=True,
                                                                add_prefix_space=False),
                                      **byte_bpe(False)),
        "sequence-trim": _hf_trained(post=processors.Sequence([
            processors.ByteLevel(trim_offsets=True, add_prefix_space=True),
            processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                          special_tokens=[("<s>", 0), ("</s>", 1)])]),
            **byte_bpe(True)),
        "bert": _hf_trained(
            models.WordPiece(unk_token="[UNK]"),
            trainers.WordPieceTrainer(vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                      show_progress=False),
            processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                          pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                          special_tokens=[("[CLS]", 1), ("[SEP]", 2)]),
            normalizer=normalizers.BertNormalizer(lowercase=True),
            pre_tokenizer=pre_tokenizers.BertPreTokenizer()),
        "sequences": _hf_trained(
            models.BPE(unk_token="[UNK]"),
            trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"], show_progress=False),
            None,
            normalizer=normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                             normalizers.StripAccents()]),
            pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                   pre_tokenizers.Digits(individual_digits=True),
                                                   pre_tokenizers.Punctuation()])),
        "metaspace": _hf_trained(
            models.BPE(unk_token="<unk>"),
            trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"], show_progress=False),
            None, normalizer=normalizers.Lowercase(),
            pre_tokenizer=pre_tokenizers.Metaspace(prepend_scheme="first")),
    }


def test_hf_built_tokenizers_offsets_and_pairs(tmp_path):
    lines = DATA.read_text(encoding="utf-8").splitlines()[:300] + LINES + [
        " lead", "x <s> y", "Σ 123 ½ a\u0301\u0302b 😀", "▁x ▁", " "]
    for name, built in hf_built().items():
        path = tmp_path / f"{name}.json"
        built.save(str(path))
        tok, hf = Tokenizer.from_file(path), HFTokenizer.from_file(str(path))
        assert_same(tok.encode_batch(lines), hf.encode_batch(lines), lines)
        for a, b in [("Héllo wörld", "the pair 東京"), (" x  y ", ""), ("", "z")]:
            ours, theirs = tok.encode(a, b), hf.encode(a, b)
            assert (ours.ids, ours.offsets, ours.type_ids) == (theirs.ids, theirs.offsets,
                                                               theirs.type_ids), (name, a, b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=6), st.integers(0, 3))
def test_code_points_read_from_utf8(texts, skip):
    """Code points and character counts read from the UTF-8 buffer (also of a sliced
    Series, and of nulls) are Python's."""
    series = pl.Series(["x"] * skip + texts, dtype=pl.String).slice(skip)
    cps, counts = code_points(series)
    assert cps.tolist() == [ord(c) for t in texts if t for c in t]
    assert counts.tolist() == [len(t or "") for t in texts]
