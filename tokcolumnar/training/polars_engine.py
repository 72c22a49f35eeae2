"""The Polars engine: words counted by Polars plans (`corpus.counting`), merges by the NumPy
loops over the flat layout (`bpe`, `wordpiece`). `pipeline.train` runs it, or the DuckDB
engine (`tokcolumnar.duckdb.engine`), through the same two calls: `count` and `train`."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ..config import TrainConfig
from ..corpus.counting import count_chunks
from ..corpus.readers import iter_sequences
from ..malloc import merging_heap
from ..memory import LoopPlan, check_merge_memory
from ..progress import StageTimer
from ..workdir import WorkDir
from .bpe import BpeSettings, BpeTrainer
from .checkpoint import MergeCheckpoint, Trainer
from .symbols import Initial, build_initial, check_vocab_size
from .tables import CountedWords, TrainTables, merges_table, result_tables
from .wordpiece import LikelihoodTrainer, WordPieceSettings


class PolarsEngine:
    name = "polars"
    #: File inputs of a run with a work directory are counted by the pipeline, unit by unit
    #: (`corpus.spill`), with this engine's counting functions.
    counts_in_units = True
    #: The words as `tables.CountedWords` (dropped while the loop runs).
    takes_counted_words = True
    #: --extend runs through the pipeline (`training.extend`, on this engine's loop).
    trains_extensions = False

    def use_limits(self, memory_limit: int, work: WorkDir | None) -> None:
        """Nothing to set: the pipeline bounds the count, `check_memory` the merge loop."""

    def check_memory(self, words: pl.DataFrame, memory_limit: int, disk: bool,
                     vocab_size: int | None = None) -> LoopPlan:
        """The merge loop's layout and tables, estimated from the words, within the limit,
        in memory or (`disk`) with its state in the work directory
        (`memory.check_merge_memory`)."""
        return check_merge_memory(words, memory_limit, disk, vocab_size)

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame:
        """The `words` table (word, count, first_seen) of the inputs (`timer`: the segmenter's
        share of the count, for `--pre-tokenizer jieba|mecab`)."""
        normalizer, pretokenizer = cfg.text_components()
        chunks = iter_sequences(inputs, fmt=cfg.format, column=cfg.column,
                                pretokenizer=pretokenizer, max_word_chars=cfg.max_word_chars)
        return count_chunks(chunks, normalizer, pretokenizer, first_seen=True,
                            max_word_chars=cfg.max_word_chars, progress=cfg.show_progress,
                            timer=timer)

    def train(self, words: pl.DataFrame | CountedWords, cfg: TrainConfig, timer: StageTimer,
              checkpoint: MergeCheckpoint | None = None) -> TrainTables:
        """Initial symbols, the merge loop of the model, and the result tables (`checkpoint`:
        the BPE loop's state saved as it runs, and restored when the run resumes). Given as
        `CountedWords` (the pipeline's), the words table is dropped while the loop runs."""
        counted = words if isinstance(words, CountedWords) else CountedWords(words)
        del words
        restored = checkpoint.restore() if checkpoint is not None else None
        with timer.stage("initial"):
            initial = (restored[0] if restored is not None
                       else initial_symbols(counted.table(), cfg))
        counted.release()
        # the loop's temporaries reused from the heap (command-line runs, `malloc`)
        with timer.stage("merge"), merging_heap():
            merges = merge_loop(initial, cfg, checkpoint,
                                restored[1] if restored is not None else None)
        with timer.stage("tables"):
            return result_tables(counted.table(), initial, merges, cfg,
                                 checkpoint.work.path if checkpoint is not None else None)


def initial_symbols(words: pl.DataFrame, cfg: TrainConfig, check: bool = True) -> Initial:
    """Ids and the flat layout of every word's initial symbols, checked against the vocab
    size (unless not `check`)."""
    initial = build_initial(words, cfg.special_tokens, cfg.limit_alphabet, cfg.initial_alphabet,
                            cfg.continuing_subword_prefix, cfg.end_of_word_suffix,
                            cfg.end_of_word_token, cfg.variant_order,
                            byte_fallback=bool(cfg.byte_fallback), vocab_size=cfg.vocab_size)
    if check:
        check_vocab_size(cfg.vocab_size, len(initial.vocab))
    return initial


def make_trainer(initial: Initial, cfg: TrainConfig) -> Trainer:
    """The model's merge loop on `initial`, not started: likelihood WordPiece's, or the BPE
    loop (BPE, and WordPiece scored by frequency)."""
    if cfg.model == "wordpiece" and cfg.wordpiece_scoring == "likelihood":
        return LikelihoodTrainer(initial, WordPieceSettings(
            vocab_size=cfg.vocab_size, prefix=cfg.continuing_subword_prefix,
            min_frequency=cfg.min_frequency, max_merges=cfg.max_merges, min_score=cfg.min_score,
            max_token_length=cfg.max_token_length, show_progress=cfg.show_progress))
    return BpeTrainer(initial, BpeSettings(
        vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency, tie_break=cfg.tie_break,
        prefix=cfg.continuing_subword_prefix, max_token_length=cfg.max_token_length,
        max_merges=cfg.max_merges, show_progress=cfg.show_progress))


def merge_loop(initial: Initial, cfg: TrainConfig, checkpoint: MergeCheckpoint | None = None,
               restored: Trainer | None = None, resumed: bool | None = None) -> pl.DataFrame:
    """Run the model's merge loop on the layout (changing it in place); the merges table.

    BPE and WordPiece with `--wordpiece-scoring frequency` (HF's WordPieceTrainer: BPE by pair
    count with the `##` prefix; the score column holds that count) run the BPE loop;
    likelihood WordPiece its own loop, whose merges also carry the two token counts each
    score was computed from. `restored`: a trainer to continue (`resumed`, the default when
    one is given) or to start."""
    if resumed is None:
        resumed = restored is not None
    tokens = initial.vocab.tokens
    if restored is not None:  # progress is not in the fingerprint: this run's choice
        restored.settings.show_progress = cfg.show_progress
    if checkpoint is not None:
        checkpoint.watch(initial)
    if cfg.model == "wordpiece" and cfg.wordpiece_scoring == "likelihood":
        likelihood = restored or make_trainer(initial, cfg)
        assert isinstance(likelihood, LikelihoodTrainer)
        record = likelihood.train(resumed=resumed, on_pass=checkpoint)
        return merges_table(record, tokens, record.score).with_columns(
            pl.Series("left_count", np.asarray(record.left_count, dtype=np.uint64)),
            pl.Series("right_count", np.asarray(record.right_count, dtype=np.uint64)))
    trainer = restored or make_trainer(initial, cfg)
    assert isinstance(trainer, BpeTrainer)
    record = trainer.train(resumed=resumed, on_pass=checkpoint)
    scores = np.asarray(record.count, dtype=np.float64) if cfg.model == "wordpiece" else None
    return merges_table(record, tokens, scores)
