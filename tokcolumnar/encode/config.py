"""Encoding settings: one dataclass holding every `encode` option and every check of them (types,
ranges, the options that go together), as `config.TrainConfig` is for training. The CLI and the
Python API (`encode_files(..., config=EncodeConfig(...))` or its keyword options) both build one,
so an option is refused the same way wherever it comes from.

The checks that need the tokenizer or the input (room for the special tokens with
--max-length, offsets the components support, the columns of `--keep-columns all`) run where
those are known, in `encode.dataset`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TokcolumnarError
from ..sizes import parse_size
from . import DEFAULT_COLUMNS, MAX_LINE_BYTES, OUTPUT_COLUMNS, OVERFLOW_COLUMN, PACK_COLUMNS
from .truncation import Truncation


@dataclass
class EncodeConfig:
    """Every encode option (names follow the CLI flags with `-` -> `_`; `fmt` is --format,
    `pack_separator_token` --pack-separator, `keep_text=False` --drop-text,
    `add_special_tokens=False` --no-special-tokens; None = not given). Resolved on creation:
    `columns` the output columns (with word_ids), `keep_columns` None, "all" or the input
    columns to keep beside the text column; with `pack`, no text and no special tokens."""

    fmt: str | None = None
    column: str = "text"
    keep_newlines: bool = False
    columns: list[str] | None = None
    word_ids: bool = False
    keep_text: bool = True
    add_special_tokens: bool = True
    max_line_bytes: int = MAX_LINE_BYTES
    rows_per_file: int | None = None
    keep_columns: list[str] | str | None = None
    pack: int | None = None
    pack_separator_token: str | None = None
    pack_drop_last: bool = False
    max_file_size: int | str | None = None
    stats: bool = False
    max_length: int | None = None
    truncation: str | None = None  # None: right
    stride: int | None = None
    timings: bool = False  # the CLI prints each stage's wall time
    engine: str = "polars"  # ray, spark: encode on Ray or Spark (the default columns only)
    # resolved: --max-file-size in bytes, and the truncation (--max-length) as the tokenizer
    # takes it
    max_bytes: int | None = field(default=None, init=False, repr=False)
    truncate: Truncation | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_line_bytes < 1:
            raise TokcolumnarError(f"--max-line-bytes must be at least 1, got "
                                   f"{self.max_line_bytes}")
        if self.word_ids and "word_ids" not in (self.columns or ()):
            self.columns = [*(self.columns or DEFAULT_COLUMNS), "word_ids"]
        if self.engine != "polars":
            self._check_engine()
            return
        if self.max_length is None and (self.truncation is not None or self.stride is not None):
            raise TokcolumnarError(f"{'--truncation' if self.truncation else '--stride'} needs "
                                   "--max-length")
        if self.rows_per_file is not None and self.rows_per_file < 1:
            raise TokcolumnarError(f"--rows-per-file must be at least 1, got "
                                   f"{self.rows_per_file}")
        if self.max_file_size is not None:
            if self.rows_per_file is not None:
                raise TokcolumnarError("give either --rows-per-file or --max-file-size, not "
                                       "both")
            self.max_bytes = parse_size(self.max_file_size, "--max-file-size")
        if self.max_length is not None and self.pack is not None:
            raise TokcolumnarError("--max-length does not go with --pack (blocks are cut at "
                                   "--pack N ids)")
        self.truncate = (None if self.max_length is None
                         else Truncation(self.max_length, self.stride or 0,
                                         self.truncation or "right"))
        self.columns = list(self.columns or DEFAULT_COLUMNS)
        keep = _keep_list(self.keep_columns, self.column)
        if self.pack is None:
            given = [flag for flag, on in (("--pack-separator",
                                            self.pack_separator_token is not None),
                                           ("--pack-drop-last", self.pack_drop_last)) if on]
            if given:
                raise TokcolumnarError(f"{given[0]} goes with --pack N")
        else:
            check_pack(self.pack, self.columns, keep)
            self.keep_text, self.add_special_tokens = False, False
        if keep is not None and self.column in keep:  # the text column is the one
            if not self.keep_text:  # --drop-text drops
                raise TokcolumnarError(f"--keep-columns names the text column {self.column!r} "
                                       "and --drop-text drops it: choose one")
            keep = [k for k in keep if k != self.column]
        self.keep_columns = keep
        check_columns(self.columns, self.column, self.keep_text,
                      keep if isinstance(keep, list) else [])

    def _check_engine(self) -> None:
        """Ray and Spark encode the default columns of whole texts: the other options are
        refused there."""
        given = [flag for flag, on in (
            ("--columns/--word-ids", self.columns is not None),
            ("--drop-text", not self.keep_text),
            ("--no-special-tokens", not self.add_special_tokens),
            ("--rows-per-file", self.rows_per_file is not None),
            ("--timings", self.timings),
            ("--max-length", self.max_length is not None),
            ("--stride", self.stride is not None),
            ("--keep-columns", self.keep_columns is not None),
            ("--pack", self.pack is not None),
            ("--max-file-size", self.max_file_size is not None),
            ("--stats", self.stats)) if on]
        if given:
            raise TokcolumnarError(f"{given[0]} is not available with --engine {self.engine}")

    @property
    def split(self) -> bool:
        """The output is a directory of parts (--rows-per-file or --max-file-size)."""
        return self.rows_per_file is not None or self.max_file_size is not None


def check_columns(columns: list[str], text_column: str, keep_text: bool,
                  kept: list[str] | tuple[str, ...] = ()) -> None:
    """The output columns must be known, given once, and not named like the text column or
    the other input columns (`kept`, --keep-columns) they would be written beside (never
    overwrite an input column silently)."""
    for name in columns:
        if name not in OUTPUT_COLUMNS:
            raise TokcolumnarError(f"unknown output column {name!r} (choose from "
                                   f"{', '.join(OUTPUT_COLUMNS)})")
    if len(set(columns)) != len(columns) or not columns:
        raise TokcolumnarError(f"--columns: give each column once, at least one "
                               f"(got {','.join(columns)!r})")
    if "ids" not in columns:
        raise TokcolumnarError("--columns must include ids")
    if keep_text and text_column in (*columns, OVERFLOW_COLUMN):
        raise TokcolumnarError(f"the input column {text_column!r} has the name of an output "
                               f"column: it would be overwritten (use --drop-text, or rename it)")
    clash = [name for name in kept if name in columns]
    if clash:
        raise TokcolumnarError(f"the input column {clash[0]!r} (--keep-columns) has the name of "
                               "an output column: it would be overwritten (do not keep it, or "
                               "rename it)")


def _keep_list(keep_columns: list[str] | str | None, column: str) -> list[str] | str | None:
    """--keep-columns as given: None, "all", or names (each once, none empty)."""
    if keep_columns is None or keep_columns == "all":
        return keep_columns
    if isinstance(keep_columns, str):
        keep_columns = keep_columns.split(",")
    names = list(keep_columns)
    if not names or any(not n for n in names) or len(set(names)) != len(names):
        raise TokcolumnarError(f"--keep-columns: give input column names, each once, or all "
                               f"(got {','.join(names)!r})")
    if "all" in names and len(names) > 1:
        raise TokcolumnarError("--keep-columns all keeps every column: give it alone")
    return "all" if names == ["all"] else names


def check_pack(pack: int, columns: list[str], keep: list[str] | str | None) -> None:
    """--pack N writes blocks of ids, not documents: what belongs to a document is refused."""
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        raise TokcolumnarError(f"--pack must be a whole number of ids, at least 1, got {pack!r}")
    other = [c for c in columns if c not in PACK_COLUMNS]
    if other:
        raise TokcolumnarError(f"--pack writes blocks of ids: the per-document column "
                               f"{other[0]!r} is not available (columns: "
                               f"{', '.join(PACK_COLUMNS)})")
    if keep:
        raise TokcolumnarError("--pack writes blocks of ids: input columns cannot be kept beside "
                               "them (--keep-columns)")
