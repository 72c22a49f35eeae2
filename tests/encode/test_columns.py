"""The Python side of encoding: encode_column, the Polars `tok` namespace (eager and lazy),
encode_arrow, decode_column, the word cache (hash collisions never change ids), and
tokenizer.json files built with HF's own library (encoded identically, or refused naming the
component)."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

from tests.support.corpora import PRIMER as DATA
from tokcolumnar import TokcolumnarError, Tokenizer, train
from tokcolumnar.models import cache

TEXTS = ["The pairs merge.", "", "naïve café 東京  x", "tokens<|endoftext|>again"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2") / "o"
    train([str(DATA)], out_dir=d, vocab_size=800, preset="gpt2")
    return d


def test_encode_column_and_namespace(gpt2):
    tok = Tokenizer.from_dir(gpt2)
    hf = HFTokenizer.from_file(str(gpt2 / "tokenizer.json"))
    want = [e.ids for e in hf.encode_batch(TEXTS)]
    df = pl.DataFrame({"text": [*TEXTS, None]})
    assert tok.encode_column(df, "text").to_list() == [*want, None]
    assert tok.encode_column(df["text"], batch_rows=2).to_list() == [*want, None]
    eager = df.with_columns(ids=pl.col("text").tok.encode(tok))
    lazy = df.lazy().with_columns(ids=pl.col("text").tok.encode(tok)).collect()
    assert eager["ids"].to_list() == lazy["ids"].to_list() == [*want, None]
    assert eager.schema["ids"] == pl.List(pl.UInt32)
    back = eager.with_columns(back=pl.col("ids").tok.decode(tok))["back"].to_list()
    assert back == [hf.decode(ids) for ids in want] + [None]


def test_encode_arrow_matches_encode_batch(gpt2):
    tok = Tokenizer.from_dir(gpt2)
    table = tok.encode_arrow(TEXTS)
    hf = HFTokenizer.from_file(str(gpt2 / "tokenizer.json")).encode_batch(TEXTS)
    assert table.column("ids").to_pylist() == [e.ids for e in hf]
    assert table.column("tokens").to_pylist() == [e.tokens for e in hf]
    assert table.column("word_ids").to_pylist() == [e.word_ids for e in hf]


def test_hash_collisions_never_change_ids(gpt2, monkeypatch):
    """Every word hashed to one of two values: grouping and cache hits must fall back to the
    strings themselves."""
    real = cache.word_hashes
    monkeypatch.setattr(cache, "word_hashes", lambda words: real(words) % 2)
    tok = Tokenizer.from_dir(gpt2)
    lines = DATA.read_text(encoding="utf-8").splitlines()[:200]
    want = [e.ids for e in HFTokenizer.from_file(str(gpt2 / "tokenizer.json"))
            .encode_batch(lines)]
    assert tok.encode_ids(lines[:100])["ids"].to_list() == want[:100]
    assert tok.encode_ids(lines[100:])["ids"].to_list() == want[100:]  # cache hits checked


def _save(tmp_path, hf: HFTokenizer, name: str):
    path = tmp_path / f"{name}.json"
    hf.save(str(path))
    return path


def _trained_hf(model, trainer, **parts) -> HFTokenizer:
    hf = HFTokenizer(model)
    for k, v in parts.items():
        setattr(hf, k, v)
    hf.train([str(DATA)], trainer)
    return hf


def test_hf_built_tokenizers_encode_identically(tmp_path):
    lines = DATA.read_text(encoding="utf-8").splitlines()[:300] + TEXTS
    roberta = _trained_hf(
        models.BPE(), trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>"],
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                          show_progress=False),
        pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=True),
        decoder=decoders.ByteLevel())
    roberta.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0))
    bert = _trained_hf(
        models.WordPiece(unk_token="[UNK]"),
        trainers.WordPieceTrainer(vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                  show_progress=False),
        normalizer=normalizers.BertNormalizer(lowercase=True),
        pre_tokenizer=pre_tokenizers.BertPreTokenizer())
    bert.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    metaspace = _trained_hf(
        models.BPE(unk_token="<unk>"),
        trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"], show_progress=False),
        normalizer=normalizers.NFKC(), pre_tokenizer=pre_tokenizers.Metaspace())
    for name, hf in {"roberta": roberta, "bert": bert, "metaspace": metaspace}.items():
        path = _save(tmp_path, hf, name)
        ours = Tokenizer.from_file(path).encode_column(pl.Series(lines)).to_list()
        assert ours == [e.ids for e in HFTokenizer.from_file(str(path)).encode_batch(lines)], \
            name


def test_hf_unigram_encodes_identically(tmp_path):
    """A Unigram tokenizer HF trained itself (its own trainer, NFKC, Metaspace) encodes as HF
    (the model once refused as unsupported; test_validation covers an unknown model type)."""
    lines = DATA.read_text(encoding="utf-8").splitlines()[:300] + TEXTS
    hf = _trained_hf(models.Unigram(), trainers.UnigramTrainer(
        vocab_size=300, show_progress=False, unk_token="<unk>", special_tokens=["<unk>"]),
        normalizer=normalizers.NFKC(), pre_tokenizer=pre_tokenizers.Metaspace())
    path = _save(tmp_path, hf, "unigram")
    ours = Tokenizer.from_file(path).encode_column(pl.Series(lines)).to_list()
    assert ours == [e.ids for e in HFTokenizer.from_file(str(path)).encode_batch(lines)]


def test_encode_batch_as_arrow(layout_tokenizers):
    """Only the ids, columnar, with and without the post-processor's [CLS] ... [SEP]."""
    bert = layout_tokenizers["bert"]
    tok = Tokenizer.from_dir(bert)
    hf = HFTokenizer.from_file(str(bert / "tokenizer.json"))
    lines = DATA.read_text(encoding="utf-8").splitlines() + TEXTS
    for special in (True, False):
        want = [e.ids for e in hf.encode_batch(lines, add_special_tokens=special)]
        arr = tok.encode_batch(lines, add_special_tokens=special, as_arrow=True)
        assert isinstance(arr, pa.ListArray) and arr.type == pa.list_(pa.uint32())
        assert arr.to_pylist() == want
        assert [e.ids for e in tok.encode_batch(lines, add_special_tokens=special)] == want
    series = pl.Series(tok.encode_batch(pl.Series([*TEXTS, None]), as_arrow=True))
    assert series.dtype == pl.List(pl.UInt32)
    assert series.to_list() == [e.ids for e in hf.encode_batch(TEXTS)] + [None]


