"""The training form of the flat layout (`Layout.from_symbols(lean=True)`: each live token's
span instead of `nxt`/`prv`, a position's word as its rank among the SEPs instead of
`word_of`; docs/architecture.md, "Memory"): its bytes per position, and every read and merge
against the encoders' linked form on random words and random merges, long words included
(tokens long enough to widen the spans: tests/training/test_long_tokens.py). The whole
loop's merges are compared with HF and the oracles by test_bpe.py / test_hf_parity.py, which
train on this form."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tokcolumnar import layout as layout_module
from tokcolumnar.layout import Layout
from tokcolumnar.training import passes, symbols
from tokcolumnar.training.passes import group_pairs
from tokcolumnar.training.symbols import build_initial


def both(lengths: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> tuple[Layout, Layout]:
    return (Layout.from_symbols(lengths, ids, counts, np.int32),
            Layout.from_symbols(lengths, ids, counts, np.int32, lean=True))


def test_a_training_layout_takes_about_five_bytes_per_position():
    lengths = np.full(10_000, 20)
    ids = np.zeros(int(lengths.sum()), dtype=np.int32)
    linked, lean = both(lengths, ids, np.ones(lengths.size, dtype=np.int64))
    per_word = 8  # its count
    positions = lean.sym.size

    def per_position(layout: Layout) -> float:
        arrays = [a for a in vars(layout).values() if isinstance(a, np.ndarray)]
        return (sum(a.nbytes for a in arrays) - per_word * lengths.size) / positions

    assert per_position(linked) == pytest.approx(16, abs=0.01)
    assert per_position(lean) < 5.3  # ids 4, span 1, SEP bits and ranks 0.19
    assert lean.nxt is None and lean.prv is None and lean.word_of is None


@pytest.mark.parametrize("max_length,chunk", [(3, 1 << 22), (12, 5), (300, 64), (70_000, 1000)])
def test_lean_reads_and_merges_as_the_linked_layout(max_length: int, chunk: int,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(layout_module, "SEGMENT_CHUNK", chunk)  # the segmentation's slices
    rng = np.random.default_rng(max_length)
    n_words = 40 if max_length < 1000 else 3
    lengths = rng.integers(0, max_length + 1, n_words)
    lengths[0] = max_length
    ids = rng.integers(0, 3, int(lengths.sum())).astype(np.int32)
    linked, lean = both(lengths, ids, rng.integers(1, 9, n_words))
    assert lean.span.dtype == np.uint8  # widened as merges make longer tokens
    every = np.arange(1, lean.sym.size - 1, dtype=np.int32)
    new = 10
    for step in range(60):
        live = np.flatnonzero(linked.sym >= 0).astype(np.int32)
        np.testing.assert_array_equal(linked.next_of(live), lean.next_of(live))
        np.testing.assert_array_equal(linked.prev_of(live), lean.prev_of(live))
        np.testing.assert_array_equal(linked.words(live), lean.words(live))
        np.testing.assert_array_equal(linked.weights(live), lean.weights(live))
        for p in live[:50].tolist():
            assert linked.word(p) == lean.word(p)
            assert linked.next1(p) == lean.next1(p)
        has_right = live[linked.sym[linked.next_of(live)] >= 0]
        if not has_right.size:
            break
        p = int(rng.choice(has_right))
        a, b = int(linked.sym[p]), int(linked.sym[linked.nxt[p]])
        # stale positions (inside merged tokens) among the candidates
        found = linked.live_occurrences(every, a, b)
        np.testing.assert_array_equal(found, lean.live_occurrences(every, a, b))
        if step % 3 == 0:  # one position at a time, as WordPiece's small passes
            for q in found.tolist():
                assert linked.merge1(q, new) == lean.merge1(q, new)
        else:
            for x, y in zip(linked.merge_at(found, new), lean.merge_at(found, new)):
                np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(linked.sym, lean.sym)
        new += 1
    for x, y in zip(linked.segmentation(n_words), lean.segmentation(n_words)):
        np.testing.assert_array_equal(x, y)
    # the spans' type is the narrowest that holds the longest token made
    live = np.flatnonzero(linked.sym >= 0)
    longest = int((linked.nxt[live] - live).max())
    assert lean.span.dtype == (np.uint8 if longest < 256 else np.uint16
                               if longest < 65536 else np.int32)


def test_chunked_initial_stage_is_the_whole_one(monkeypatch):
    """The alphabet's weights and the initial pairs' keys, built a few characters at a time,
    give what one chunk gives."""
    rng = np.random.default_rng(5)
    words = pl.DataFrame({
        "word": ["".join(chr(0x61 + int(c)) for c in rng.integers(0, 6, int(n)))
                 for n in rng.integers(0, 9, 300)],
        "count": rng.integers(1, 50, 300).astype(np.uint64)})

    def initial_and_pairs() -> tuple:
        initial = build_initial(words, [], 4, [], None, None, None)
        g = group_pairs(initial.layout, len(initial.vocab))
        return (initial.vocab.tokens, initial.layout.sym.tolist(), g.keys.tolist(),
                g.counts.tolist(), g.positions.tolist(), list(g.starts), list(g.ends))

    whole = initial_and_pairs()
    monkeypatch.setattr(symbols, "ALPHABET_CHUNK", 7)
    monkeypatch.setattr(passes, "DENSE_CHUNK", 5)
    assert initial_and_pairs() == whole
