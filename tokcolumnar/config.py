"""Training settings: one dataclass mirroring the CLI options, and every check of the options
(the presets themselves are in `presets.py`). The CLI, the Python API (`train`,
`count_words`) and both engines get their settings from here, so an option is refused the same
way wherever it comes from.

A field left at None means "not given": `__post_init__` checks the types of the given values,
applies the preset (refusing a given value that contradicts what the preset fixes), fills the
defaults, then the model's own defaults (WordPiece's `##` prefix and `[UNK]`), and checks the
values. A resolved config passed again (`dataclasses.replace`) resolves to itself."""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .corpus.sources import FORMATS
from .errors import TokcolumnarTypeError, TokcolumnarValueError
from .llm_presets import check_llm_preset
from .presets import BERT_PRESETS, PRESET_RULES, PRESETS, ROLES, flag, role_name
from .text.bytelevel import BYTE_ALPHABET
from .text.normalizers import NORMALIZER_NAMES, BertNormalizer, Normalizer, build_normalizer
from .text.patterns import pattern_name_or_regex, pattern_of
from .text.pretokenizers import (
    PRETOKENIZER_NAMES,
    PatternByteLevel,
    PreTokenizer,
    SentencePieceSplit,
    build_pretokenizer,
)
from .text.segmenters import CJK_SPLITS, SEGMENTER_NAMES, build_segmenter

#: SentencePiece's byte pieces `<0x00>` … `<0xFF>`
BYTE_PIECE = re.compile("<0x[0-9A-F]{2}>")
TIE_BREAKS = ("id", "lexical-max", "first-seen")
MODELS = ("bpe", "wordpiece", "unigram")
ENGINES = ("polars", "duckdb", "ray", "spark")
WORDPIECE_SCORINGS = ("likelihood", "frequency")


DEFAULTS: dict[str, Any] = {
    "model": "bpe", "vocab_size": 30000, "min_frequency": 0, "special_tokens": [],
    "pre_tokenizer": "whitespace", "normalizer": "none", "lowercase": False,
    "initial_alphabet": [], "tie_break": "id", "engine": "polars", "column": "text",
    "max_word_chars": 1_000_000,
}

# the checks of each option, by kind
INT_MINIMUM = {"vocab_size": 1, "min_frequency": 0, "limit_alphabet": 1, "max_token_length": 1,
               "max_merges": 0, "max_word_chars": 1, "max_words": 1}
INT_MAXIMUM = (1 << 63) - 1  # DuckDB binds the integer options as BIGINT
CHOICES: dict[str, tuple[str, ...]] = {
    "model": MODELS, "pre_tokenizer": PRETOKENIZER_NAMES + SEGMENTER_NAMES,
    "normalizer": NORMALIZER_NAMES, "cjk_split": CJK_SPLITS,
    "tie_break": TIE_BREAKS, "preset": PRESETS, "engine": ENGINES, "format": FORMATS,
    "wordpiece_scoring": WORDPIECE_SCORINGS,
}
CASE_INSENSITIVE = ("pre_tokenizer", "normalizer")  # as the builders always read them
TEXTS = ("end_of_word_suffix", "end_of_word_token", "continuing_subword_prefix", "unk_token",
         "column", "pattern", "extend")
BOOLS = ("lowercase", "show_progress", "byte_fallback")
STRING_LISTS = ("special_tokens", "variant_order")
WORDPIECE_ONLY = ("min_score", "wordpiece_scoring")


