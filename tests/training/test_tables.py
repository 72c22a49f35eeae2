"""The result tables built from the final segmentation (`training/tables.py`): each word's
tokens and ids are its slice of the flat arrays, whatever the slicing of the word rows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.examples import examples
from tokcolumnar import buffers
from tokcolumnar.training import tables


@examples(1.0)
@given(lengths=st.lists(st.integers(0, 5), max_size=40), seed=st.integers(0, 2**16),
       slice_words=st.sampled_from([1, 3, 7, 1 << 20]))
def test_words_table_lists_are_the_slices_of_the_flat_arrays(lengths, seed, slice_words):
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.random.default_rng(seed).integers(0, 20, int(offsets[-1]))
    tokens = [f"t{i}" for i in range(20)]
    words = pl.DataFrame({"word": [f"w{i}" for i in range(len(lengths))]},
                         schema={"word": pl.String})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(buffers, "LIST_SLICE_WORDS", slice_words)
        out = tables.words_table(words, offsets, ids, tokens)
    assert out.schema["ids"] == pl.List(pl.UInt32)
    assert out.schema["tokens"] == pl.List(pl.String)
    spans = [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(lengths))]
    assert out["ids"].to_list() == spans
    assert out["tokens"].to_list() == [[tokens[j] for j in span] for span in spans]
    assert out["word"].to_list() == words["word"].to_list()
    # the two builders of list columns (buffers: Polars alone, or Arrow buffers) agree
    values = pl.Series("ids", ids, dtype=pl.UInt32)
    assert buffers.lists_from_offsets("ids", offsets, values).to_list() == spans
