"""The presets: the reference configurations `--preset gpt2|bert|subword-nmt|sentencepiece`
(the LLMs' `gpt4|gpt4o|llama3|qwen2|llama2` are in `llm_presets`)
(and the word segmenting BERTs `bert-zh-wwm`, `bert-ja`) stand for
(docs/architecture.md, "Presets"). A preset *fixes* some options — a different value given by
the user is refused, naming both — and gives *defaults* to others, which the user may
replace. `config.apply_preset` applies them to a `TrainConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .llm_presets import LLM_PRESETS, SENTENCEPIECE_BPE_PRESETS
from .text.bytelevel import BYTE_ALPHABET

BERT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@dataclass(frozen=True)
class Preset:
    """What a preset sets: `fixed` options define its reference configuration (a different
    value given by the user is refused, naming both); `defaults` are used when the option is
    not given and may be replaced. Every other option is free."""

    fixed: dict[str, Any]
    defaults: dict[str, Any]


PRESET_RULES: dict[str, Preset] = {
    "gpt2": Preset(
        fixed={"model": "bpe", "pre_tokenizer": "byte-level", "normalizer": "none",
               "lowercase": False, "initial_alphabet": list(BYTE_ALPHABET),
               "end_of_word_suffix": None, "end_of_word_token": None,
               "continuing_subword_prefix": None, "tie_break": "id", "pattern": "gpt2"},
        defaults={"special_tokens": ["<|endoftext|>"]}),
    "bert": Preset(
        fixed={"model": "wordpiece", "pre_tokenizer": "bert", "normalizer": "bert"},
        defaults={"lowercase": True, "continuing_subword_prefix": "##",
                  "special_tokens": BERT_SPECIAL_TOKENS, "unk_token": "[UNK]"}),
    # `--vocab-size N` is read as subword-nmt's `-s N`: N merge operations (see config.apply_preset)
    "subword-nmt": Preset(
        fixed={"model": "bpe", "pre_tokenizer": "subword-nmt", "normalizer": "none",
               "lowercase": False, "end_of_word_suffix": "</w>", "end_of_word_token": None,
               "continuing_subword_prefix": None, "tie_break": "lexical-max"},
        defaults={"min_frequency": 2}),
    # a Chinese word vocabulary (WoBERT / RoFormer style): jieba words with the HMM off, BERT's
    # normalizer without the spaces around ideographs (config.text_components), WordPiece
    "bert-zh-wwm": Preset(
        fixed={"model": "wordpiece", "pre_tokenizer": "jieba", "normalizer": "bert"},
        defaults={"cjk_split": "chars", "lowercase": True, "continuing_subword_prefix": "##",
                  "special_tokens": BERT_SPECIAL_TOKENS, "unk_token": "[UNK]"}),
    # cl-tohoku / tohoku-nlp bert-base-japanese-v3: MeCab + unidic-lite, NFKC, cased, WordPiece
    # 32,768 with at most 7,012 characters
    "bert-ja": Preset(
        fixed={"model": "wordpiece", "pre_tokenizer": "mecab", "normalizer": "nfkc",
               "lowercase": False},
        defaults={"cjk_split": "words", "vocab_size": 32768, "limit_alphabet": 7012,
                  "continuing_subword_prefix": "##", "special_tokens": BERT_SPECIAL_TOKENS,
                  "unk_token": "[UNK]"}),
    # spm_train --model_type=unigram with its defaults (docs/unigram.md): the nmt_nfkc rule,
    # its whitespace handling (the metaspace pre-tokenizer), 8,000 pieces, max piece length 16
    "sentencepiece": Preset(
        fixed={"model": "unigram", "pre_tokenizer": "metaspace", "normalizer": "nmt_nfkc",
               "lowercase": False},
        defaults={"vocab_size": 8000}),
}
# today's LLMs: byte-level BPE gpt4, gpt4o, llama3, qwen2, and SentencePiece-style BPE with
# byte fallback llama2 (llm_presets.py)
PRESET_RULES.update({name: Preset(fixed, defaults)
                     for name, (fixed, defaults) in {**LLM_PRESETS,
                                                     **SENTENCEPIECE_BPE_PRESETS}.items()})
# the presets with BERT's [CLS] ... [SEP] template
BERT_PRESETS = ("bert", "bert-zh-wwm", "bert-ja")
PRESETS = tuple(PRESET_RULES)

#: The special-token roles of transformers (`tokenizer_config.json`, `special_tokens_map.json`),
#: in the order its tokenizers list them.
ROLES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
         "mask_token")
_BERT_ROLES = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
               "cls_token": "[CLS]", "mask_token": "[MASK]"}
#: The roles a preset gives its special tokens, as the released models' tokenizers set them
#: (bert-base-uncased: BertTokenizer's five; gpt2: bos, eos and unk all `<|endoftext|>`, no pad
#: token). A role whose token is not among the run's --special-tokens is left unset.
PRESET_ROLES: dict[str, dict[str, str]] = {
    "gpt2": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
             "unk_token": "<|endoftext|>"},
    **{name: _BERT_ROLES for name in BERT_PRESETS},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
}
#: The `model_max_length` of the released models a preset stands for (their positions).
PRESET_MAX_LENGTH = {"gpt2": 1024, **{name: 512 for name in BERT_PRESETS}, "llama2": 4096}


def role_name(name: str) -> str:
    """A role as transformers names it: `pad` and `pad_token` are both `pad_token`."""
    return name if name.endswith("_token") else name + "_token"


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")
