"""Stages 2-3 in DuckDB: read the corpus (Parquet through DuckDB's reader, everything else
through the Polars engine's), normalize, pre-tokenize and count words into `tc_words`; or put a
words table there (`load_words`)."""

from __future__ import annotations

import os
from typing import Any

import duckdb
import polars as pl

from ..config import TrainConfig
from ..corpus.counting import check_words
from ..corpus.line_cuts import line_cut
from ..corpus.readers import (
    Source,
    check_parquet_column,
    cut_long_sequences,
    expand_inputs,
    iter_sequences,
    iter_source,
)
from ..errors import TokcolumnarError
from ..text.pretokenizers import PreTokenizer
from .runner import Scripts, duck_error

# Sequences longer than this many characters are cut where the pre-tokenizer allows (the same
# words): stage 3's memory grows with the number of pieces per row (a 26 MB line of words in
# 1 MB rows: 1.2 GB; in rows of ~1,024 characters: 0.6 GB, as the same words in short lines).
ROW_CHARS = 1024


def _load_corpus(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stage 2: fill tc_corpus(src, seq, text). Plain Parquet files are read by DuckDB's
    read_parquet (byte-exact; the column is checked first with the Polars engine's messages);
    every other input (text, JSONL, CSV, anything compressed, pipes, standard input, Python
    data) is read by the Polars engine's reader, so both engines see the same sequences and
    refuse the same inputs with the same errors (DuckDB's read_csv / read_json are not exact:
    see 02_read_corpus.sql)."""
    sql.run("read_corpus", "create")
    if inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    frame = _as_frame(inputs, cfg.column)
    if frame is not None:
        con = sql.con
        con.register("tc_input_frame", frame)
        con.execute("INSERT INTO tc_corpus SELECT 0, tc_row, text FROM tc_input_frame")
        con.unregister("tc_input_frame")
        return
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    pretokenizer = cfg.text_components()[1]
    for src, s in enumerate(expand_inputs(inputs, cfg.format)):
        if not _duckdb_reads(s):
            _load_through_python(sql, s, src, cfg, pretokenizer)
            continue
        check_parquet_column(s, cfg.column)
        try:
            sql.run("read_corpus", "parquet", path=str(s.path), src=src, column=cfg.column)
        except duckdb.Error as e:
            msg = duck_error(e)
            if "encoding" in msg or "UTF-8" in msg or "UTF8" in msg:
                raise TokcolumnarError(f"{s.label}: invalid UTF-8 in the text column ({msg})"
                                       ) from None
            raise TokcolumnarError(f"cannot read {s.label} as parquet: {msg}") from None


def _duckdb_reads(s: Source) -> bool:
    """Whether DuckDB's own reader takes this input: a plain Parquet file (read_parquet gives
    its strings byte for byte and refuses a corrupt file). DuckDB cannot read the rest as the
    Polars engine does: read_text loads a file whole (no bound on a line, no pipes) and does
    not decompress; read_csv (its only way to decompress text) drops line endings and lone CRs,
    splits at its delimiter, fails on lines over 2 MB, and with strict_mode=false keeps the
    prefix of a truncated file; read_json turns a column mixing strings and numbers into JSON
    text."""
    return s.fmt == "parquet" and s.compression is None and s.kind == "file" and s.uri is None


def _load_through_python(sql: Scripts, s: Source, src: int, cfg: TrainConfig,
                         pretokenizer: PreTokenizer) -> None:
    """Every input but `_duckdb_reads`: read (and decompressed) in Python by the Polars
    engine's reader (tokcolumnar/corpus.py: chunks of whole lines with their line endings, long
    lines cut where the pre-tokenizer allows and bounded by --max-word-chars, or Arrow
    batches of the column) and appended to tc_corpus chunk by chunk. One line per row whatever
    the pre-tokenizer: DuckDB's regexes run faster, in less memory, on lines than on the
    Polars engine's many-line pieces."""
    seq = 0
    cut = line_cut(pretokenizer)
    for texts in iter_source(s, cfg.column, pretokenizer, cfg.max_word_chars, split_lines=True):
        texts = cut_long_sequences(texts, cut, ROW_CHARS)
        frame = pl.DataFrame({"text": texts}).with_row_index("seq", offset=seq)
        seq += frame.height
        sql.con.register("tc_chunk", frame)
        try:
            sql.run("read_corpus", "chunk", src=src)
        finally:
            sql.con.unregister("tc_chunk")


