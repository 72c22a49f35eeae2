"""Arrow and NumPy buffer helpers shared by training, encoding, decoding and post-processing:
Series from Arrow arrays without `pyarrow.compute`, list columns from flat values and offsets,
a list column's offsets and values as NumPy views, and runs (`np.repeat` and gathers of runs)
computed with operations that release the GIL.

List columns are built two ways, on purpose: `lists_from_offsets` wraps the buffers in one
Arrow `LargeListArray` (zero-copy, 2-3x faster; encode, where pyarrow is loaded anyway), and
`lists_at` builds them with Polars alone (`list.slice`s), so that a training run never loads
pyarrow (~0.2 CPU-s and ~35 MiB of start-up it has no other use for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    import pyarrow as pa


class _ArrowArrayCapsule:
    """An Arrow array offered only through the Arrow PyCapsule interface."""

    def __init__(self, array: pa.Array):
        self.array = array

    def __arrow_c_array__(self, requested_schema: object | None = None) -> object:
        return self.array.__arrow_c_array__(requested_schema)


def series_from_arrow(name: str, array: pa.Array) -> pl.Series:
    """`pl.Series(name, array)` for a pyarrow Array, imported through the Arrow PyCapsule
    interface: Polars' pyarrow path imports `pyarrow.compute` first (to recast dictionary
    arrays), 0.1-0.2 s of every `encode` run's start-up that nothing else needed."""
    return pl.Series(name, _ArrowArrayCapsule(array)).alias(name)


def lists_from_offsets(name: str, offsets: np.ndarray, values: pl.Series) -> pl.Series:
    """List `i` is `values[offsets[i]:offsets[i+1]]` (int64 offsets from 0)."""
    import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

    # NumPy reaches Arrow through Polars: pa.array(ndarray) would import pandas (~0.2 CPU-s)
    arr = pa.LargeListArray.from_arrays(pl.Series(offsets).to_arrow(), values.to_arrow())
    return series_from_arrow(name, arr)


def lists_from_flat(n_rows: int, row: np.ndarray, values: pl.Series) -> pl.Series:
    """Group flat values (sorted by row) into one list per row, empty lists for absent rows."""
    lengths = np.bincount(row, minlength=n_rows)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return lists_from_offsets(values.name, offsets, values)


def list_parts(ids: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A list[u32] Series as (offsets int64 of len n+1, flat u32 values)."""
    import pyarrow as pa  # deferred: training builds models and tokenizers, never encodes

    # cast by Polars (pyarrow's `cast` imports pyarrow.compute, see `series_from_arrow`)
    if ids.dtype != pl.List(pl.UInt32):
        ids = ids.cast(pl.List(pl.UInt32))
    arr = ids.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    offsets = arrow_values(arr.offsets, np.int64)
    values = arrow_values(arr.values, np.uint32)
    return offsets - offsets[0], values[offsets[0]:offsets[-1]]


def string_parts(strings: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A String or Binary Series as (offsets int64 from 0, its bytes as uint8; a null is
    empty): NumPy views of the Arrow buffers, no Python object per value."""
    import pyarrow as pa  # deferred: training never needs the Arrow buffers of strings

    arr = strings.fill_null(b"" if strings.dtype == pl.Binary else "").to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    wanted = pa.large_binary() if strings.dtype == pl.Binary else pa.large_string()
    if arr.type != wanted:  # (Polars gives these: no pyarrow cast, no pyarrow.compute)
        arr = arr.cast(wanted)
    # the array's offsets (from its own offset on) and the bytes they cover
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[
        arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2] or b"", dtype=np.uint8)[offsets[0]:offsets[-1]]
    return offsets - offsets[0], data


def strings_from_parts(name: str, offsets: np.ndarray, data: np.ndarray,
                       binary: bool = False) -> pl.Series:
    """The runs `data[offsets[i]:offsets[i+1]]` (offsets int64 from 0) as a String Series
    (valid UTF-8 runs), or Binary with `binary`: Arrow buffers over the NumPy arrays, which
    Polars copies once into its own layout."""
    import pyarrow as pa  # deferred: training never needs the Arrow buffers of strings

    return series_from_arrow(name, pa.Array.from_buffers(
        pa.large_binary() if binary else pa.large_string(), len(offsets) - 1,
        [None, pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int64)),
         pa.py_buffer(np.ascontiguousarray(data))]))


