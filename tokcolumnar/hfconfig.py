"""transformers' files beside `tokenizer.json`: `tokenizer_config.json` and
`special_tokens_map.json`, which give the special tokens their roles (pad, eos, cls, ...), so
that `transformers.AutoTokenizer.from_pretrained(out)` pads, truncates and adds the template
tokens as the released model's tokenizer does (docs/transformers.md).

The roles are `presets.special_token_roles`: the preset's (bert's five, gpt2's bos/eos/unk
`<|endoftext|>` and no pad, as bert-base-uncased and gpt2 set them), the model's unknown token,
then --special-token-roles. The tokenizer class (`tokenizer_class`) is the released model's
(`BertTokenizer`, `GPT2Tokenizer`) only when the run's tokenizer is exactly what that class
builds: transformers 5 rebuilds those classes' pipeline from the vocabulary (its own
normalizer, pre-tokenizer and decoder), while `PreTrainedTokenizerFast` — used for every other
run — loads `tokenizer.json` as it is. Every role is written, null when unset, so that no class
default (BertTokenizer's `[PAD]`, ...) adds a token the run does not have."""

from __future__ import annotations

from typing import Any

from .config import TrainConfig
from .presets import BERT_PRESETS, PRESET_MAX_LENGTH, PRESET_ROLES, ROLES

#: The files, in the order they are written.
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"

#: What `BertTokenizer` (transformers 5) builds around the vocabulary.
_BERT_PRE_TOKENIZER = {"type": "BertPreTokenizer"}
_BERT_DECODER = {"type": "WordPiece", "prefix": "##", "cleanup": True}


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


def _is_bert_tokenizer(tok: dict[str, Any]) -> bool:
    """Whether `BertTokenizer` would rebuild this `tokenizer.json` exactly."""
    model, norm = tok["model"], tok.get("normalizer") or {}
    return (model.get("type") == "WordPiece" and model.get("continuing_subword_prefix") == "##"
            and model.get("max_input_chars_per_word") == 100
            and norm.get("type") == "BertNormalizer" and norm.get("clean_text") is True
            and tok.get("pre_tokenizer") == _BERT_PRE_TOKENIZER
            and tok.get("decoder") == _BERT_DECODER)


def _is_gpt2_tokenizer(tok: dict[str, Any]) -> bool:
    """Whether `GPT2Tokenizer` would rebuild this `tokenizer.json` exactly: byte-level BPE
    with no unknown token, prefix or suffix, and no post-processor."""
    model, pre = tok["model"], tok.get("pre_tokenizer") or {}
    return (model.get("type") == "BPE" and model.get("unk_token") is None
            and not model.get("continuing_subword_prefix")
            and not model.get("end_of_word_suffix") and model.get("dropout") is None
            and not model.get("byte_fallback") and not model.get("ignore_merges")
            and tok.get("normalizer") is None and tok.get("post_processor") is None
            and pre.get("type") == "ByteLevel" and pre.get("trim_offsets", True) is True
            and pre.get("use_regex", True) is True)


def transformers_files(cfg: TrainConfig, tok: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{file name: JSON object} of `tokenizer_config.json` and `special_tokens_map.json` for a
    run's settings and its `tokenizer.json` object `tok`."""
    roles = special_token_roles(cfg)
    config: dict[str, Any] = {}
    if cfg.preset == "bert" and _is_bert_tokenizer(tok):
        norm = tok["normalizer"]
        config.update(tokenizer_class="BertTokenizer", do_lower_case=norm.get("lowercase"),
                      strip_accents=norm.get("strip_accents"),
                      tokenize_chinese_chars=norm.get("handle_chinese_chars"))
    elif cfg.preset == "gpt2" and _is_gpt2_tokenizer(tok):
        config.update(tokenizer_class="GPT2Tokenizer",
                      add_prefix_space=tok["pre_tokenizer"].get("add_prefix_space", False))
    else:
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    if cfg.preset in PRESET_MAX_LENGTH:
        config["model_max_length"] = PRESET_MAX_LENGTH[cfg.preset]
    # BERT's template gives a pair's second text type id 1: the model takes token_type_ids
    bert_template = cfg.preset in BERT_PRESETS and cfg.model == "wordpiece"
    config["model_input_names"] = (["input_ids", "token_type_ids", "attention_mask"]
                                   if bert_template else ["input_ids", "attention_mask"])
    if bert_template:
        config["clean_up_tokenization_spaces"] = True  # (BERT's decoding)
    config.update({role: roles.get(role) for role in ROLES})
    added = tok.get("added_tokens") or []
    config["added_tokens_decoder"] = {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                         "single_word", "special")} for t in added}
    named = set(roles.values())
    others = [t["content"] for t in added if t["special"] and t["content"] not in named]
    special_map: dict[str, Any] = dict(roles)
    if others:
        config["additional_special_tokens"] = others
        special_map["additional_special_tokens"] = others
    return {TOKENIZER_CONFIG: config, SPECIAL_TOKENS_MAP: special_map}
