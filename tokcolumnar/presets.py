"""The presets: the reference configurations `--preset gpt2|bert|subword-nmt|sentencepiece`
(and the word segmenting BERTs `bert-zh-wwm`, `bert-ja`) stand for
(docs/architecture.md, "Presets"). A preset *fixes* some options — a different value given by
the user is refused, naming both — and gives *defaults* to others, which the user may
replace."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import TokcolumnarValueError
from .text.bytelevel import BYTE_ALPHABET

if TYPE_CHECKING:  # the settings object presets are applied to (config imports this module)
    from .config import TrainConfig

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
               "continuing_subword_prefix": None, "tie_break": "id"},
        defaults={"special_tokens": ["<|endoftext|>"]}),
    "bert": Preset(
        fixed={"model": "wordpiece", "pre_tokenizer": "bert", "normalizer": "bert"},
        defaults={"lowercase": True, "continuing_subword_prefix": "##",
                  "special_tokens": BERT_SPECIAL_TOKENS, "unk_token": "[UNK]"}),
    # `--vocab-size N` is read as subword-nmt's `-s N`: N merge operations (see apply_preset)
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
}
#: The `model_max_length` of the released models a preset stands for (their positions).
PRESET_MAX_LENGTH = {"gpt2": 1024, **{name: 512 for name in BERT_PRESETS}}


def role_name(name: str) -> str:
    """A role as transformers names it: `pad` and `pad_token` are both `pad_token`."""
    return name if name.endswith("_token") else name + "_token"


def special_token_roles(cfg: TrainConfig) -> dict[str, str]:
    """The roles of a run's special tokens (ROLES order): the preset's (those whose token is a
    special token of the run), the model's unknown token as `unk_token`, then
    --special-token-roles (checked by `config.check_values`)."""
    roles = {role: token for role, token in PRESET_ROLES.get(cfg.preset or "", {}).items()
             if token in (cfg.special_tokens or ())}
    if cfg.unk_token is not None:
        roles["unk_token"] = cfg.unk_token
    roles.update(cfg.special_token_roles or {})
    return {role: roles[role] for role in ROLES if role in roles}

def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _same(name: str, a: Any, b: Any) -> bool:
    if name == "initial_alphabet":  # a set of characters: the order does not matter
        return set(a) == set(b)
    return a == b


def _show(name: str, value: Any) -> str:
    """An option as it would be written on the command line (for messages)."""
    if value is None or value is False:
        return f"no {flag(name)}"
    if value is True:
        return flag(name)
    if name == "initial_alphabet":
        if set(value) == set(BYTE_ALPHABET):
            return f"{flag(name)} (the 256 byte-level characters)"
        return f"{flag(name)} {shlex.quote(''.join(value))}"
    if isinstance(value, list):
        return f"{flag(name)} {shlex.quote(','.join(value))}"
    return f"{flag(name)} {shlex.quote(str(value))}"


def apply_preset(cfg: TrainConfig, default_vocab_size: int) -> None:
    """Set what the preset fixes, refusing a given value that differs, and fill its defaults."""
    if cfg.preset is None:
        return
    if cfg.preset not in PRESET_RULES:
        raise TokcolumnarValueError(f"unknown preset {cfg.preset!r} "
                                    f"(choose from {', '.join(PRESETS)})")
    rules = PRESET_RULES[cfg.preset]
    for name, fixed in rules.fixed.items():
        given = getattr(cfg, name)
        if given is not None and not _same(name, given, fixed):
            verb = "uses" if fixed is None or fixed is False else "fixes"
            raise TokcolumnarValueError(f"--preset {cfg.preset} {verb} {_show(name, fixed)}; "
                                        f"got {_show(name, given)}")
        setattr(cfg, name, list(fixed) if isinstance(fixed, list) else fixed)
    for name, default in rules.defaults.items():
        if getattr(cfg, name) is None:
            setattr(cfg, name, list(default) if isinstance(default, list) else default)
    if cfg.preset == "subword-nmt" and cfg.max_merges is None:
        cfg.max_merges = cfg.vocab_size if cfg.vocab_size is not None else default_vocab_size
        cfg.vocab_size = 1 << 40
    if cfg.preset in BERT_PRESETS:
        missing = [t for t in ("[CLS]", "[SEP]", cfg.unk_token) if t not in cfg.special_tokens]
        if missing:
            raise TokcolumnarValueError(
                f"--preset {cfg.preset} needs {', '.join(missing)} among --special-tokens (the "
                "[CLS] ... [SEP] template and the unknown token)")
