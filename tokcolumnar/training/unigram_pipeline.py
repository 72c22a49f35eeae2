"""`--model unigram` in the training pipeline: the input lines -> SentencePiece's sentences ->
the Unigram trainer (`training.unigram`) -> the result tables.

Unigram trains on sentences, not on counted words: its seeds are substrings of whole lines
(docs/unigram.md, 2), so this path reads the lines itself instead of the count stage (no
spilled count, no `--from-counts`, no resume; the trainer's memory is that of the distinct
words' lattices). With `--extend` (a Unigram base), the new corpus's own model gives the pieces
appended to the base's (`training.extend_unigram`). A line is a sequence without its `\\n`
(SentencePiece reads lines with `std::getline`), normalized by `--normalizer`, then by
SentencePiece's whitespace handling."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl

from ..config import TrainConfig
from ..corpus.readers import iter_sequences
from ..errors import TokcolumnarError, TokcolumnarValueError
from ..malloc import release_free_heap, unigram_heap
from ..models.unigram import UnigramModel
from ..progress import StageTimer
from ..text.normalizers import for_characters
from ..unigram_export import byte_pieces
from .extend_unigram import extended_vocab, read_unigram_base
from .passes import side_thread
from .tables import TrainTables, words_table
from .unigram import (
    META_PIECES,
    UnigramError,
    UnigramOptions,
    UnigramResult,
    char_totals,
    load_sentences,
    sentencepiece_whitespace,
    train_unigram,
    word_tokens,
)
from .unigram_log import UnigramTrace

META = META_PIECES  # SentencePiece's meta pieces: ids 0, 1, 2


def byte_fallback(cfg: TrainConfig) -> bool:
    """`--byte-fallback` when the settings have it (the 256 byte pieces after the meta pieces,
    docs/unigram.md)."""
    return bool(getattr(cfg, "byte_fallback", False))


def unigram_options(cfg: TrainConfig) -> UnigramOptions:
    return UnigramOptions(vocab_size=cfg.vocab_size,
                          max_sentencepiece_length=cfg.max_token_length or 16,
                          meta_pieces=len(META) + (256 if byte_fallback(cfg) else 0))


def read_lines(inputs: Any, cfg: TrainConfig) -> pl.Series:
    """Every input line without its line feed, in order, as one chunk: Polars'
    `str.replace_many` (the `nmt_nfkc` char map) builds its automaton of 225,276 sources once
    per chunk (~0.45 CPU-s each; 2.8 CPU-s of loading 5 MB in 6 chunks, 0.7 in one)."""
    parts = [chunk.str.strip_suffix("\n") for chunk in
             iter_sequences(inputs, fmt=cfg.format, column=cfg.column)]
    return pl.concat(parts, rechunk=True) if parts else pl.Series("line", [], dtype=pl.String)


#: From this many characters, the words' final segmentation runs in two halves on two threads.
HALVES_MIN_CHARS = 1_000_000


def tokenize_in_halves(model: UnigramModel, words: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """`model.tokenize_flat(words)`: the ids of every word end to end and each word's offset
    into them, the words cut in two halves of as many characters, the second segmented on the
    side thread (NumPy releases the GIL in the lattices' large steps; each half's lattices are
    half the whole's, so the memory stays that of one)."""
    chars = np.cumsum(words.str.len_chars().to_numpy())
    if not len(chars) or chars[-1] < HALVES_MIN_CHARS:
        return model.tokenize_flat(words)
    cut = int(np.searchsorted(chars, chars[-1] // 2)) + 1  # the first half's words
    model.prepare()  # (the vocabulary's trie, before two threads read it)
    second = side_thread().submit(model.tokenize_flat, words.slice(cut))
    ids, offsets = model.tokenize_flat(words.slice(0, cut))
    more_ids, more_offsets = second.result()
    return np.r_[ids, more_ids], np.r_[offsets[:-1], more_offsets + offsets[-1]]


def unigram_tables(inputs: Any, from_counts: Any, cfg: TrainConfig, timer: StageTimer,
                   trace: UnigramTrace | None = None) -> tuple[TrainTables, UnigramResult]:
    """The result tables of a Unigram run (`vocab` with each piece's score; `merges` empty;
    `words` with each distinct word's final segmentation) and the trainer's result (its
    `rounds` and `pruned` tables); `trace` is filled with every EM iteration and pruning round
    (`unigram_log.UnigramTrace`). Large blocks come from the heap meanwhile
    (`malloc.unigram_heap`)."""
    with unigram_heap():
        return _unigram_tables(inputs, from_counts, cfg, timer, trace)


def _unigram_tables(inputs: Any, from_counts: Any, cfg: TrainConfig, timer: StageTimer,
                    trace: UnigramTrace | None) -> tuple[TrainTables, UnigramResult]:
    if from_counts is not None:
        raise TokcolumnarValueError("--model unigram trains on sentences: --from-counts (a words "
                                    "table) cannot give its seeds")
    normalizer, _ = cfg.text_components()

    with timer.stage("count"):
        lines = read_lines(inputs, cfg)
        # a char map's sources that start with no character of the text are left out
        rule = for_characters(normalizer, {chr(c) for c in
                                           char_totals(lines.drop_nulls())[0].tolist()})

        def normalize(col: pl.Expr) -> pl.Expr:
            return sentencepiece_whitespace(rule.expr(col) if rule else col)

        meta = list(META) + (byte_pieces() if byte_fallback(cfg) else [])
        sentences = load_sentences(lines, normalize=normalize, meta_pieces=meta)
        del lines  # (the text before normalizing: not needed by training)
    if len(sentences) == 0:
        raise TokcolumnarError("no text to train on (every line is empty once normalized)")
    base = read_unigram_base(cfg.extend) if cfg.extend is not None else None
    with timer.stage("merge"):
        options = unigram_options(cfg)
        if base is not None:  # the new corpus's own model, whose new pieces are appended
            options = dataclasses.replace(options, hard_vocab_limit=False)
        try:
            result = train_unigram(sentences, None, options, trace)
        except UnigramError as e:
            raise TokcolumnarValueError(str(e)) from None
        release_free_heap()  # the lattices' pages, before the tables' word tokens
    with timer.stage("tables"):
        if base is not None:
            assert cfg.extend is not None
            vocab = extended_vocab(base, result, cfg.vocab_size, cfg.extend)
        else:
            bytes_ = byte_pieces() if byte_fallback(cfg) else []
            names = list(META) + bytes_ + result.pieces
            head = len(META) + len(bytes_)
            vocab = pl.DataFrame({
                "id": pl.Series(np.arange(len(names)), dtype=pl.UInt32),
                "token": pl.Series(names, dtype=pl.String),
                "kind": pl.Series(["special"] * len(META) + ["byte"] * len(bytes_)
                                  + ["piece"] * len(result.pieces), dtype=pl.String),
                "score": pl.Series(np.r_[np.zeros(head), result.scores.astype(np.float64)],
                                   dtype=pl.Float64)})
        pieces = vocab.get_column("token").to_list()
        scores = vocab.get_column("score").to_numpy()
        tokens = word_tokens(sentences, np.ones(len(sentences), np.int64))
        words = (tokens.with_row_index("first_seen")
                 .group_by("word").agg(pl.col("count").sum(), pl.col("first_seen").min())
                 .sort("first_seen")
                 .with_columns(pl.col("count").cast(pl.UInt64),
                               pl.col("first_seen").cast(pl.UInt64)))
        del tokens  # (a row per word of the corpus: not kept through the Viterbi below)
        model = UnigramModel([(p, float(s)) for p, s in zip(pieces, scores)], unk_id=0,
                             byte_fallback=bool((vocab.get_column("kind") == "byte").any()))
        ids, offsets = tokenize_in_halves(model, words["word"])
        words = words_table(words, offsets, ids, pieces)
        merges = pl.DataFrame(schema={"rank": pl.UInt32, "left": pl.String, "right": pl.String,
                                      "token": pl.String, "left_id": pl.UInt32,
                                      "right_id": pl.UInt32, "id": pl.UInt32,
                                      "count": pl.UInt64, "score": pl.Float64,
                                      "words": pl.UInt64})
    return TrainTables(words, merges, vocab), result
