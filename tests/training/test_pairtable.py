"""The BPE loop's pair-count table (tokcolumnar/training/pairtable.py) against a Python dict
fed the same changes: random batches of pair deltas, growth past its capacity, counts falling to
0 (dropped at rebuilds), and both probing paths (array rounds, the scalar tail)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.examples import examples
from tokcolumnar.training import pairtable
from tokcolumnar.training.pairtable import PairCounts

# pair keys as the loop makes them: left << 32 | right, small ids (many keys share low bits),
# and ids up to the narrow form's largest
IDS = st.integers(0, 40) | st.integers(pairtable.NARROW_ID_MAX - 30, pairtable.NARROW_ID_MAX)
KEYS = st.builds(lambda a, b: a << 32 | b, IDS, IDS)
BATCH = st.dictionaries(KEYS, st.integers(-5, 5), max_size=300)


def check_same(table: PairCounts, want: dict[int, int], probe: list[int]) -> None:
    keys = sorted(set(want) | set(probe))
    got = table.get_many(np.array(keys, dtype=np.int64)).tolist()
    assert got == [want.get(k, 0) for k in keys]
    assert [table.get(k) for k in keys] == [want.get(k, 0) for k in keys]
    assert len(table) == sum(1 for v in want.values() if v != 0)


@pytest.mark.parametrize("narrow", [False, True], ids=["wide", "narrow"])
@pytest.mark.parametrize("scalar_max,insert_chunk", [(0, 1 << 18), (32, 1 << 18),
                                                     (10**9, 1 << 18), (32, 5)])
@examples(1.0)
@given(initial=BATCH, batches=st.lists(BATCH, max_size=12), unseen=st.lists(KEYS, max_size=20))
def test_table_equals_dict(narrow, scalar_max, insert_chunk, initial, batches, unseen):
    """`scalar_max` 0: array rounds only; 10**9: every key probed in Python; `insert_chunk` 5:
    `from_arrays` and rebuilds insert 5 keys at a time; `narrow`: 8-byte slots."""
    old = pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK
    pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK = scalar_max, insert_chunk
    try:
        run_batches(initial, batches, unseen, narrow)
    finally:
        pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK = old


def run_batches(initial, batches, unseen, narrow=False):
    keys = np.array(list(initial), dtype=np.int64)
    table = PairCounts.from_arrays(keys, np.array(list(initial.values()), dtype=np.int64),
                                   narrow)
    want = dict(initial)
    check_same(table, want, unseen)
    for batch in batches:
        keys = np.array(sorted(batch), dtype=np.int64)
        deltas = np.array([batch[k] for k in sorted(batch)], dtype=np.int64)
        new = table.add(keys, deltas)
        for k, d in batch.items():
            want[k] = want.get(k, 0) + d
        assert new.tolist() == [want[k] for k in sorted(batch)]
        check_same(table, want, unseen)


@pytest.mark.parametrize("narrow", [False, True], ids=["wide", "narrow"])
@pytest.mark.parametrize("insert_chunk", [7, 1 << 18])
def test_growth_and_dropping_zero_counts(insert_chunk, narrow, monkeypatch):
    """Thousands of pairs past the initial 1,024 slots, then counts falling to 0: the table
    grows, stays exact, and rebuilds drop the zero counts (it does not keep growing) — with
    rebuilds inserting a few keys at a time (`INSERT_CHUNK` 7) or all at once."""
    monkeypatch.setattr(pairtable, "INSERT_CHUNK", insert_chunk)
    rng = np.random.default_rng(7)
    table, want = PairCounts(narrow=narrow), {}
    top = pairtable.NARROW_ID_MAX + 1 if narrow else 1 << 20
    for _ in range(40):
        keys = np.unique(rng.integers(0, 3000, 500) << 32 | rng.integers(0, 3000, 500))
        deltas = rng.integers(1, 9, keys.size)
        table.add(keys, deltas)
        for k, d in zip(keys.tolist(), deltas.tolist()):
            want[k] = want.get(k, 0) + d
    grown = table.keys.size
    assert grown > pairtable.MIN_SLOTS
    check_same(table, want, [])
    # every pair falls to 0 and new ones come: the zeros must go at the next rebuilds
    for round_ in range(20):
        keys = np.array(sorted(want), dtype=np.int64)
        table.add(keys, -np.array([want[k] for k in keys.tolist()], dtype=np.int64))
        want = {}
        keys = np.unique(rng.integers(0, top, 3000) << 32 | round_)
        table.add(keys, np.ones(keys.size, dtype=np.int64))
        want = dict.fromkeys(keys.tolist(), 1)
        check_same(table, want, [])
    assert table.keys.size <= grown
    assert table.used <= pairtable.MAX_LOAD * table.keys.size


def test_set():
    table = PairCounts.from_arrays(np.array([5 << 32 | 7], dtype=np.int64), np.array([3]))
    table.set(5 << 32 | 7, 0)
    table.set(1 << 32 | 2, 9)
    assert table.get(5 << 32 | 7) == 0 and table.get(1 << 32 | 2) == 9 and len(table) == 1


def test_narrow_counts_widen_past_int32():
    """Narrow slots hold int32 counts: a count past 2**31 - 1, given at the start or reached
    by adding, widens them to int64 and every count stays exact (a 1 TB corpus's most
    frequent pair, in a 30k vocabulary)."""
    big = pairtable.NARROW_COUNT_MAX
    a, b, c = 3 << 32 | 4, 65534 << 32 | 0, 0 << 32 | 65534
    table = PairCounts.from_arrays(np.array([a, b], dtype=np.int64),
                                   np.array([big, 5], dtype=np.int64), narrow=True)
    assert table.counts.dtype == np.int32 and table.keys.dtype == np.uint32
    assert table.add(np.array([a, c], dtype=np.int64), np.array([1, 7])).tolist() == [big + 1, 7]
    assert table.counts.dtype == np.int64
    assert table.get_many(np.array([a, b, c])).tolist() == [big + 1, 5, 7]
    started = PairCounts.from_arrays(np.array([a], dtype=np.int64),
                                     np.array([big * 3], dtype=np.int64), narrow=True)
    assert started.get(a) == big * 3 and started.get(b) == 0
