"""The merge passes' NumPy kernels (`tokcolumnar.training.passes`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcolumnar.training import passes


def lexsorted(keys: np.ndarray, positions: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`sort_new_pairs` by its definition: (key, position) order, repeats dropped, bounds of
    each key's slice."""
    pairs = sorted(set(zip(keys.tolist(), positions.tolist())))
    out_keys = [k for k, _ in pairs]
    distinct = sorted(set(out_keys))
    bounds = [out_keys.index(k) for k in distinct] + [len(pairs)]
    return (np.array([p for _, p in pairs], dtype=np.int32),
            np.array(distinct, dtype=np.int64), np.array(bounds, dtype=np.int32))


@settings(max_examples=60, deadline=None)
@given(ids=st.integers(1, (1 << 20) - 1), n=st.integers(1, 1500),
       top=st.integers(1, (1 << 31) - 1), repeat=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_sort_new_pairs_packed_and_lexsort_agree(ids, n, top, repeat, seed):
    """Both ways of sorting (packed values from `PACKED_SORT_MIN` pairs when the bits fit,
    else `lexsort`) give the definition's positions, keys and bounds, repeats dropped."""
    rng = np.random.default_rng(seed)
    keys = (rng.integers(0, ids + 1, n).astype(np.int64) << 32) | rng.integers(0, ids + 1, n)
    positions = rng.integers(0, top, n).astype(np.int32)
    if repeat:  # a batch can name one occurrence twice
        keys, positions = np.concatenate([keys, keys[::3]]), np.concatenate(
            [positions, positions[::3]])
    want = lexsorted(keys, positions)
    for smallest in (1, 1 << 40):  # packed whenever it fits / never
        got = _sorted_with(smallest, keys, positions)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


def _sorted_with(smallest: int, keys: np.ndarray, positions: np.ndarray):
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(passes, "PACKED_SORT_MIN", smallest)
        return passes.sort_new_pairs(keys.copy(), positions.copy())
    finally:
        mp.undo()


def test_packed_refused_when_bits_exceed_63():
    """Ids of 2**20 and more with positions of 2**30 do not fit in one int64: no packing."""
    keys = np.array([(1 << 20) << 32 | (1 << 20)], dtype=np.int64)
    assert passes._packed(keys, np.array([1 << 30], dtype=np.int32)) is None
    assert passes._packed(keys, np.array([1 << 20], dtype=np.int32)) is not None