@pytest.mark.parametrize("preset", ["whitespace", "gpt2", "bert", "subword-nmt"])
def test_decode_column_equals_hf_decode_batch(preset_tokenizers, preset):
    """decode_column (columnar for these presets' decoders) gives HF's `decode_batch` text for
    every line of a corpus, with and without the special tokens; truncated windows of the
    byte-level ids cut characters, whose bytes HF decodes lossily; a null row stays null."""
    d = preset_tokenizers[preset]
    tok = Tokenizer.from_dir(d)
    hf = HFTokenizer.from_file(str(d / "tokenizer.json"))
    lines = DATA.read_text(encoding="utf-8").splitlines() + TEXTS
    rows = [e.ids for e in hf.encode_batch(lines)]
    rows += [ids[1:k] for ids in rows[:200] for k in (2, 3, 5)]  # windows cutting characters
    ids = pl.Series("ids", [*rows, None], dtype=pl.List(pl.UInt32))
    for skip in (True, False):
        want = hf.decode_batch(rows, skip_special_tokens=skip)
        assert tok.decode_column(ids, skip).to_list() == [*want, None]
    assert tok.decode_column(ids.cast(pl.List(pl.Int64))).to_list()[:5] == \
        hf.decode_batch(rows[:5])


def test_decode_column_row_by_row_decoder_and_bad_ids(tmp_path):
    """A decoder that is not positional (a Sequence) decodes row by row, as HF; a bad id in
    the column is refused as `decode` refuses it."""
    hf = _trained_hf(models.BPE(unk_token="<unk>"),
                     trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>"],
                                         show_progress=False),
                     pre_tokenizer=pre_tokenizers.Metaspace(),
                     decoder=decoders.Sequence([decoders.Metaspace(), decoders.Fuse()]))
    tok = Tokenizer.from_file(_save(tmp_path, hf, "seq"))
    lines = DATA.read_text(encoding="utf-8").splitlines()[:100]
    rows = [e.ids for e in hf.encode_batch(lines)]
    assert tok.decode_column(pl.Series(rows)).to_list() == hf.decode_batch(rows)
    for bad in ([[0, 1], [10**6]], [[-1]], [[0, None]]):
        with pytest.raises(TokcolumnarError):
            tok.decode_column(pl.Series(bad))
