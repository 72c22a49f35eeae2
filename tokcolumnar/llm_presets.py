"""The presets of today's byte-level BPE LLM tokenizers: `--preset gpt4|gpt4o|llama3|qwen2`
fix what the released models' tokenizer.json fix (vocabulary aside), so a tokenizer trained on
one's own corpus drops into that model family's code:

* the pre-tokenizer `Sequence[Split(Regex(p), "isolated"), ByteLevel(add_prefix_space=False,
  use_regex=False)]` with the model's pattern (`text/patterns.py`: cl100k for GPT-4 and
  Llama 3, o200k for GPT-4o, qwen2), the byte-level alphabet (all 256 bytes), the ByteLevel
  decoder, no normalizer but Qwen2's NFC;
* the post-processor: `ByteLevel(trim_offsets=False)` (transformers' `TikTokenConverter` and
  `Qwen2Converter`, `convert_slow_tokenizer.py`), and for Llama 3 also the template that puts
  `<|begin_of_text|>` first (meta-llama/Meta-Llama-3-8B tokenizer.json);
* the special tokens as defaults (replaceable): GPT-4's and GPT-4o's of tiktoken
  (`tiktoken_ext/openai_public.py`: cl100k_base's five, o200k_base's two), Llama 3's named ones
  (its reserved tokens aside), Qwen2's three (`Qwen2Tokenizer`'s).

The models' own ids are not reproduced: ours number the special tokens first, then the 256
bytes, then the merges (the vocabulary is the user's).

`--preset llama2` is SentencePiece-style BPE over characters with byte fallback, as Llama 2
and Mistral ship it (meta-llama/Llama-2-7b-hf tokenizer.json, transformers' `LlamaConverter`):
`<unk>` `<s>` `</s>` as ids 0, 1, 2, the 256 `<0xNN>` byte pieces, the normalizers
`Prepend("▁")` + `Replace(" ", "▁")` and no pre-tokenizer, the decoders `Replace("▁", " ")`,
`ByteFallback`, `Fuse`, `Strip(" ", 1, 0)`, the template `<s> $A`; also a SentencePiece
`tokenizer.model` (docs/llama2.md)."""

from __future__ import annotations

from typing import Any

from .errors import TokcolumnarValueError
from .text.bytelevel import BYTE_ALPHABET
from .text.postprocessors import (
    ByteLevelProcessing,
    PostProcessor,
    SequenceProcessing,
    TemplateProcessing,
)

LLAMA3_BOS = "<|begin_of_text|>"
#: Llama 2's special tokens, ids 0, 1, 2 (SentencePiece's meta pieces)
LLAMA2_SPECIAL = ["<unk>", "<s>", "</s>"]

_BYTE_LEVEL_BPE = {"model": "bpe", "pre_tokenizer": "byte-level", "lowercase": False,
                   "initial_alphabet": list(BYTE_ALPHABET), "end_of_word_suffix": None,
                   "end_of_word_token": None, "continuing_subword_prefix": None,
                   "tie_break": "id"}

#: preset -> (what it fixes, its defaults), merged into `presets.PRESET_RULES`
LLM_PRESETS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "gpt4": ({**_BYTE_LEVEL_BPE, "pattern": "cl100k", "normalizer": "none"},
             {"special_tokens": ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                                 "<|fim_suffix|>", "<|endofprompt|>"]}),
    "gpt4o": ({**_BYTE_LEVEL_BPE, "pattern": "o200k", "normalizer": "none"},
              {"special_tokens": ["<|endoftext|>", "<|endofprompt|>"]}),
    "llama3": ({**_BYTE_LEVEL_BPE, "pattern": "cl100k", "normalizer": "none"},
               {"special_tokens": [LLAMA3_BOS, "<|end_of_text|>", "<|start_header_id|>",
                                   "<|end_header_id|>", "<|eot_id|>"]}),
    "qwen2": ({**_BYTE_LEVEL_BPE, "pattern": "qwen2", "normalizer": "nfc"},
              {"special_tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}),
}
#: the SentencePiece-style BPE presets (characters, not bytes: the word split,
#: `pretokenizers.SentencePieceSplit`, and the tokenizer.json text steps are the preset's own,
#: `export.build_tokenizer`), merged into `presets.PRESET_RULES` too
SENTENCEPIECE_BPE_PRESETS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama2": ({"model": "bpe", "pre_tokenizer": "metaspace", "normalizer": "none",
                "lowercase": False, "byte_fallback": True, "end_of_word_suffix": None,
                "end_of_word_token": None, "continuing_subword_prefix": None,
                "tie_break": "id", "unk_token": "<unk>", "pattern": None},
               {"special_tokens": LLAMA2_SPECIAL, "vocab_size": 32000}),
}


def llm_post_processor(preset: str | None, ids: dict[str, int]) -> PostProcessor | None:
    """The post-processor of an LLM preset's tokenizer.json (None for other runs)."""
    if preset == "llama2":  # `<s>` first (LlamaTokenizerFast's add_bos_token)
        bos = LLAMA2_SPECIAL[1]
        return TemplateProcessing.from_strings(f"{bos} $A", f"{bos} $A {bos}:1 $B:1",
                                               [(bos, ids[bos])])
    if preset not in LLM_PRESETS:
        return None
    byte_level = ByteLevelProcessing(add_prefix_space=True, trim_offsets=False, use_regex=True)
    if preset != "llama3":
        return byte_level
    bos = LLAMA3_BOS
    template = TemplateProcessing.from_strings(f"{bos} $A", f"{bos} $A {bos}:1 $B:1",
                                               [(bos, ids[bos])])
    return SequenceProcessing([byte_level, template])


def check_llm_preset(preset: str | None, special_tokens: list[str]) -> None:
    """Llama 3's template needs `<|begin_of_text|>` among the special tokens; Llama 2's
    tokenizer.model needs `<unk>` `<s>` `</s>` as ids 0, 1, 2 (SentencePiece's unk, bos and
    eos ids)."""
    if preset == "llama2" and special_tokens[:3] != LLAMA2_SPECIAL:
        raise TokcolumnarValueError(f"--preset llama2 needs --special-tokens to start with "
                                    f"{','.join(LLAMA2_SPECIAL)} (ids 0, 1, 2: its unknown, "
                                    "begin and end tokens)")
    if preset == "llama3" and LLAMA3_BOS not in special_tokens:
        raise TokcolumnarValueError(f"--preset llama3 needs {LLAMA3_BOS} among --special-tokens "
                                    "(its template starts every sequence with it)")