def _as_frame(inputs: Any, column: str) -> pl.DataFrame | None:
    """Python inputs (data frames, Arrow tables, iterables of strings) as a frame
    (tc_row, text), read as the Polars engine reads them; None for paths."""
    if isinstance(inputs, (str, os.PathLike)):
        return None
    if isinstance(inputs, (list, tuple)) and all(isinstance(x, (str, os.PathLike))
                                                 for x in inputs):
        return None
    texts = pl.concat([pl.Series("text", [], dtype=pl.String),
                       *iter_sequences(inputs, column=column)])
    return texts.to_frame().with_row_index("tc_row")


def _normalize(sql: Scripts, normalizer: str, lowercase: bool) -> None:
    """Run the normalization steps of stage 3 for `normalizer` (see 03_count_words.sql):
    tc_corpus -> tc_norm."""
    sql.run("count_words", "norm_start", exact=normalizer in ("nfc", "nfkc"))

    def decompose(form: str, rows: str) -> None:
        sql.run("count_words", "norm_decompose", form=form, rows=rows)

    if normalizer == "bert":
        sql.run("count_words", "norm_bert_clean", clean=True, chinese=True)
        if lowercase:  # BertNormalizer strips accents when it lowercases (strip_accents=None)
            decompose("nfd", "all")
            sql.run("count_words", "norm_reorder", rows="all")
            sql.run("count_words", "norm_strip_accents")
    elif normalizer in ("nfd", "nfkd"):
        decompose(normalizer, "all")
        sql.run("count_words", "norm_reorder", rows="all")
    else:  # nfc, nfkc
        decompose("nfd" if normalizer == "nfc" else "nfkd", "rare")
        sql.run("count_words", "norm_reorder", rows="rare")
        sql.run("count_words", "norm_compose_rare")
        if normalizer == "nfkc":
            decompose("compat", "common")
        sql.run("count_words", "norm_compose_common")


def count_into(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stages 2-3: tc_words from the inputs."""
    _load_corpus(sql, inputs, cfg)
    normalizer = cfg.normalizer
    pretokenizer = cfg.pre_tokenizer
    lowercase = bool(cfg.lowercase)
    try:
        if normalizer == "none":
            sql.run("count_words", "tokenize", lowercase=lowercase, pretokenizer=pretokenizer)
        else:
            _normalize(sql, normalizer, lowercase)
            sql.run("count_words", "tokenize_norm", lowercase=lowercase,
                    pretokenizer=pretokenizer)
        sql.run("count_words", "count")
        if pretokenizer == "byte-level":
            sql.run("count_words", "byte_level_words")
    except duckdb.Error as e:
        raise TokcolumnarError(f"counting words failed: {duck_error(e)}") from None
    _check_words(sql, cfg)


def _check_words(sql: Scripts, cfg: TrainConfig) -> None:
    n_words, longest = sql.rows("count_words", "stats")[0]
    check_words(n_words, longest, cfg.max_word_chars)


def counted_words(sql: Scripts) -> pl.DataFrame:
    """The `words` table (word, count u64, first_seen u64) in first-seen order."""
    return sql.con.sql("SELECT word, count, first_seen FROM tc_words ORDER BY w").pl()


def load_words(sql: Scripts, words: pl.DataFrame) -> None:
    """Put a words table (word, count, first_seen; in first-seen order) into tc_words."""
    sql.con.register("tc_counts_input", words.select("word", "count", "first_seen")
                     .with_row_index("tc_row"))
    try:
        sql.run("count_words", "from_frame")
    finally:
        sql.con.unregister("tc_counts_input")
