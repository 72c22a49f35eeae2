"""HF `datasets` as input (issue 28, item 3): `train()` and `count_words()` take a
`datasets.Dataset` or `IterableDataset` (its `text` column, or `column=`), streamed, and give
what the same texts give as an iterator of strings. The datasets are built here, locally."""

from __future__ import annotations

import polars as pl
import pytest

import tokcolumnar as tc
from tests.support.corpora import PRIMER
from tokcolumnar.corpus.readers import ITER_BATCH_ROWS, iter_sequences

datasets = pytest.importorskip("datasets")

LINES = PRIMER.read_text(encoding="utf-8").splitlines()


def _same_run(a: tc.TrainResult, b: tc.TrainResult) -> None:
    assert a.words.equals(b.words)
    assert a.merges.equals(b.merges)
    assert a.vocab.equals(b.vocab)


@pytest.mark.parametrize("kind", ["dataset", "iterable", "generator", "sharded"])
def test_train_on_a_dataset_is_training_on_its_texts(kind):
    table = {"id": list(range(len(LINES))), "text": LINES}
    if kind == "dataset":
        ds = datasets.Dataset.from_dict(table)
    elif kind == "iterable":  # features known: column_names are listed
        ds = datasets.Dataset.from_dict(table).to_iterable_dataset()
    elif kind == "sharded":
        ds = datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=3)
    else:  # features unknown until read: column_names is None
        ds = datasets.IterableDataset.from_generator(
            lambda: ({"id": i, "text": t} for i, t in enumerate(LINES)))
    expected = tc.train(iter(LINES), vocab_size=300, preset="bert")
    _same_run(tc.train(ds, vocab_size=300, preset="bert"), expected)
    words = tc.count_words(ds)
    assert words.equals(tc.count_words(iter(LINES)))


def test_column_option():
    ds = datasets.Dataset.from_dict({"content": LINES, "text": [""] * len(LINES)})
    _same_run(tc.train(ds, vocab_size=300, column="content"),
              tc.train(iter(LINES), vocab_size=300))


def test_missing_column_is_named():
    ds = datasets.Dataset.from_dict({"content": LINES})
    with pytest.raises(tc.TokcolumnarError, match=r"no column 'text' in the dataset \(columns: "
                       r"content\); choose one with column="):
        tc.train(ds, vocab_size=300)
    rows = datasets.IterableDataset.from_generator(lambda: ({"content": t} for t in LINES))
    with pytest.raises(tc.TokcolumnarError, match="no column 'text' in the dataset's rows"):
        tc.count_words(rows)


def test_text_column_of_another_type():
    ds = datasets.Dataset.from_dict({"text": list(range(10))})
    with pytest.raises(tc.TokcolumnarError, match="dataset: text column has type Int64, "
                       "expected strings"):
        tc.count_words(ds)


def test_null_texts_are_empty():
    """A missing text (None) counts no words, as a null in a data frame."""
    texts = ["one two", None, "two"]
    words = tc.count_words(datasets.Dataset.from_dict({"text": texts}))
    assert dict(words.select("word", "count").iter_rows()) == dict(
        tc.count_words(pl.DataFrame({"text": texts})).select("word", "count").iter_rows())


def test_streamed():
    """The first batch of texts comes before the dataset is read to its end: an
    IterableDataset is never materialised."""
    n = 3 * ITER_BATCH_ROWS
    read = [0]

    def rows():
        for i in range(n):
            read[0] += 1
            yield {"text": f"w{i % 97} x"}

    ds = datasets.IterableDataset.from_generator(rows)
    chunks = iter_sequences(ds)
    first = next(chunks)
    assert len(first) == ITER_BATCH_ROWS
    assert read[0] < n
    assert sum(len(c) for c in chunks) + len(first) == n


@pytest.mark.duckdb
def test_duckdb_engine_reads_a_dataset():
    ds = datasets.Dataset.from_dict({"text": LINES})
    _same_run(tc.train(ds, vocab_size=300, engine="duckdb"),
              tc.train(iter(LINES), vocab_size=300))
