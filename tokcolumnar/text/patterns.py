"""The pre-tokenization patterns of today's byte-level BPE tokenizers (`--pattern NAME`), as
their publishers write them, and how each one is split without look-around
(`text/llm_split.py`; docs/patterns.md).

Sources (the strings below are copied from them character for character):

* `gpt2`: GPT-2's pattern as HF's `ByteLevel` pre-tokenizer writes it
  (huggingface/tokenizers, `tokenizers/src/pre_tokenizers/byte_level.rs`; openai/gpt-2
  `src/encoder.py`). Split by `text/gpt2_split.py` / `pretokenizers.ByteLevel`.
* `cl100k`: GPT-4's `cl100k_base` as tiktoken first published it (openai/tiktoken,
  `tiktoken_ext/openai_public.py` up to 0.6; the Xenova/gpt-4 tokenizer.json), which Meta's
  Llama 3 uses unchanged: `meta-llama/Meta-Llama-3-8B` tokenizer.json, pre_tokenizer
  `Sequence[Split(Regex(...), "Isolated"), ByteLevel(use_regex=False)]`; also
  pytorch/executorch `pytorch_tokenizers/constants.py` `CL100K_PAT_STR`. tiktoken 0.7+ ships
  a rewrite of it with possessive quantifiers and `\\s++$` (`CL100K_TIKTOKEN_POSSESSIVE`
  below), which is *not* the same split (a whitespace run at the end of a text with a line
  feed inside is one piece there, two here) and which HF's Oniguruma reads differently again
  (`{1,3}+` is a repetition of `{1,3}` there, not a possessive one): we train and write the
  published non-possessive string, which HF, tiktoken and we all split alike.
* `o200k`: GPT-4o's `o200k_base` (tiktoken_ext/openai_public.py, `o200k_base()`: the seven
  alternatives joined with `|`).
* `qwen2`: Qwen2's (transformers `models/qwen2/tokenization_qwen2.py` `PRETOKENIZE_REGEX`,
  the Qwen/Qwen2-7B tokenizer.json): cl100k's with `\\p{N}` (one digit per piece) for
  `\\p{N}{1,3}`.
* `llama3`: an alias of `cl100k` (the same string, see above).

Every one of them ends in `\\s+(?!\\S)|\\s+`, the only look-around; `llm_split.py` cuts the text
where that look-ahead would cut a whitespace run and runs the rest of the pattern (no
look-around left) with Polars' regex engine on the pieces between the cuts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import TokcolumnarValueError

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
# tiktoken >= 0.7's cl100k_base `pat_str` (see the module docstring): recognised only to say
# that it is not the same split.
CL100K_TIKTOKEN_POSSESSIVE = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"
                              r"| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s")

# the alternatives every LLM pattern ends with, and what they become once the text is cut
# where the look-ahead cuts (llm_split.py)
LOOKAHEAD_TAIL = r"|\s+(?!\S)|\s+"
CUT_TAIL = r"|\s+"


@dataclass(frozen=True)
class NamedPattern:
    """A named pattern: its published string (`regex`, written to tokenizer.json and given to
    tiktoken) and the same split for Polars' regex engine once the text is cut at the
    look-ahead's cuts (`cut_regex`). `name` None: a user's regex (`custom_pattern`), split
    as HF's Split does it (`pretokenizers.PatternByteLevel`)."""

    name: str | None
    regex: str

    @property
    def cut_regex(self) -> str:
        return self.regex[:-len(LOOKAHEAD_TAIL)] + CUT_TAIL


PATTERNS: dict[str, NamedPattern] = {
    "gpt2": NamedPattern("gpt2", GPT2),
    "cl100k": NamedPattern("cl100k", CL100K),
    "o200k": NamedPattern("o200k", O200K),
    "qwen2": NamedPattern("qwen2", QWEN2),
}
ALIASES = {"llama3": "cl100k", "gpt4": "cl100k", "gpt4o": "o200k"}
PATTERN_NAMES = (*PATTERNS, *ALIASES)
_BY_REGEX = {p.regex: p for p in PATTERNS.values()}


def named_pattern(name: str) -> NamedPattern:
    """The named pattern `name` (or an alias of one)."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in PATTERNS:
        raise TokcolumnarValueError(f"unknown pattern {name!r} (choose from "
                                    f"{', '.join(PATTERN_NAMES)}, or give a regex)")
    return PATTERNS[key]


def pattern_of(value: str) -> NamedPattern:
    """The pattern a (resolved) `--pattern` value stands for: a named one, or a user's regex."""
    if value.lower() in PATTERN_NAMES:
        return named_pattern(value)
    return recognise(value) or NamedPattern(None, value)


def recognise(regex: str) -> NamedPattern | None:
    """The named pattern whose published string is exactly `regex`, if any."""
    return _BY_REGEX.get(regex)


def pattern_name_or_regex(value: str) -> tuple[str | None, str]:
    """`--pattern`'s value as (name or None, regex): a name of PATTERN_NAMES, else a regex
    (named when it is one of the named patterns' strings)."""
    if value.lower() in PATTERN_NAMES:
        p = named_pattern(value)
        return p.name, p.regex
    if not value:
        raise TokcolumnarValueError("--pattern must not be empty")
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", value):  # a misspelt name, not a regex
        named_pattern(value)
    found = recognise(value)
    return (found.name if found else None), value
