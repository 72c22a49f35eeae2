"""`buffers.repeat_runs` / `run_index`: the GIL-releasing stand-ins for `np.repeat` that
the encoder's hot paths use must give `np.repeat`'s values and dtype, empty runs included."""

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
