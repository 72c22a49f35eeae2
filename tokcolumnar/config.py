"""Training settings: one dataclass mirroring the CLI options, and the presets that fill it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .errors import TokcolumnarError

TIE_BREAKS = ("id", "lexical-max", "first-seen")
MODELS = ("bpe", "wordpiece")
PRESETS = ("gpt2", "bert", "subword-nmt")


@dataclass
class TrainConfig:
    """Every training option (names follow the CLI flags with `-` -> `_`)."""

    model: str = "bpe"
    vocab_size: int = 30000
    min_frequency: int = 0
    special_tokens: list[str] = field(default_factory=list)
    pre_tokenizer: str = "whitespace"
    normalizer: str = "none"
    lowercase: bool = False
    end_of_word_suffix: str | None = None
    end_of_word_token: str | None = None
    continuing_subword_prefix: str | None = None
    limit_alphabet: int | None = None
    initial_alphabet: list[str] = field(default_factory=list)
    max_token_length: int | None = None
    tie_break: str = "id"
    preset: str | None = None
    engine: str = "polars"
    format: str | None = None
    column: str = "text"
    unk_token: str | None = None
    max_word_chars: int = 1_000_000
    variant_order: list[str] | None = None
    # WordPiece
    max_merges: int | None = None
    min_score: float | None = None
    wordpiece_scoring: str = "likelihood"
    show_progress: bool | None = None

    def __post_init__(self) -> None:
        if self.preset:
            apply_preset(self)
        self.validate()

    def validate(self) -> None:
        if self.model not in MODELS:
            raise TokcolumnarError(f"unknown model {self.model!r} (choose from bpe, wordpiece)")
        if self.tie_break not in TIE_BREAKS:
            raise TokcolumnarError(f"unknown tie-break {self.tie_break!r} "
                                   f"(choose from {', '.join(TIE_BREAKS)})")
        if self.vocab_size < 1:
            raise TokcolumnarError("--vocab-size must be positive")
        if self.min_frequency < 0:
            raise TokcolumnarError("--min-frequency must be >= 0")
        if self.limit_alphabet is not None and self.limit_alphabet < 0:
            raise TokcolumnarError("--limit-alphabet must be >= 0")
        if self.max_token_length is not None and self.max_token_length < 1:
            raise TokcolumnarError("--max-token-length must be >= 1")
        if self.engine not in ("polars", "duckdb"):
            raise TokcolumnarError(f"unknown engine {self.engine!r} (choose from polars, duckdb)")
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise TokcolumnarError("--special-tokens contains duplicates")
        for c in self.initial_alphabet:
            if len(c) != 1:
                raise TokcolumnarError(f"initial alphabet entries must be single characters, "
                                       f"got {c!r}")
        if self.end_of_word_suffix is not None and self.end_of_word_token is not None:
            raise TokcolumnarError("use either --end-of-word-suffix or --end-of-word-token")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def needs_first_seen(self) -> bool:
        return self.tie_break == "first-seen"


def apply_preset(cfg: TrainConfig) -> None:
    """Fill in the settings that define a preset's reference configuration."""
    if cfg.preset not in PRESETS:
        raise TokcolumnarError(f"unknown preset {cfg.preset!r} (choose from {', '.join(PRESETS)})")
    if cfg.preset == "gpt2":
        from .bytelevel import BYTE_ALPHABET

        cfg.model = "bpe"
        cfg.pre_tokenizer = "byte-level"
        cfg.normalizer = "none"
        cfg.initial_alphabet = list(BYTE_ALPHABET)
        if not cfg.special_tokens:
            cfg.special_tokens = ["<|endoftext|>"]
    elif cfg.preset == "bert":
        cfg.model = "wordpiece"
        cfg.pre_tokenizer = "bert"
        cfg.normalizer = "bert"
        cfg.lowercase = True
        cfg.continuing_subword_prefix = cfg.continuing_subword_prefix or "##"
        if not cfg.special_tokens:
            cfg.special_tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        cfg.unk_token = cfg.unk_token or "[UNK]"
    elif cfg.preset == "subword-nmt":
        # `--vocab-size N` is read as subword-nmt's `-s N`: N merge operations
        cfg.model = "bpe"
        cfg.pre_tokenizer = "subword-nmt"
        cfg.normalizer = "none"
        cfg.end_of_word_suffix = "</w>"
        cfg.tie_break = "lexical-max"
        cfg.min_frequency = max(cfg.min_frequency, 2)
        if cfg.max_merges is None:
            cfg.max_merges = cfg.vocab_size
            cfg.vocab_size = 1 << 40
