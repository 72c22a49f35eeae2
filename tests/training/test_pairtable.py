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

# pair keys as the loop makes them: left << 32 | right, small ids (many keys share low bits)
KEYS = st.builds(lambda a, b: a << 32 | b, st.integers(0, 40), st.integers(0, 40))
BATCH = st.dictionaries(KEYS, st.integers(-5, 5), max_size=300)


def check_same(table: PairCounts, want: dict[int, int], probe: list[int]) -> None:
    keys = sorted(set(want) | set(probe))
    got = table.get_many(np.array(keys, dtype=np.int64)).tolist()
    assert got == [want.get(k, 0) for k in keys]
    assert [table.get(k) for k in keys] == [want.get(k, 0) for k in keys]
    assert len(table) == sum(1 for v in want.values() if v != 0)


@pytest.mark.parametrize("scalar_max,insert_chunk", [(0, 1 << 18), (32, 1 << 18),
                                                     (10**9, 1 << 18), (32, 5)])
@examples(1.0)
@given(initial=BATCH, batches=st.lists(BATCH, max_size=12), unseen=st.lists(KEYS, max_size=20))
def test_table_equals_dict(scalar_max, insert_chunk, initial, batches, unseen):
    """`scalar_max` 0: array rounds only; 10**9: every key probed in Python; `insert_chunk` 5:
    `from_arrays` and rebuilds insert 5 keys at a time."""
    old = pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK
    pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK = scalar_max, insert_chunk
    try:
        run_batches(initial, batches, unseen)
    finally:
        pairtable.SCALAR_MAX, pairtable.INSERT_CHUNK = old


def run_batches(initial, batches, unseen):
    keys = np.array(list(initial), dtype=np.int64)
    table = PairCounts.from_arrays(keys, np.array(list(initial.values()), dtype=np.int64))
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


@pytest.mark.parametrize("insert_chunk", [7, 1 << 18])
def test_growth_and_dropping_zero_counts(insert_chunk, monkeypatch):
    """Thousands of pairs past the initial 1,024 slots, then counts falling to 0: the table
    grows, stays exact, and rebuilds drop the zero counts (it does not keep growing) — with
    rebuilds inserting a few keys at a time (`INSERT_CHUNK` 7) or all at once."""
    monkeypatch.setattr(pairtable, "INSERT_CHUNK", insert_chunk)
    rng = np.random.default_rng(7)
    table, want = PairCounts(), {}
    for _ in range(40):
        keys = np.unique(rng.integers(0, 3000, 500) << 32 | rng.integers(0, 3000, 500))
        deltas = rng.integers(1, 9, keys.size)
        table.add(keys, deltas)
        for k, d in zip(keys.tolist(), deltas.tolist()):
            want[k] = want.get(k, 0) + d
    grown = table.keys.size
    assert grown > 1 << pairtable.MIN_BITS
    check_same(table, want, [])
    # every pair falls to 0 and new ones come: the zeros must go at the next rebuilds
    for round_ in range(20):
        keys = np.array(sorted(want), dtype=np.int64)
        table.add(keys, -np.array([want[k] for k in keys.tolist()], dtype=np.int64))
        want = {}
        keys = np.unique(rng.integers(0, 1 << 20, 3000) << 32 | round_)
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
