"""Word counts given to training instead of a corpus (`--from-counts words.parquet`, or
`train(from_counts=frame)`): checked and normalised the same way for both engines."""

from __future__ import annotations

import polars as pl

from ..errors import TokcolumnarError, TokcolumnarValueError
from .counting import sort_words


def check_counts_columns(schema: pl.Schema, source: str) -> None:
    """A words table given to `--from-counts` / `from_counts=` has a string `word` column and an
    integer `count` column."""
    for col in ("word", "count"):
        if col not in schema:
            raise TokcolumnarValueError(f"{source}: no column {col!r} "
                                        f"(columns: {', '.join(schema.names())})")
    if schema["word"] != pl.String:
        raise TokcolumnarValueError(f"{source}: column 'word' must be strings")
    if not schema["count"].is_integer():
        raise TokcolumnarValueError(f"{source}: column 'count' must be integers")


#: The largest weighted number of symbols a words table may hold: every count the merge loops
#: form (a character's, a pair's, a token's) is a sum of word counts over the word's symbols,
#: and some of those sums are taken in float64 (NumPy's weighted `bincount`), exact up to 2^53.
#: Past it a count would be rounded, and past 2^63 wrap (the loops' counts are int64).
MAX_SYMBOL_OCCURRENCES = 1 << 53


def check_count_sums(df: pl.DataFrame, path: str) -> None:
    """Refuse a words table whose counts the loops cannot sum exactly: the occurrences of its
    symbols (each word's characters plus one word boundary, times the word's count; summed in
    128 bits, so the check itself cannot wrap) above `MAX_SYMBOL_OCCURRENCES`. Every sum the
    loops form is at most this one (a word's repeats summed by `normalize_counts` too)."""
    total = df.select((pl.col("count").cast(pl.Int128)
                       * (pl.col("word").str.len_chars().cast(pl.Int128) + 1)).sum()).item()
    if total > MAX_SYMBOL_OCCURRENCES:
        raise TokcolumnarError(
            f"{path}: the counts are too large: the words' characters, each counted as often "
            f"as its word, number {total:,} (with a boundary per word), over the "
            f"{MAX_SYMBOL_OCCURRENCES:,} (2^53) the merge loop counts exactly")


def load_counts(path: str) -> pl.DataFrame:
    """Read a `words` table given to `--from-counts` (see `normalize_counts`)."""
    try:
        df = pl.read_parquet(path)
    except FileNotFoundError:
        raise TokcolumnarError(f"counts file not found: {path}") from None
    except (OSError, pl.exceptions.PolarsError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokcolumnarError(f"cannot read {path} as Parquet: {msg}") from None
    return normalize_counts(df, path)


def normalize_counts(df: pl.DataFrame, path: str) -> pl.DataFrame:
    """A words table as training reads it: `word` strings and integer `count`s (empty words and
    zero counts dropped, repeated words summed), `first_seen` from the column or, without one,
    from the row order; sorted by first_seen."""
    check_counts_columns(df.schema, path)
    df = df.filter(pl.col("word").is_not_null() & (pl.col("word").str.len_bytes() > 0))
    if df.filter(pl.col("count") < 0).height:
        raise TokcolumnarError(f"{path}: negative counts")
    df = df.filter(pl.col("count") > 0)
    if len(df) == 0:
        raise TokcolumnarError(f"{path}: no words with a positive count")
    check_count_sums(df, path)
    if "first_seen" not in df.columns:
        df = df.with_row_index("first_seen")
    df = df.group_by("word").agg(pl.col("count").sum().cast(pl.UInt64),
                                 pl.col("first_seen").min().cast(pl.UInt64))
    return sort_words(df)