def utf8_chars(data: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The characters of valid UTF-8 bytes: each one's code point and first byte (int64, with
    `len(data)` appended). All ASCII: the bytes themselves (uint8) and None (each character
    is its byte: no 8 bytes per character of positions); else uint32 code points from
    CPython's codecs (~1-2 ms per MiB, ~10x NumPy's bit twiddling over the bytes)."""
    if not len(data) or data.max() < 0x80:
        return data, None
    code = np.frombuffer(data.tobytes().decode("utf-8").encode("utf-32-le"), dtype=np.uint32)
    # a character starts at every byte but a continuation byte (10xxxxxx: -128..-65 as int8)
    return code, np.append(np.flatnonzero(data.view(np.int8) >= -64), len(data))


def compacted(strings: pl.Series) -> pl.Series:
    """A String or Binary Series holding only its own bytes. A Series gathered from another
    keeps that one's buffers alive (Polars' string views point into them): a cache that kept
    a few words of each batch would pin every batch's text (medium/en.txt through the word
    cache: +70 MiB peak). Through Arrow's layout, which copies the values."""
    return series_from_arrow(strings.name, strings.to_arrow())


def arrow_values(arr: pa.Array, dtype: type) -> np.ndarray:
    """The values of a null-free fixed-width Arrow array as a NumPy view (Arrow's `to_numpy`
    imports pandas, ~0.2 CPU-s and 40 MiB, which an encoding run does not otherwise need)."""
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset:arr.offset + len(arr)]


def repeat_runs(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`np.repeat(values, lengths)` (integer values, lengths >= 0) with operations that release
    the GIL: `np.repeat` holds it throughout, which serialises the batches encoded in parallel
    threads. Each run's step from the previous value is placed at its start and summed up
    (integer wrap-around cancels out); as fast as `np.repeat` on one thread."""
    nonempty = lengths > 0
    if not nonempty.all():
        values, lengths = values[nonempty], lengths[nonempty]
    out = np.zeros(int(lengths.sum()), dtype=values.dtype)
    if not len(out):
        return out
    out[np.cumsum(lengths[:-1])] = np.diff(values)
    out[0] = values[0]
    return np.cumsum(out, out=out)


def run_index(lengths: np.ndarray) -> np.ndarray:
    """The run of each position of consecutive runs of `lengths` (int64):
    `np.repeat(np.arange(len(lengths)), lengths)` without holding the GIL."""
    return repeat_runs(np.arange(len(lengths), dtype=np.int64), lengths)


def gather_runs(offsets: np.ndarray, values: np.ndarray, index: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the runs `values[offsets[i]:offsets[i+1]]` for i in `index`: returns the
    run lengths and the flat values (one NumPy gather, no loop)."""
    starts = offsets[index]
    lengths = offsets[index + 1] - starts
    total = int(lengths.sum())
    # each output position = its run's start + its index within the run
    out_start = np.zeros(len(index), dtype=np.int64)
    np.cumsum(lengths[:-1], out=out_start[1:])
    shift = repeat_runs(starts - out_start, lengths)
    shift += np.arange(total, dtype=np.int64)
    return lengths, values[shift]


def gather_table(offsets: np.ndarray, values: np.ndarray, entry: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The runs of `entry` as a table of their own: (offsets, values)."""
    lengths, flat = gather_runs(offsets, values, entry)
    out = np.zeros(len(entry) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out, flat


#: words per slice of `lists_at`: bounds its temporary offsets (8 bytes per word)
LIST_SLICE_WORDS = 1 << 20


def lists_at(values: pl.Series, offsets: np.ndarray) -> pl.Series:
    """The list Series whose row i is `values[offsets[i]:offsets[i + 1]]`: each slice of
    words takes its rows as `list.slice`s of the slice's values taken as one list (no index
    lists: `list.gather` over `int_ranges` held 4 bytes per value more, and its peak was
    ~1.7x this one's), so the temporaries stay a slice's size."""
    if offsets.size <= 1:  # no rows (a literal list cannot be broadcast to none)
        return pl.Series(values.name, [], dtype=pl.List(values.dtype))
    parts = []
    for lo in range(0, offsets.size - 1, LIST_SLICE_WORDS):
        hi = min(lo + LIST_SLICE_WORDS, offsets.size - 1)
        start, end = int(offsets[lo]), int(offsets[hi])
        # each row's start relative to the slice's first value (u32 fits: < 2**31 positions)
        # and its length
        bounds = pl.DataFrame({"s": offsets[lo:hi] - start, "n": np.diff(offsets[lo:hi + 1])},
                              schema={"s": pl.UInt32, "n": pl.UInt32})
        chunk = values.slice(start, end - start).implode()
        parts.append(bounds.select(pl.lit(chunk).list.slice(pl.col("s"), pl.col("n")))
                     .to_series())
    return pl.concat(parts, rechunk=False) if len(parts) > 1 else parts[0]
