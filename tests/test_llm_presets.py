"""`--preset gpt4|gpt4o|llama3|qwen2`: the tokenizer.json components of the released models'
files (built here with HF's own classes the way transformers' converters build them), merges
identical to HF's trainer behind them, HF encoding with our file as we do, and the preset
rules (what a preset fixes is refused when contradicted)."""

from __future__ import annotations

import json

import pytest
from tokenizers import Regex, decoders, models, normalizers, processors, trainers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import pre_tokenizers as hfp

from tests.support.corpora import corpus
from tokcolumnar import Tokenizer, TrainConfig, train
from tokcolumnar.llm_presets import LLM_PRESETS
from tokcolumnar.text.patterns import PATTERNS

PATTERN_OF = {"gpt4": "cl100k", "gpt4o": "o200k", "llama3": "cl100k", "qwen2": "qwen2"}


def hf_reference(preset: str, special: list[str]) -> HFTokenizer:
    """The model family's components, as transformers' TikTokenConverter / Qwen2Converter
    build them (and Llama 3's BOS template)."""
    tok = HFTokenizer(models.BPE())
    if preset == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = hfp.Sequence([
        hfp.Split(Regex(PATTERNS[PATTERN_OF[preset]].regex), behavior="isolated", invert=False),
        hfp.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if preset == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
                                          special_tokens=[(bos, special.index(bos))])])
    return tok


@pytest.mark.corpus
@pytest.mark.parametrize("preset", list(LLM_PRESETS))
def test_preset_matches_the_model_family(preset, tmp_path):
    path = corpus("small/en_taylorswift_wiki.txt")
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, preset=preset, vocab_size=3000)
    special = LLM_PRESETS[preset][1]["special_tokens"]
    hf = hf_reference(preset, special)
    ours_json = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    theirs_json = json.loads(hf.to_str())
    for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        assert ours_json[part] == theirs_json[part], part
    assert [t["content"] for t in ours_json["added_tokens"]] == special
    # merges: HF's trainer behind the same components
    hf.train([str(path)], trainers.BpeTrainer(vocab_size=3000, show_progress=False,
                                              special_tokens=special,
                                              initial_alphabet=hfp.ByteLevel.alphabet()))
    assert ours_json["model"]["merges"] == json.loads(hf.to_str())["model"]["merges"]
    # HF reads our file and encodes as we do (with the post-processor's tokens)
    lines = path.read_text(encoding="utf-8").splitlines()[:300]
    got = Tokenizer.from_dir(out).encode_batch(lines)
    want = HFTokenizer.from_file(str(out / "tokenizer.json")).encode_batch(lines)
    assert [e.ids for e in got] == [e.ids for e in want]
    if preset != "qwen2":  # our offsets do not follow NFC (encode/offsets.py): ids only there
        assert [e.offsets for e in got] == [e.offsets for e in want]
    if preset == "llama3":
        assert all(e.ids[0] == special.index("<|begin_of_text|>") for e in got)


def test_preset_rules():
    cfg = TrainConfig(preset="llama3")
    assert (cfg.pattern, cfg.pre_tokenizer, cfg.normalizer) == ("cl100k", "byte-level", "none")
    assert TrainConfig(preset="gpt4o", special_tokens=["<|x|>"]).special_tokens == ["<|x|>"]
    with pytest.raises(ValueError, match="--preset gpt4 fixes --pattern cl100k; got --pattern "
                                         "o200k"):
        TrainConfig(preset="gpt4", pattern="o200k")
    with pytest.raises(ValueError, match="--preset qwen2 fixes --normalizer nfc"):
        TrainConfig(preset="qwen2", normalizer="nfkc")
    with pytest.raises(ValueError, match="needs <\\|begin_of_text\\|>"):
        TrainConfig(preset="llama3", special_tokens=["<|eot_id|>"])
    assert TrainConfig(preset="llama3", pattern="llama3").pattern == "cl100k"
