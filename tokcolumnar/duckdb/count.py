"""Stages 2-3 in DuckDB: read the corpus (Parquet through DuckDB's reader, everything else
through the Polars engine's), normalize, pre-tokenize and count words into `tc_words`; or load a
`--from-counts` table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from ..config import TrainConfig
from ..corpus import (
    Source,
    check_parquet_column,
    cut_long_sequences,
    expand_inputs,
    iter_sequences,
    iter_source,
)
from ..errors import TokcolumnarError, word_too_long
from ..pretokenizers import PreTokenizer
from ..training import pipeline_parts
from .duckdb_sql import Scripts, connect, duck_error

# Sequences longer than this many characters are cut where the pre-tokenizer allows (the same
# words): stage 3's memory grows with the number of pieces per row (a 26 MB line of words in
# 1 MB rows: 1.2 GB; in rows of ~1,024 characters: 0.6 GB, as the same words in short lines).
ROW_CHARS = 1024
NORMALIZERS = ("none", "nfc", "nfkc", "nfd", "nfkd", "bert")
PRETOKENIZERS = ("whitespace", "whitespace-split", "subword-nmt", "bert", "byte-level",
                 "metaspace", "digits", "none")


def _check_supported(cfg: TrainConfig) -> None:
    if (cfg.normalizer or "none").lower() not in NORMALIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the normalizers "
                               f"{', '.join(NORMALIZERS)} (got {cfg.normalizer!r})")
    if cfg.pre_tokenizer.lower() not in PRETOKENIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the pre-tokenizers "
                               f"{', '.join(PRETOKENIZERS)} (got {cfg.pre_tokenizer!r})")


def _load_corpus(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stage 2: fill tc_corpus(src, seq, text). Plain Parquet files are read by DuckDB's
    read_parquet (byte-exact; the column is checked first with the Polars engine's messages);
    every other input (text, JSONL, CSV, anything compressed, pipes, standard input, Python
    data) is read by the Polars engine's reader, so both engines see the same sequences and
    refuse the same inputs with the same errors (DuckDB's read_csv / read_json are not exact:
    see 02_read_corpus.sql)."""
    import duckdb

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
    pretokenizer = pipeline_parts(cfg)[1]
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
    return s.fmt == "parquet" and s.compression is None and s.kind == "file"


def _load_through_python(sql: Scripts, s: Source, src: int, cfg: TrainConfig,
                         pretokenizer: PreTokenizer) -> None:
    """Every input but `_duckdb_reads`: read (and decompressed) in Python by the Polars
    engine's reader (tokcolumnar/corpus.py: chunks of whole lines with their line endings, long
    lines cut where the pre-tokenizer allows and bounded by --max-word-chars, or Arrow
    batches of the column) and appended to tc_corpus chunk by chunk. One line per row whatever
    the pre-tokenizer: DuckDB's regexes run faster, in less memory, on lines than on the
    Polars engine's many-line pieces."""
    seq = 0
    cut = pretokenizer.line_cut()
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
    import duckdb

    _check_supported(cfg)
    _load_corpus(sql, inputs, cfg)
    normalizer = (cfg.normalizer or "none").lower()
    pretokenizer = cfg.pre_tokenizer.lower()
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
    n, longest = sql.rows("count_words", "stats")[0]
    if n == 0:
        raise TokcolumnarError("the input contains no words (empty files or empty column?)")
    if cfg.max_word_chars and longest > cfg.max_word_chars:
        raise TokcolumnarError(word_too_long(f"{longest:,}", cfg.max_word_chars))


def count_duckdb(inputs: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The counting stage in DuckDB: the `words` table (word, count u64, first_seen u64),
    sorted by first_seen, identical to the Polars engine's."""
    con = connect()
    try:
        sql = Scripts(con)
        count_into(sql, inputs, cfg)
        return con.sql("SELECT word, count, first_seen FROM tc_words ORDER BY w").pl()
    finally:
        con.close()


def load_counts(sql: Scripts, from_counts: Any) -> pl.DataFrame | None:
    """`--from-counts`: a Parquet path (read by DuckDB, normalised as the Polars engine does) or
    a data frame (used as is). Returns the frame when one was given (the words table keeps it)."""
    import duckdb

    con = sql.con
    if isinstance(from_counts, pl.DataFrame):
        df = from_counts
        if "first_seen" not in df.columns:
            df = df.with_row_index("first_seen").select("word", "count", "first_seen")
        con.register("tc_counts_input",
                     df.select("word", "count", "first_seen").with_row_index("tc_row"))
        sql.run("count_words", "from_frame")
        con.unregister("tc_counts_input")
        return df
    path = str(from_counts)
    if not Path(path).exists():
        raise TokcolumnarError(f"counts file not found: {path}")
    try:
        cur = con.execute("SELECT * FROM read_parquet($p) LIMIT 0", {"p": path})
        cols = {d[0]: str(d[1]).upper() for d in cur.description}
    except duckdb.Error as e:
        raise TokcolumnarError(f"cannot read {path} as Parquet: {duck_error(e)}") from None
    for col in ("word", "count"):
        if col not in cols:
            raise TokcolumnarError(f"{path}: no column {col!r} (columns: {', '.join(cols)})")
    if cols["word"] not in ("VARCHAR", "STRING"):
        raise TokcolumnarError(f"{path}: column 'word' must be strings")
    if not any(t in cols["count"] for t in ("INT", "HUGEINT")):
        raise TokcolumnarError(f"{path}: column 'count' must be integers")
    sql.run("count_words", "counts_file" if "first_seen" in cols else "counts_file_rows",
            path=path)
    if con.execute("SELECT count(*) FROM tc_counts_input WHERE count < 0").fetchone()[0]:
        raise TokcolumnarError(f"{path}: negative counts")
    sql.run("count_words", "from_counts")
    con.execute("DROP TABLE tc_counts_input")
    if not con.execute("SELECT count(*) FROM tc_words").fetchone()[0]:
        raise TokcolumnarError(f"{path}: no words with a positive count")
    return None
