"""Stages 2-3 in DuckDB: read the corpus through DuckDB's readers (or Python data), normalize,
pre-tokenize and count words into `tc_words`; or load a `--from-counts` table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl

from ..config import TrainConfig
from ..errors import TokcolumnarError
from .duckdb_sql import Scripts, connect, duck_error

NORMALIZERS = ("none", "nfc", "nfkc", "nfd", "nfkd", "bert")
PRETOKENIZERS = ("whitespace", "whitespace-split", "subword-nmt", "bert", "byte-level",
                 "metaspace", "digits", "none")
# Pre-tokenizers whose words do not depend on line endings (they drop whitespace).
LINE_INSENSITIVE = ("whitespace", "whitespace-split", "subword-nmt", "bert")


def _check_supported(cfg: TrainConfig) -> None:
    if (cfg.normalizer or "none").lower() not in NORMALIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the normalizers "
                               f"{', '.join(NORMALIZERS)} (got {cfg.normalizer!r})")
    if cfg.pre_tokenizer.lower() not in PRETOKENIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the pre-tokenizers "
                               f"{', '.join(PRETOKENIZERS)} (got {cfg.pre_tokenizer!r})")


def _load_corpus(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stage 2: fill tc_corpus(src, seq, text) from files (DuckDB readers) or Python data."""
    import duckdb

    con = sql.con
    sql.run("read_corpus", "create")
    if inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    frame = _as_frame(inputs, cfg.column)
    if frame is not None:
        con.register("tc_input_frame", frame)
        con.execute("INSERT INTO tc_corpus SELECT 0, tc_row, text FROM tc_input_frame")
        con.unregister("tc_input_frame")
        return
    from ..corpus import expand_inputs

    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for src, s in enumerate(expand_inputs(inputs, cfg.format)):
        path = str(s.path)
        try:
            if _python_reader_needed(s, cfg):
                _load_through_python(sql, s, src, cfg)
            elif s.fmt == "text":
                if s.compression is None:
                    sql.run("read_corpus", "text", path=path, src=src)
                else:
                    sql.run("read_corpus", "text_compressed", path=path, src=src,
                            compression=s.compression)
            else:
                delim = "\t" if ".tsv" in s.path.name else ","
                extra = {"compression": s.compression or "none"}
                if s.fmt == "csv":
                    extra["delim"] = delim
                cur = sql.run("read_corpus", f"peek_{s.fmt}", path=path, **extra)
                cols = {d[0]: d[1] for d in cur.description}
                if cfg.column not in cols:
                    raise TokcolumnarError(
                        f"{path}: no column {cfg.column!r} (columns: "
                        f"{', '.join(cols) or 'none'}); choose one with --column")
                ctype = str(cols[cfg.column]).upper()
                if ctype not in ("VARCHAR", "STRING", '"NULL"', "NULL", "JSON"):
                    raise TokcolumnarError(f"{path}: text column has type {ctype}, expected "
                                           "strings")
                sql.run("read_corpus", s.fmt, path=path, src=src, column=cfg.column, **extra)
        except duckdb.Error as e:
            msg = duck_error(e)
            if "UTF-8" in msg or "utf-8" in msg or "Unicode" in msg:
                raise TokcolumnarError(f"{path}: invalid UTF-8 ({msg})") from None
            raise TokcolumnarError(f"cannot read {path} as {s.fmt}: {msg}") from None


def _python_reader_needed(s: Any, cfg: TrainConfig) -> bool:
    """Inputs DuckDB cannot read as the Polars engine does: bz2 files (no bz2 codec in
    DuckDB), compressed Parquet files (DuckDB reads Parquet only from a plain file), and
    gzip / zstd text with a pre-tokenizer that sees line endings (DuckDB decompresses text only
    through read_csv, which drops them; read_text does not decompress)."""
    if s.compression == "bz2" or (s.fmt == "parquet" and s.compression):
        return True
    return (s.fmt == "text" and s.compression is not None
            and cfg.pre_tokenizer.lower() not in LINE_INSENSITIVE)


def _load_through_python(sql: Scripts, s: Any, src: int, cfg: TrainConfig) -> None:
    """The fallback for `_python_reader_needed`: the file is decompressed and read in Python by
    the Polars engine's reader (tokcolumnar/corpus.py: chunks of whole lines with their line
    endings, or Arrow batches of the column) and appended to tc_corpus chunk by chunk."""
    from ..corpus import iter_sequences

    seq = 0
    for texts in iter_sequences([s.path], s.fmt, cfg.column):
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
    from ..corpus import iter_sequences

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
        raise TokcolumnarError(
            f"a pre-token of {longest:,} characters exceeds --max-word-chars "
            f"{cfg.max_word_chars:,} (a huge line without separators?); split the input, choose "
            "another pre-tokenizer, or raise the limit")


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
