"""The options of the Unigram trainer (`training/unigram.py`): SentencePiece's TrainerSpec
fields it reads, with SentencePiece's defaults (docs/unigram.md, "0. Options and their
defaults")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UnigramOptions:
    """SentencePiece's TrainerSpec fields that the trainer reads, with its defaults. Only the
    defaults of the whitespace options are supported (split_by_whitespace, prefix `▁`)."""

    vocab_size: int = 8000
    character_coverage: float = 0.9995
    seed_sentencepiece_size: int = 1_000_000
    shrinking_factor: float = 0.75
    max_sentencepiece_length: int = 16
    num_sub_iterations: int = 2
    num_threads: int = 16
    split_by_unicode_script: bool = True
    split_by_number: bool = True
    split_digits: bool = False
    meta_pieces: int = 3  # <unk>, <s>, </s>: they take ids, not pieces
    hard_vocab_limit: bool = True  # fewer pieces than vocab_size is an error
