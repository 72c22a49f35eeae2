"""Training pipeline: corpus -> words -> initial symbols -> merge loop -> result tables.

`train()` is the Python entry point; it mirrors the CLI options as keyword arguments."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .alphabet import Initial, build_initial, check_vocab_size
from .bpe_trainer import BpeSettings, BpeTrainer, MergeRecord
from .config import TrainConfig
from .corpus import iter_sequences
from .counting import check_counts_columns, count_chunks, load_counts
from .errors import TokcolumnarError, TokcolumnarTypeError, TokcolumnarValueError
from .exporters import write_outputs
from .normalizers import Normalizer, build_normalizer
from .outputs import output_dir
from .pretokenizers import PreTokenizer, build_pretokenizer


@dataclass
class TrainResult:
    """Everything a run produced: the three tables, the settings and the stage timings."""

    config: TrainConfig
    words: pl.DataFrame
    merges: pl.DataFrame
    vocab: pl.DataFrame
    normalizer: Normalizer | None
    pretokenizer: PreTokenizer
    timings: dict[str, float] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)

    def tokenizer(self):  # noqa: ANN201 - avoids an import cycle in the annotation
        from .tokenizer import Tokenizer

        return Tokenizer.from_result(self)

    def save(self, out_dir: str | Path, force: bool = False) -> Path:
        """Write the output files into `out_dir` (see `train`'s `out_dir` for the rules)."""
        from .exporters import export

        return export(self, out_dir, force=force)


def pipeline_parts(cfg: TrainConfig) -> tuple[Normalizer | None, PreTokenizer]:
    if cfg.pre_tokenizer == "subword-nmt":
        from .subword_nmt import SubwordNmtSplit

        pretokenizer: PreTokenizer = SubwordNmtSplit()
    else:
        pretokenizer = build_pretokenizer(cfg.pre_tokenizer)
    return build_normalizer(cfg.normalizer, cfg.lowercase), pretokenizer


def words_from_inputs(inputs: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The counting stage alone."""
    normalizer, pretokenizer = pipeline_parts(cfg)
    chunks = iter_sequences(inputs, fmt=cfg.format, column=cfg.column,
                            pretokenizer=pretokenizer, max_word_chars=cfg.max_word_chars)
    return count_chunks(chunks, normalizer, pretokenizer, first_seen=True,
                       max_word_chars=cfg.max_word_chars, progress=cfg.show_progress)


def count_words(inputs: Any, **options: Any) -> pl.DataFrame:
    """The counting stage alone: the `words` table (word, count, first_seen); `options` are
    the training options (`engine="duckdb"` counts in DuckDB)."""
    cfg = options.pop("config", None) or TrainConfig(**options)
    if cfg.engine == "duckdb":
        from .engines.duckdb_engine import count_duckdb

        return count_duckdb(inputs, cfg)
    return words_from_inputs(inputs, cfg)


def initial_from_words(words: pl.DataFrame, cfg: TrainConfig) -> Initial:
    initial = build_initial(words, cfg.special_tokens, cfg.limit_alphabet, cfg.initial_alphabet,
                            cfg.continuing_subword_prefix, cfg.end_of_word_suffix,
                            cfg.end_of_word_token, cfg.variant_order)
    check_vocab_size(cfg.vocab_size, len(initial.vocab))
    return initial


def merges_table(rec: MergeRecord, tokens: list[str], scores: list[float] | None = None
                 ) -> pl.DataFrame:
    tok = np.array(tokens, dtype=object)
    left = np.array(rec.left, dtype=np.int64)
    right = np.array(rec.right, dtype=np.int64)
    new = np.array(rec.new, dtype=np.int64)
    return pl.DataFrame({
        "rank": pl.Series(np.arange(len(left)), dtype=pl.UInt32),
        "left": pl.Series(tok[left].tolist(), dtype=pl.String),
        "right": pl.Series(tok[right].tolist(), dtype=pl.String),
        "token": pl.Series(tok[new].tolist(), dtype=pl.String),
        "left_id": pl.Series(left, dtype=pl.UInt32),
        "right_id": pl.Series(right, dtype=pl.UInt32),
        "id": pl.Series(new, dtype=pl.UInt32),
        "count": pl.Series(rec.count, dtype=pl.UInt64),
        "score": pl.Series(scores if scores is not None else [None] * len(left),
                           dtype=pl.Float64),
        "words": pl.Series(rec.words, dtype=pl.UInt64),
    })


def vocab_table(initial: Initial, merges: pl.DataFrame) -> pl.DataFrame:
    v = initial.vocab
    first_rank = merges.group_by("id").agg(pl.col("rank").min())
    return pl.DataFrame({
        "id": pl.Series(np.arange(len(v)), dtype=pl.UInt32),
        "token": pl.Series(v.tokens, dtype=pl.String),
        "kind": pl.Series(v.kinds, dtype=pl.String),
    }).join(first_rank, on="id", how="left").sort("id")


def words_table(words: pl.DataFrame, initial: Initial) -> pl.DataFrame:
    """Attach each word's final segmentation (tokens and ids)."""
    offsets, ids = initial.layout.segmentation(initial.n_words)
    flat = pl.DataFrame({
        "w": np.repeat(np.arange(initial.n_words), np.diff(offsets)),
        "tokens": pl.Series(initial.vocab.tokens, dtype=pl.String).gather(ids),
        "ids": pl.Series(ids, dtype=pl.UInt32),
    })
    lists = flat.group_by("w", maintain_order=True).agg("tokens", "ids")
    full = pl.DataFrame({"w": np.arange(initial.n_words)}).join(
        lists, on="w", how="left", maintain_order="left")
    return words.with_columns(
        full.get_column("tokens").fill_null(pl.Series([[]], dtype=pl.List(pl.String))),
        full.get_column("ids").fill_null(pl.Series([[]], dtype=pl.List(pl.UInt32))))


def train(inputs: Any = None, *, out_dir: str | Path | None = None,
          from_counts: str | pl.DataFrame | None = None, force: bool = False,
          **options: Any) -> TrainResult:
    """Train a tokenizer. `inputs`: paths/globs/dirs, a Polars or Arrow table, or an iterator of
    strings; `options`: the CLI options as keyword arguments (see `TrainConfig`;
    `engine="duckdb"` runs every stage in DuckDB and returns the same tables).

    With `out_dir`, the output is checked before any work starts (it may replace only an
    earlier tokcolumnar output or an empty directory, unless `force`; never an input) and
    written atomically at the end (see `outputs`)."""
    cfg = options.pop("config", None)
    if cfg is None:
        cfg = TrainConfig(**options)
    elif options:
        raise TokcolumnarValueError(f"give either config= or options, not both (got config= and "
                                    f"{', '.join(sorted(options))})")
    if from_counts is not None:
        if inputs is not None:
            raise TokcolumnarValueError("give either inputs or from_counts, not both")
        if isinstance(from_counts, pl.DataFrame):
            check_counts_columns(from_counts.schema, "from_counts")
        elif not isinstance(from_counts, (str, os.PathLike)):
            raise TokcolumnarTypeError("from_counts must be the path of a words Parquet file or "
                                       f"a Polars DataFrame, got {type(from_counts).__name__}")
    if out_dir is None:
        return _train(inputs, from_counts, cfg)
    read = [*input_list(inputs), *([from_counts] if isinstance(from_counts, (str, Path)) else [])]
    with output_dir(out_dir, inputs=read, force=force) as tmp:
        result = _train(inputs, from_counts, cfg)
        t = time.perf_counter()
        write_outputs(result, tmp)
        result.timings["export"] = time.perf_counter() - t
    return result


def input_list(inputs: Any) -> list[str]:
    """The input paths as strings ([] for data frames and iterators)."""
    if isinstance(inputs, (str, Path)):
        return [str(inputs)]
    if isinstance(inputs, (list, tuple)):
        return [str(x) for x in inputs]
    return []


def _train(inputs: Any, from_counts: Any, cfg: TrainConfig) -> TrainResult:
    if cfg.engine == "duckdb":
        from .engines.duckdb_engine import train_duckdb

        return train_duckdb(inputs, cfg, from_counts=from_counts)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    normalizer, pretokenizer = pipeline_parts(cfg)
    if from_counts is not None:
        words = from_counts if isinstance(from_counts, pl.DataFrame) else load_counts(
            str(from_counts))
        if "first_seen" not in words.columns:
            words = words.with_row_index("first_seen").select("word", "count", "first_seen")
    elif inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    else:
        words = words_from_inputs(inputs, cfg)
    timings["count"] = time.perf_counter() - t0
    if cfg.model == "wordpiece":
        from .wordpiece_trainer import train_wordpiece

        result = train_wordpiece(words, cfg, normalizer, pretokenizer, timings)
    else:
        t1 = time.perf_counter()
        initial = initial_from_words(words, cfg)
        timings["initial"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        trainer = BpeTrainer(initial, BpeSettings(
            vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
            tie_break=cfg.tie_break, prefix=cfg.continuing_subword_prefix,
            max_token_length=cfg.max_token_length, max_merges=cfg.max_merges,
            show_progress=cfg.show_progress))
        rec = trainer.train()
        del trainer  # its queue and position index are no longer needed
        timings["merge"] = time.perf_counter() - t2
        t3 = time.perf_counter()
        merges = merges_table(rec, initial.vocab.tokens)
        result = TrainResult(cfg, words_table(words, initial), merges,
                             vocab_table(initial, merges), normalizer, pretokenizer, timings)
        timings["tables"] = time.perf_counter() - t3
    result.inputs = input_list(inputs)
    return result
