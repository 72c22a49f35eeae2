"""Truncation as HF's `enable_truncation(max_length, stride, direction)` (single sequences):
the model's tokens of a sequence are cut into windows of at most `max_length` minus the special
tokens the post-processor adds (room kept for them, which are added to every window after),
consecutive windows sharing `stride` tokens. The first window is the encoding (the start of the
sequence with `right`, its end with `left`); the others are HF's `overflowing` encodings, in
HF's order (towards the end with `right`, towards the start with `left`).

Windows are computed for a whole batch at once: per row the number of windows, then every list
column sliced with one Arrow `take`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ..errors import TokcolumnarValueError
from . import TRUNCATION_DIRECTIONS as DIRECTIONS


@dataclass(frozen=True)
class Truncation:
    """HF's truncation parameters (strategy: HF's default, longest_first, which for a single
    sequence is just cutting it)."""

    max_length: int
    stride: int = 0
    direction: str = "right"

    def __post_init__(self) -> None:
        for name in ("max_length", "stride"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TokcolumnarValueError(f"truncation: {name} must be an integer, got "
                                            f"{value!r}")
        if self.max_length < 1:
            raise TokcolumnarValueError(f"truncation: max_length must be at least 1, got "
                                        f"{self.max_length}")
        if self.stride < 0:
            raise TokcolumnarValueError(f"truncation: stride must be at least 0, got "
                                        f"{self.stride}")
        if self.direction not in DIRECTIONS:
            raise TokcolumnarValueError(f"truncation: direction must be right or left, got "
                                        f"{self.direction!r}")

    def to_hf(self) -> dict[str, object]:
        """As HF's `Tokenizer.truncation` shows it."""
        return {"max_length": self.max_length, "stride": self.stride,
                "strategy": "longest_first", "direction": self.direction}

    def room(self, n_special: int) -> int:
        """The tokens of the sequence a window holds when the post-processor adds `n_special`
        tokens; refused as HF refuses it, or where HF would silently not truncate (a
        max_length smaller than the special tokens)."""
        room = self.max_length - n_special
        if room < 0:
            raise TokcolumnarValueError(
                f"max_length {self.max_length} is smaller than the {n_special} special tokens "
                "the post-processor adds")
        if self.stride and self.stride >= room:
            raise TokcolumnarValueError(
                f"stride {self.stride} must be less than max_length minus the special tokens "
                f"({self.max_length} - {n_special} = {room})")
        return room


def windows(lengths: np.ndarray, room: int, stride: int, direction: str, overflow: bool
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each window's (row, start, stop) over rows of `lengths` tokens, rows in order and each
    row's windows in HF's order (the first is the encoding, the others its overflowing
    ones); `overflow` False keeps only the first."""
    n = lengths.astype(np.int64)
    step = room - stride
    over = n > room
    if room == 0:  # HF: the encoding becomes empty, the whole sequence overflows
        count = np.where(over, 2, 1)
    else:
        count = np.where(over, 1 + -(-(n - room) // max(step, 1)), 1)
    if not overflow:
        count = np.ones_like(count)
    row = np.repeat(np.arange(len(n), dtype=np.int64), count)
    base = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(count, out=base[1:])
    k = np.arange(len(row), dtype=np.int64) - base[row]
    total = n[row]
    if room == 0:
        start = np.zeros(len(row), dtype=np.int64)
        stop = np.where((k == 0) & over[row], 0, total)
        return row, start, stop
    if direction == "right":
        start = np.where(over[row], k * step, 0)
        stop = np.minimum(start + room, total)
    else:
        stop = np.where(over[row], total - k * step, total)
        start = np.maximum(stop - room, 0)
    return row, start, stop


def take_windows(df: pl.DataFrame, row: np.ndarray, start: np.ndarray, stop: np.ndarray
                 ) -> pl.DataFrame:
    """Every list column of `df` cut to the windows (one output row per window)."""
    import pyarrow as pa  # deferred: training loads the tokenizer (and this module), never encodes

    lengths = stop - start
    out_offsets = np.zeros(len(row) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    columns = {}
    for name in df.columns:
        arr = df.get_column(name).to_arrow()
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        arr = arr.cast(pa.large_list(arr.type.value_type))
        offsets = arr.offsets.to_numpy().astype(np.int64)
        values = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        # each output position = its window's first token in the flat values + its index
        first = offsets[row] - offsets[0] + start
        take = (np.repeat(first - out_offsets[:-1], lengths)
                + np.arange(int(out_offsets[-1]), dtype=np.int64))
        taken = values.take(pa.array(take, type=pa.int64()))
        columns[name] = pl.Series(name, pa.LargeListArray.from_arrays(
            pa.array(out_offsets), taken)).cast(df.schema[name])
    return pl.DataFrame(columns)
