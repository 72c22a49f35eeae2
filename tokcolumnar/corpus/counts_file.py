"""Word counts given to training instead of a corpus (`--from-counts words.parquet`, or
`train(from_counts=frame)`): checked and normalised the same way for both engines."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import TokcolumnarError, TokcolumnarValueError, warn
from .counting import sort_words

if TYPE_CHECKING:  # the settings a table is counted with (config imports the corpus package)
    from ..config import TrainConfig

#: The key, in a words table's Parquet metadata, of the settings its words were counted with.
COUNTED_WITH = "tokcolumnar.counted_with"
#: The settings that shape a word: the normalizer (and lowercasing) the text goes through and
#: the pre-tokenizer or segmenter that cuts it (`TrainConfig.text_components`). The others
#: either only refuse input (--max-word-chars) or choose what is read (--format, --column).
WORD_SETTINGS = ("normalizer", "lowercase", "pre_tokenizer", "cjk_split")


def counting_settings(cfg: TrainConfig) -> dict[str, Any]:
    """The settings of `cfg` that shape the words a count makes."""
    return {name: getattr(cfg, name) for name in WORD_SETTINGS}


def counts_metadata(cfg: TrainConfig) -> dict[str, str]:
    """The Parquet metadata recording how a words table was counted (`check_counted_with`)."""
    return {COUNTED_WITH: json.dumps(counting_settings(cfg), sort_keys=True)}


def _shown(settings: dict[str, Any], names: list[str]) -> str:
    """Settings as command-line options (for messages)."""
    out = []
    for name in names:
        value, option = settings.get(name), "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(option if value else f"--no-{name.replace('_', '-')}")
        else:
            out.append(f"no {option}" if value is None else f"{option} {value}")
    return " ".join(out)


def check_counted_with(path: str, cfg: TrainConfig) -> bool:
    """Refuse a words table counted with settings that shape words differently from this
    run's (naming both): its words would not be the words this run's tokenizer sees (a
    whitespace count trained as byte-level BPE has no `Ġ` merge). Returns whether the table
    records them: one that does not (an older tokcolumnar, another program) is taken as
    counted with the run's (`load_counts` then says so)."""
    try:
        meta = pl.read_parquet_metadata(path)
    except (OSError, pl.exceptions.PolarsError):
        return True  # not a readable Parquet file: `load_counts` says what is wrong
    recorded = meta.get(COUNTED_WITH)
    if recorded is None:
        return False
    try:
        table = json.loads(recorded)
        if not isinstance(table, dict):
            raise ValueError(recorded)
    except ValueError:
        raise TokcolumnarError(f"{path}: its metadata {COUNTED_WITH!r} is not the settings "
                               "tokcolumnar writes there") from None
    run = counting_settings(cfg)
    differ = [name for name in WORD_SETTINGS if table.get(name) != run[name]]
    if differ:
        raise TokcolumnarError(
            f"{path} was counted with {_shown(table, differ)}, but this run has "
            f"{_shown(run, differ)}: its words are not the words this run's tokenizer sees; "
            "count again with this run's settings, or train with the table's")
    return True


#: The columns of a words table that training reads (`first_seen` optional).
COUNTS_COLUMNS = ("word", "count", "first_seen")


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


def load_counts(path: str, cfg: TrainConfig | None = None,
                notes: list[str] | None = None) -> pl.DataFrame:
    """Read a `words` table given to `--from-counts` (see `normalize_counts`); with `cfg`, the
    settings it was counted with are checked against the run's first (`check_counted_with`).
    The note for a table that does not record them goes into `notes` (said by the run once it
    succeeds: a refused run has one line), or is warned at once."""
    recorded = check_counted_with(path, cfg) if cfg is not None else True
    try:
        # the columns training reads: a words.parquet's tokens and ids would take several
        # times the table to load (without `word` or `count` all are read, and named by
        # `normalize_counts`'s refusal)
        names = pl.read_parquet_schema(path)
        df = pl.read_parquet(path, columns=[c for c in COUNTS_COLUMNS if c in names]
                             if "word" in names and "count" in names else None)
    except FileNotFoundError:
        raise TokcolumnarError(f"counts file not found: {path}") from None
    except (OSError, pl.exceptions.PolarsError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TokcolumnarError(f"cannot read {path} as Parquet: {msg}") from None
    words = normalize_counts(df, path)
    if not recorded:
        run = counting_settings(cfg)
        note = (f"{path} does not record how its words were counted (written by another "
                f"program or an older tokcolumnar): taken as counted with this run's "
                f"{_shown(run, [n for n in WORD_SETTINGS if run[n] is not None])}")
        if notes is None:
            warn(note)
        else:
            notes.append(note)
    return words


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
