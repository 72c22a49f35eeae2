"""Post-processors against HuggingFace `tokenizers`: each kind read from HF's JSON gives the
same JSON back, and a tokenizer using it encodes single texts and pairs to HF's ids, word ids and
type ids."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, processors

from tokcolumnar import Tokenizer
from tokcolumnar.text.postprocessors import post_processor_from_hf

VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "<s>": 4, "</s>": 5, "hello": 6,
         "world": 7, "##s": 8, "a": 9, "b": 10}

PROCESSORS = {
    "template": processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)]),
    "template-odd": processors.TemplateProcessing(
        single="$A:1 [SEP]:2", pair="[CLS]:3 $B:0 [SEP] $A:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)]),
    "bert": processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2)),
    "roberta": processors.RobertaProcessing(("</s>", 5), ("<s>", 4)),
    "bytelevel": processors.ByteLevel(),
    "sequence": processors.Sequence([processors.ByteLevel(),
                                     processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))]),
}


@pytest.mark.parametrize("kind", list(PROCESSORS))
def test_post_processors_like_hf(kind):
    hf = HFTokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.post_processor = PROCESSORS[kind]
    d = json.loads(hf.to_str())
    proc = post_processor_from_hf(d["post_processor"])
    assert proc.to_hf() == d["post_processor"]
    ours = Tokenizer.from_hf_dict(d)
    singles = ["hello worlds", "", "a b a", "zzz hello"]
    enc = ours.encode_ids(singles)
    for i, text in enumerate(singles):
        e = hf.encode(text)
        assert enc["ids"][i].to_list() == e.ids
        assert enc["word_ids"][i].to_list() == e.word_ids
        if "type_ids" in enc.columns:
            assert enc["type_ids"][i].to_list() == e.type_ids
    pairs = ours.encode_pair_ids(singles, ["b", "hello", "", "worlds a"])
    for i, (a, b) in enumerate(zip(singles, ["b", "hello", "", "worlds a"])):
        e = hf.encode(a, b)
        assert pairs["ids"][i].to_list() == e.ids
        assert pairs["type_ids"][i].to_list() == e.type_ids
        assert pairs["word_ids"][i].to_list() == e.word_ids


SPECIAL_PIECES = ["[CLS]", "[SEP]", "[X]"]
template_strategy = st.tuples(
    st.lists(st.tuples(st.sampled_from(SPECIAL_PIECES), st.integers(0, 2)), max_size=3),
    st.integers(0, 2),
    st.lists(st.tuples(st.sampled_from(SPECIAL_PIECES), st.integers(0, 2)), max_size=3),
).map(lambda t: " ".join([f"{s}:{k}" for s, k in t[0]] + [f"$A:{t[1]}"]
                         + [f"{s}:{k}" for s, k in t[2]]))


@given(single=template_strategy,
       texts=st.lists(st.lists(st.sampled_from(["hello", "worlds", "a", "b", "zzz", " "]),
                               max_size=6).map(" ".join), min_size=1, max_size=5))
def test_single_templates_like_hf(single, texts):
    """Any single template with one sequence (the NumPy path of `apply`): special tokens of
    one or several ids before and after it, type ids, empty texts."""
    hf = HFTokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.post_processor = processors.TemplateProcessing(
        single=single, special_tokens=[("[CLS]", 2), ("[SEP]", 3),
                                       {"id": "[X]", "ids": [4, 5], "tokens": ["<s>", "</s>"]}])
    ours = Tokenizer.from_hf_dict(json.loads(hf.to_str()))
    enc = ours.encode_ids(texts)
    want = hf.encode_batch(texts)
    assert enc["ids"].to_list() == [e.ids for e in want]
    assert enc["word_ids"].to_list() == [e.word_ids for e in want]
    assert ours.encode_frame(pl.Series(texts))["type_ids"].to_list() == [e.type_ids
                                                                         for e in want]
