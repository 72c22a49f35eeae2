"""Per-character helpers of the offsets (`encode.offsets`, `encode.alignment`): texts as code
points read from their UTF-8 buffers, and per-code-point tables kept across batches."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import polars as pl

from ..text.normalizers import Normalizer

# the bits of a UTF-8 lead byte that belong to its code point, by the byte's top 5 bits
_LEAD_BITS = np.array([0x7F] * 16 + [0] * 8 + [0x1F] * 4 + [0x0F] * 2 + [0x07, 0],
                      dtype=np.int32)


def code_points(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every character of `texts` as its code point (flat, in order) and each text's number
    of characters (a null has none), read from the UTF-8 bytes with NumPy: no string per
    character."""
    import pyarrow as pa  # deferred: training loads the tokenizer (and this module), never encodes

    arr = texts.cast(pl.String).to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, dtype=np.uint8))[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    if not len(data) or int(data.max()) < 0x80:  # ASCII: one character per byte
        return data.astype(np.int32), np.diff(offsets)
    # a character starts at every byte that is not a continuation byte (10xxxxxx)
    lead = (data & 0xC0) != 0x80
    starts = np.flatnonzero(lead)
    first = data[starts]
    cp = first.astype(np.int32) & _LEAD_BITS[first >> 3]
    size = np.diff(starts, append=len(data))
    for k in (1, 2, 3):  # the continuation bytes add 6 bits each
        more = np.flatnonzero(size > k)
        cp[more] = (cp[more] << 6) | (data[starts[more] + k] & 0x3F)
    lead_before = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(lead, out=lead_before[1:])
    return cp, lead_before[offsets[1:]] - lead_before[offsets[:-1]]


class CharTable:
    """A value per code point, computed on first sight of the character and kept (for the
    normalized length of a character, or whether the pre-tokenizer keeps it): a batch costs
    one array lookup per character, whatever its size."""

    def __init__(self, compute: Callable[[pl.Series], np.ndarray]):
        self.compute = compute
        self.values = np.full(0x110000, -1, dtype=np.int16)
        self.lock = threading.Lock()

    def lookup(self, cps: np.ndarray) -> np.ndarray:
        out = self.values[cps]
        if (out < 0).any():
            new = np.unique(cps[out < 0])
            chars = pl.Series([chr(c) for c in new], dtype=pl.String)
            with self.lock:
                self.values[new] = self.compute(chars)
            out = self.values[cps]
        return out



def exclusive_cumsum(counts: np.ndarray) -> np.ndarray:
    """Start of each run of `counts` (len n + 1; the last is the total)."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def normalized_lengths(normalizer: Normalizer) -> CharTable:
    """The table of how many characters `normalizer` makes of each character alone."""
    return CharTable(lambda chars: chars.to_frame("c").select(
        normalizer.expr(pl.col("c")).str.len_chars()).to_series().to_numpy())