@dataclass
class TrainConfig:
    """Every training option (names follow the CLI flags with `-` -> `_`; None = not given)."""

    model: str | None = None
    vocab_size: int | None = None
    min_frequency: int | None = None
    special_tokens: list[str] | None = None
    pre_tokenizer: str | None = None
    normalizer: str | None = None
    lowercase: bool | None = None
    end_of_word_suffix: str | None = None
    end_of_word_token: str | None = None
    continuing_subword_prefix: str | None = None
    limit_alphabet: int | None = None
    initial_alphabet: list[str] | None = None
    max_token_length: int | None = None
    tie_break: str | None = None
    preset: str | None = None
    engine: str | None = None
    format: str | None = None
    column: str | None = None
    unk_token: str | None = None
    max_word_chars: int | None = None
    variant_order: list[str] | None = None
    # WordPiece
    max_merges: int | None = None
    min_score: float | None = None
    wordpiece_scoring: str | None = None
    show_progress: bool | None = None
    # jieba / mecab: what becomes of text the dictionary does not know
    cjk_split: str | None = None
    # --max-words N: train on the N most frequent words only (`memory.keep_most_frequent`)
    max_words: int | None = None
    # the transformers roles of special tokens ({"pad_token": "[PAD]", ...}; `pad` is read as
    # `pad_token`), over the preset's (`presets.special_token_roles`): written to
    # tokenizer_config.json and special_tokens_map.json, no effect on training
    special_token_roles: dict[str, str] | None = None
    # --pattern NAME|REGEX: byte-level BPE's pre-tokenization pattern (text/patterns.py; a
    # named pattern's regex is stored as its name)
    pattern: str | None = None
    # --extend BASE: continue a base tokenizer's merges (`training.extend`)
    extend: str | None = None
    # --model unigram / bpe: SentencePiece's byte fallback (the 256 `<0xNN>` pieces after the
    # special tokens, a character outside the vocabulary spelled in its UTF-8 bytes;
    # docs/unigram.md, docs/llama2.md)
    byte_fallback: bool | None = None

    def __post_init__(self) -> None:
        #: Whether the settings added the unknown token to the special tokens (not a field:
        #: not an option, and not in `to_dict`; see `run_notes`).
        self.added_unk_token = False
        check_types(self)
        name_pattern(self)
        apply_preset(self, DEFAULTS["vocab_size"])
        apply_pattern_rules(self)
        for name, value in DEFAULTS.items():
            if getattr(self, name) is None:
                setattr(self, name, list(value) if isinstance(value, list) else value)
        apply_model_rules(self)
        apply_segmenter_rules(self)
        check_values(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def text_components(self) -> tuple[Normalizer | None, PreTokenizer]:
        """The normalizer (None for `none`) and the pre-tokenizer these settings name. Before
        a segmenter, `bert` is BERT's normalizer without the spaces around CJK ideographs (which
        would cut the text into characters before the segmenter sees it)."""
        normalizer = build_normalizer(self.normalizer, self.lowercase)
        if self.preset == "llama2":  # Llama 2's text steps, a word before each `▁`
            return normalizer, SentencePieceSplit()
        if self.pattern not in (None, "gpt2"):
            return normalizer, PatternByteLevel(use_regex=False, pattern=pattern_of(self.pattern))
        if self.pre_tokenizer not in SEGMENTER_NAMES:
            return normalizer, build_pretokenizer(self.pre_tokenizer)
        if isinstance(normalizer, BertNormalizer):
            normalizer = dataclasses.replace(normalizer, handle_chinese_chars=False)
        return normalizer, build_segmenter(self.pre_tokenizer, self.cjk_split)


def run_notes(cfg: TrainConfig) -> list[str]:
    """What a successful run with these settings says about them (`tokcolumnar: note:` lines
    on the command line, warnings in Python)."""
    if not getattr(cfg, "added_unk_token", False):
        return []
    return [f"--model wordpiece: {cfg.unk_token} added to --special-tokens (id "
            f"{cfg.special_tokens.index(cfg.unk_token)}), the token a word the vocabulary "
            "cannot spell encodes to (give --unk-token and --special-tokens to choose it)"]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _string_list(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        raise TokcolumnarTypeError(f"{flag(name)} must be a list of strings, not one string "
                                   f"(write [{value!r}])")
    if not isinstance(value, (list, tuple)):
        raise TokcolumnarTypeError(f"{flag(name)} must be a list of strings, got {value!r}")
    for x in value:
        if not isinstance(x, str):
            raise TokcolumnarTypeError(f"{flag(name)} must be a list of strings, got {x!r} "
                                       "in it")
        if not x:
            raise TokcolumnarValueError(f"{flag(name)} has an empty name")
    return list(value)


def check_types(cfg: TrainConfig) -> None:
    """Refuse given values of the wrong type (TypeError) and bring the accepted ones to one form
    (NumPy integers -> int, tuples -> lists, an initial alphabet string -> its characters)."""
    for name in INT_MINIMUM:
        value = getattr(cfg, name)
        if value is not None:
            if not _is_int(value):
                raise TokcolumnarTypeError(f"{flag(name)} must be an integer, got {value!r}")
            setattr(cfg, name, int(value))
    for name in (*CHOICES, *TEXTS):
        value = getattr(cfg, name)
        if value is not None and not isinstance(value, str):
            raise TokcolumnarTypeError(f"{flag(name)} must be a string, got {value!r}")
    for name in CASE_INSENSITIVE:
        if getattr(cfg, name) is not None:
            setattr(cfg, name, getattr(cfg, name).lower())
    for name in BOOLS:
        value = getattr(cfg, name)
        if value is not None and not isinstance(value, bool):
            raise TokcolumnarTypeError(f"{flag(name)} must be True or False, got {value!r}")
    if cfg.min_score is not None:
        if isinstance(cfg.min_score, bool) or not isinstance(cfg.min_score, numbers.Real):
            raise TokcolumnarTypeError(f"--min-score must be a number, got {cfg.min_score!r}")
        cfg.min_score = float(cfg.min_score)
    for name in STRING_LISTS:
        if getattr(cfg, name) is not None:
            setattr(cfg, name, _string_list(name, getattr(cfg, name)))
    if cfg.special_token_roles is not None:
        cfg.special_token_roles = _roles(cfg.special_token_roles)
    if cfg.initial_alphabet is not None:
        chars = cfg.initial_alphabet
        if isinstance(chars, str):
            chars = list(chars)
        elif not isinstance(chars, (list, tuple)) or not all(isinstance(c, str) for c in chars):
            raise TokcolumnarTypeError(f"--initial-alphabet must be a string of characters or a "
                                       f"list of them, got {cfg.initial_alphabet!r}")
        for c in chars:
            if len(c) != 1:
                raise TokcolumnarValueError(f"initial alphabet entries must be single "
                                            f"characters, got {c!r}")
        cfg.initial_alphabet = list(dict.fromkeys(chars))


def _roles(value: Any) -> dict[str, str]:
    """--special-token-roles as {role: token} with transformers' role names (`pad` ->
    `pad_token`); an unknown role is refused, naming the known ones."""
    if not isinstance(value, dict):
        raise TokcolumnarTypeError(f"--special-token-roles must be a dict of role -> token, "
                                   f"got {value!r}")
    roles: dict[str, str] = {}
    for name, token in value.items():
        if not isinstance(name, str) or not isinstance(token, str):
            raise TokcolumnarTypeError(f"--special-token-roles must map role names to token "
                                       f"strings, got {name!r}: {token!r}")
        role = role_name(name)
        if role not in ROLES:
            raise TokcolumnarValueError(
                f"--special-token-roles: unknown role {name!r} (choose from "
                f"{', '.join(r.removesuffix('_token') for r in ROLES)})")
        if role in roles and roles[role] != token:
            raise TokcolumnarValueError(f"--special-token-roles gives {role} twice "
                                        f"({roles[role]!r} and {token!r})")
        roles[role] = token
    return roles


def check_roles(cfg: TrainConfig) -> None:
    """Each role's token is a special token of the run; the unknown token's role is the
    model's --unk-token, and with a BERT preset cls/sep are its template's [CLS]/[SEP]."""
    for role, token in (cfg.special_token_roles or {}).items():
        if token not in cfg.special_tokens:
            raise TokcolumnarValueError(f"--special-token-roles {role.removesuffix('_token')}="
                                        f"{token} is not among --special-tokens")
        if role == "unk_token" and cfg.unk_token is not None and token != cfg.unk_token:
            raise TokcolumnarValueError(f"--special-token-roles unk={token} differs from the "
                                        f"model's --unk-token {cfg.unk_token}")
        fixed = {"cls_token": "[CLS]", "sep_token": "[SEP]"}.get(role)
        if cfg.preset in BERT_PRESETS and fixed is not None and token != fixed:
            raise TokcolumnarValueError(
                f"--preset {cfg.preset}'s template is [CLS] ... [SEP]: --special-token-roles "
                f"{role.removesuffix('_token')} must be {fixed}, got {token}")


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
    check_llm_preset(cfg.preset, cfg.special_tokens or [])
    if cfg.preset in BERT_PRESETS:
        missing = [t for t in ("[CLS]", "[SEP]", cfg.unk_token) if t not in cfg.special_tokens]
        if missing:
            raise TokcolumnarValueError(
                f"--preset {cfg.preset} needs {', '.join(missing)} among --special-tokens (the "
                "[CLS] ... [SEP] template and the unknown token)")


def name_pattern(cfg: TrainConfig) -> None:
    """--pattern as a name when it is one of the named patterns (or its regex)."""
    if cfg.pattern is not None:
        name, regex = pattern_name_or_regex(cfg.pattern)
        cfg.pattern = name if name is not None else regex


def apply_pattern_rules(cfg: TrainConfig) -> None:
    """--pattern belongs to byte-level BPE (and implies `--pre-tokenizer byte-level`); a
    pattern other than GPT-2's is split by the Polars engine only."""
    if cfg.pattern is None:
        if cfg.pre_tokenizer == "byte-level":
            cfg.pattern = "gpt2"
        return
    if cfg.pre_tokenizer is None:
        cfg.pre_tokenizer = "byte-level"
    if cfg.pre_tokenizer != "byte-level":
        raise TokcolumnarValueError(f"--pattern applies to --pre-tokenizer byte-level only "
                                    f"(got --pre-tokenizer {cfg.pre_tokenizer})")
    if cfg.pattern not in ("gpt2", "cl100k", "o200k", "qwen2"):
        # a user's regex: split as HF's Split does (by Polars' engine, or with look-around
        # by Python's, `text.backtracking`: docs/patterns.md)
        try:
            PatternByteLevel(use_regex=False, pattern=pattern_of(cfg.pattern))
        except TokcolumnarValueError as e:
            why = " ".join(str(e).split())  # the regex crate's message spans lines
            raise TokcolumnarValueError(f"--pattern: {why}") from None
    if cfg.pattern != "gpt2" and cfg.engine == "duckdb":
        raise TokcolumnarValueError(f"--pattern {cfg.pattern} is split by the Polars engine "
                                    "only: use --engine polars")


def apply_model_rules(cfg: TrainConfig) -> None:
    """The options a model does not have are refused; WordPiece's defaults are filled."""
    if cfg.model == "wordpiece":
        if cfg.end_of_word_suffix is not None or cfg.end_of_word_token is not None:
            raise TokcolumnarValueError(
                "WordPiece marks word continuations (--continuing-subword-prefix); "
                "--end-of-word-suffix/--end-of-word-token are BPE only")
        if cfg.tie_break != "id":
            raise TokcolumnarValueError(
                "WordPiece breaks ties by pair count, then (left_id, right_id); --tie-break "
                "applies to BPE only")
        if cfg.continuing_subword_prefix is None:
            cfg.continuing_subword_prefix = "##"
        if cfg.unk_token is None:
            # WordPiece encodes a word it cannot segment as the unknown token, so that token
            # needs an id: without one, HF's encoder and ours fail on any unseen character
            # (HF's WordPieceTrainer leaves it out of the vocabulary). A given --unk-token must
            # be among --special-tokens (`check_values`); the default one is added, and said.
            cfg.unk_token = "[UNK]"
            if cfg.unk_token not in cfg.special_tokens:
                cfg.special_tokens = [*cfg.special_tokens, cfg.unk_token]
                # said by the run once it succeeds (`run_notes`): a refused run has one line
                cfg.added_unk_token = True
        if cfg.wordpiece_scoring is None:
            cfg.wordpiece_scoring = "likelihood"
    elif cfg.model == "bpe":
        for name in WORDPIECE_ONLY:
            if getattr(cfg, name) is not None:
                raise TokcolumnarValueError(f"{flag(name)} applies to --model wordpiece only")
    elif cfg.model == "unigram":
        apply_unigram_rules(cfg)
    if cfg.byte_fallback:
        check_byte_fallback(cfg)
    if cfg.normalizer == "nmt_nfkc" and cfg.engine == "duckdb":  # no SQL twin of the char map
        raise TokcolumnarValueError("--normalizer nmt_nfkc runs on the Polars engine only")


def check_byte_fallback(cfg: TrainConfig) -> None:
    """--byte-fallback: Unigram's (docs/unigram.md), or BPE over characters (docs/llama2.md):
    the 256 byte pieces need characters as the alphabet (a byte-level BPE already spells
    everything in bytes), no prefix or suffix (HF would spell the prefixed string's bytes),
    and the Polars engine's trainer."""
    if cfg.model not in ("bpe", "unigram"):
        raise TokcolumnarValueError("--byte-fallback applies to --model bpe and unigram only")
    if cfg.model != "bpe":
        return
    if cfg.pre_tokenizer == "byte-level":
        raise TokcolumnarValueError("--byte-fallback spells unknown characters in byte pieces; "
                                    "--pre-tokenizer byte-level already makes every byte a "
                                    "symbol (use one or the other)")
    for name in ("continuing_subword_prefix", "end_of_word_suffix", "end_of_word_token"):
        if getattr(cfg, name) is not None:
            raise TokcolumnarValueError(f"--byte-fallback does not combine with {flag(name)}")
    if cfg.engine == "duckdb":
        raise TokcolumnarValueError("--byte-fallback runs on the Polars engine only")
    if cfg.extend is not None:
        raise TokcolumnarValueError("--extend does not combine with BPE byte fallback yet "
                                    "(--byte-fallback given, or the base was trained with it)")
    clash = [t for t in cfg.special_tokens if BYTE_PIECE.fullmatch(t)]
    if clash:
        raise TokcolumnarValueError(f"--special-tokens {clash[0]} is one of --byte-fallback's "
                                    "byte pieces")


# Options --model unigram does not have (SentencePiece's trainer has no equivalent), with the
# value that means "not used".
UNIGRAM_UNUSED = {"end_of_word_suffix": None, "end_of_word_token": None,
                  "continuing_subword_prefix": None, "limit_alphabet": None,
                  "initial_alphabet": [], "max_merges": None, "min_frequency": 0,
                  "special_tokens": [], "tie_break": "id", "max_words": None,
                  "unk_token": None, "variant_order": None,
                  **{name: None for name in WORDPIECE_ONLY}}


def apply_unigram_rules(cfg: TrainConfig) -> None:
    """Unigram (docs/unigram.md): SentencePiece's algorithm on sentences, with its own
    whitespace handling (the `metaspace` pre-tokenizer; the default `whitespace` becomes it),
    on the Polars engine; `--max-token-length` is SentencePiece's max_sentencepiece_length
    (default 16)."""
    for name, unused in UNIGRAM_UNUSED.items():
        if getattr(cfg, name) != unused:
            raise TokcolumnarValueError(f"{flag(name)} does not apply to --model unigram")
    if cfg.pre_tokenizer == "whitespace":
        cfg.pre_tokenizer = "metaspace"
    if cfg.pre_tokenizer != "metaspace":
        raise TokcolumnarValueError("--model unigram splits words as SentencePiece does "
                                    "(--pre-tokenizer metaspace)")
    if cfg.engine != "polars":
        raise TokcolumnarValueError("--model unigram runs on the Polars engine only")


def apply_segmenter_rules(cfg: TrainConfig) -> None:
    """--cjk-split belongs to the segmenters (default words); the DuckDB engine cannot run
    them (they are Python libraries, and segmenting between SQL stages would be the Polars
    engine's count under another name)."""
    if cfg.pre_tokenizer not in SEGMENTER_NAMES:
        if cfg.cjk_split is not None:
            raise TokcolumnarValueError(f"--cjk-split applies to --pre-tokenizer "
                                        f"{'|'.join(SEGMENTER_NAMES)} only")
        return
    if cfg.cjk_split is None:
        cfg.cjk_split = "words"
    if cfg.engine == "duckdb":
        raise TokcolumnarValueError(f"--pre-tokenizer {cfg.pre_tokenizer} runs a Python "
                                    "segmenter, which the DuckDB engine cannot: use --engine "
                                    "polars")


def check_values(cfg: TrainConfig) -> None:
    """Every value in its range (all fields are resolved here)."""
    for name, choices in CHOICES.items():
        value = getattr(cfg, name)
        if value is not None and value not in choices:
            raise TokcolumnarValueError(f"unknown {name.replace('_', '-')} {value!r} "
                                        f"(choose from {', '.join(choices)})")
    for name, minimum in INT_MINIMUM.items():
        value = getattr(cfg, name)
        if value is not None and value < minimum:
            need = "positive" if minimum == 1 else f">= {minimum}"
            raise TokcolumnarValueError(f"{flag(name)} must be {need}, got {value}")
        if value is not None and value > INT_MAXIMUM:  # both engines count in 64 bits
            raise TokcolumnarValueError(f"{flag(name)} must be at most {INT_MAXIMUM}, "
                                        f"got {value}")
    for name in TEXTS:
        if getattr(cfg, name) == "":
            raise TokcolumnarValueError(f"{flag(name)} must not be empty")
    if cfg.min_score is not None and not (math.isfinite(cfg.min_score) and cfg.min_score >= 0):
        raise TokcolumnarValueError(f"--min-score must be a finite number >= 0, "
                                    f"got {cfg.min_score}")
    duplicates = sorted(t for t, n in Counter(cfg.special_tokens).items() if n > 1)
    if duplicates:
        raise TokcolumnarValueError(f"--special-tokens contains duplicates: "
                                    f"{', '.join(duplicates)}")
    if cfg.end_of_word_suffix is not None and cfg.end_of_word_token is not None:
        raise TokcolumnarValueError("use either --end-of-word-suffix or --end-of-word-token")
    check_roles(cfg)
    if cfg.unk_token is not None and cfg.unk_token not in cfg.special_tokens:
        raise TokcolumnarValueError(f"--unk-token {cfg.unk_token} must be among --special-tokens "
                                    "(otherwise it has no id and an unknown character cannot "
                                    "be encoded)")
