"""`buffers`: the GIL-releasing stand-ins for `np.repeat` that the encoder's hot paths use must
give `np.repeat`'s values and dtype, empty runs included; strings to buffers and back."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tokcolumnar.buffers import repeat_runs, run_index

DTYPES = [np.int64, np.uint32, np.int32, np.uint64]


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 4)), max_size=40),
       st.sampled_from(DTYPES))
def test_repeat_runs_is_np_repeat(runs: list[tuple[int, int]], dtype: type) -> None:
    values = np.array([v for v, _ in runs], dtype=dtype)
    lengths = np.array([n for _, n in runs], dtype=np.int64)
    got = repeat_runs(values, lengths)
    assert got.dtype == dtype
    assert got.tolist() == np.repeat(values, lengths).tolist()
    assert run_index(lengths).tolist() == np.repeat(np.arange(len(runs)), lengths).tolist()


def test_values_far_apart_wrap_around_exactly() -> None:
    """Steps larger than the dtype holds (uint64 extremes, int64 min/max) still sum back."""
    big = np.array([2**64 - 1, 0, 2**63, 5], dtype=np.uint64)
    assert repeat_runs(big, np.array([2, 1, 0, 3])).tolist() == np.repeat(
        big, [2, 1, 0, 3]).tolist()
    ends = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 7], dtype=np.int64)
    assert repeat_runs(ends, np.array([1, 2, 1])).tolist() == np.repeat(ends, [1, 2, 1]).tolist()


@given(st.lists(st.one_of(st.none(), st.text()), max_size=8), st.booleans())
def test_string_parts_round_trip(texts: list[str | None], binary: bool) -> None:
    """A String or Binary Series (a null as empty) -> offsets and bytes -> the same values;
    a slice of a Series (an Arrow offset) reads only its own rows."""
    import polars as pl

    from tokcolumnar.buffers import string_parts, strings_from_parts

    values = [None if t is None else (t.encode() if binary else t) for t in ["x", *texts]]
    series = pl.Series("s", values, dtype=pl.Binary if binary else pl.String)[1:]
    offsets, data = string_parts(series)
    assert offsets.dtype == np.int64 and data.dtype == np.uint8
    expected = [b"" if t is None else t.encode() for t in texts]
    assert [bytes(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:])] == expected
    back = strings_from_parts("s", offsets, data, binary=binary)
    assert back.to_list() == [e if binary else e.decode() for e in expected]


@given(st.text())
def test_utf8_chars_are_the_characters(text: str) -> None:
    from tokcolumnar.buffers import utf8_chars

    data = np.frombuffer(text.encode(), dtype=np.uint8)
    code, first_byte = utf8_chars(data)
    assert code.tolist() == [ord(c) for c in text]
    if first_byte is None:  # all ASCII
        assert text.isascii()
    else:
        assert first_byte.tolist() == [len(text[:i].encode()) for i in range(len(text) + 1)]
