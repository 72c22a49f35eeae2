"""The merge passes' NumPy kernels (`tokcolumnar.training.passes`)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcolumnar import ondisk
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


def pairs_by_definition(words: list[list[int]], counts: list[int], allowed=None):
    """Every adjacent pair of the words laid out flat (one SEP before each word): key ->
    (summed word count, ascending left positions)."""
    found: dict[int, tuple[int, list[int]]] = {}
    pos = 0
    for word, count in zip(words, counts):
        pos += 1  # the SEP before the word
        for i in range(len(word) - 1):
            a, b = word[i], word[i + 1]
            if allowed is None or allowed(np.array([a]), np.array([b]))[0]:
                c, at = found.get(a << 32 | b, (0, []))
                found[a << 32 | b] = (c + count, at + [pos + i])
        pos += len(word)
    return found


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_words=st.integers(0, 60), chunk=st.integers(1, 40),
       n_tokens=st.sampled_from([3, 50, 3000, 70_000]), filtered=st.booleans(),
       disk=st.booleans(), part=st.integers(1, 30))
def test_group_pairs_by_definition(seed, n_words, chunk, n_tokens, filtered, disk, part,
                                   tmp_path_factory):
    """`group_pairs` counts and indexes every adjacent pair as its definition does, whatever
    the chunk of the layout read at a time (`DENSE_CHUNK`, `BUCKET_CHUNK`) and of the weights
    `_slice_sums` reads, on its three ways: the counting sort (up to `DENSE_COUNT_MAX` dense
    keys: 3 and 50 tokens), one sort of packed keys (below 2**32 dense keys: 3,000; with the
    loop on disk, `disk`, a range of values at a time: `SORT_PART`, `part`), a Polars sort
    above (70,000 tokens), with and without a pair filter."""
    assert 50**2 <= passes.DENSE_COUNT_MAX < 3000**2
    from tokcolumnar.training.symbols import Layout

    rng = np.random.default_rng(seed)
    words = [rng.integers(0, n_tokens, rng.integers(0, 9)).tolist() for _ in range(n_words)]
    counts = rng.integers(1, 1 << 40, n_words).tolist()
    layout = Layout.from_symbols(np.array([len(w) for w in words], dtype=np.int64),
                                 np.array([i for w in words for i in w], dtype=np.int32),
                                 np.array(counts, dtype=np.int64), sym_dtype=np.int32)
    allowed = (lambda a, b: (a + b) % 3 != 0) if filtered else None
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(passes, "WEIGHT_CHUNK", chunk)
        mp.setattr(passes, "DENSE_CHUNK", chunk)
        mp.setattr(passes, "BUCKET_CHUNK", chunk)
        mp.setattr(passes, "SORT_PART", part)
        mp.setattr(ondisk, "MIN_BYTES", 1)  # every array in a file
        with (ondisk.on_disk(tmp_path_factory.mktemp("loop"), budget=0) if disk
              else contextlib.nullcontext()):
            groups = passes.group_pairs(layout, n_tokens, allowed)
    finally:
        mp.undo()
    want = pairs_by_definition(words, counts, allowed)
    assert groups.keys.tolist() == sorted(want)
    assert groups.counts.tolist() == [want[k][0] for k in sorted(want)]
    got_positions = [groups.positions[s:e].tolist()
                     for s, e in zip(groups.starts.tolist(), groups.ends.tolist())]
    assert got_positions == [want[k][1] for k in sorted(want)]


@pytest.mark.parametrize("part,chunk", [(16, 211), (50, 13), (1000, 1 << 22)])
def test_a_mapped_array_is_sorted_a_range_at_a_time(part, chunk, tmp_path, monkeypatch):
    """`_sorted_in_parts`: ranges of at most about `part` values by their top bits, each
    gathered `chunk` values at a time — the whole array's sort, repeated values and a
    range of one crowded bucket included."""
    rng = np.random.default_rng(part)
    values = np.concatenate([rng.integers(0, 1 << 60, 3000, dtype=np.uint64),
                             np.full(200, 12345, dtype=np.uint64),  # one crowded bucket
                             rng.integers(0, 100, 500).astype(np.uint64)])
    rng.shuffle(values)
    monkeypatch.setattr(passes, "SORT_PART", part)
    monkeypatch.setattr(passes, "DENSE_CHUNK", chunk)
    monkeypatch.setattr(ondisk, "MIN_BYTES", 1)
    with ondisk.on_disk(tmp_path, budget=0):
        mapped = ondisk.kept(values.copy())
        assert ondisk.is_mapped(mapped)
        got = passes._sorted(mapped)
        assert ondisk.is_mapped(got)
        np.testing.assert_array_equal(got, np.sort(values))


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.dictionaries(st.integers(0, 60), st.integers(-5, 5), max_size=30),
                      max_size=12),
       fold_min=st.sampled_from([1, 4, 1 << 20]))
def test_key_sums_folded_as_they_come_equal_one_sum(parts, fold_min):
    """`KeySums` folding its parts (every few parts with a small `FOLD_MIN`, never with the
    default on small parts) gives each key's sum over all parts: the keys ascending, zero sums
    kept."""
    sums = passes.KeySums()
    want: dict[int, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passes, "FOLD_MIN", fold_min)
        for part in parts:
            keys = np.array(sorted(part), dtype=np.int64)
            sums.add(keys, np.array([part[k] for k in sorted(part)], dtype=np.int64))
            for k, v in part.items():
                want[k] = want.get(k, 0) + v
            # held: at most the last fold, the parts since (not more keys than it or
            # FOLD_MIN) and the newest part
            assert sums._held - sums._folded <= max(sums._folded, fold_min) + len(part)
        keys, total = sums.total()
    assert keys.tolist() == sorted(want)
    assert total.tolist() == [want[k] for k in sorted(want)]
    assert keys.dtype == total.dtype == np.int64
