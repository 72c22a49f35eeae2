"""Counting, training and encoding on Ray (local Ray, 2 CPUs, one session for the module): the
words table — first_seen included — and the ids are the single-machine ones, for text,
Parquet, JSONL and compressed inputs, files and `ray.data.Dataset`s."""

from __future__ import annotations

import gzip
import json
import os

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.corpora import corpus
from tests.support.markers import SLOW_ONLY
from tokcolumnar import count_words, train
from tokcolumnar.config import TrainConfig
from tokcolumnar.encode.dataset import encode_files
from tokcolumnar.tokenizer import Tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.corpus]


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install "
                              "'tokcolumnar[ray]')")
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install "
                        "'tokcolumnar[ray]')")
    for name, value in {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DATA_LOG_LEVEL": "ERROR"}.items():
        os.environ.setdefault(name, value)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR", object_store_memory=256 << 20)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    """Small real corpora as text, gzip text, Parquet (many row groups) and JSONL."""
    d = tmp_path_factory.mktemp("inputs")
    en = corpus("small/en_botchan.txt")
    ja = corpus("small/ja_wagahai_300k.txt")
    gz = d / "udhr.txt.gz"
    gz.write_bytes(gzip.compress(corpus("small/udhr_multiscript.txt").read_bytes()))
    parquet, jsonl = d / "ja.parquet", d / "ja.jsonl"
    lines = ja.read_text().splitlines(keepends=True)
    pq.write_table(pa.table({"text": lines}), parquet, row_group_size=700)
    jsonl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                             for i, t in enumerate(lines)))
    return [str(en), str(parquet), str(gz), str(jsonl), str(en)]


@SLOW_ONLY  # test_ray_cli counts files on Ray in the full run
def test_count_files_on_ray_is_the_single_machine_count(ray_local, inputs):
    from tokcolumnar.distributed.ray import count_words_ray

    cfg = TrainConfig(pre_tokenizer="byte-level", show_progress=False)
    expected = count_words(inputs, config=cfg)
    got = count_words_ray(inputs, cfg, unit_bytes=50_000)  # about 20 units
    assert got.equals(expected)
    # the default units (one per file here), through the Python API
    assert count_words(inputs, pre_tokenizer="byte-level", engine="ray").equals(expected)


@SLOW_ONLY  # a minute or more of Ray start-up and scheduling: docs/testing.md
def test_count_a_ray_dataset(ray_local, inputs):
    parquet, jsonl = inputs[1], inputs[3]
    for ds, path in [(ray_local.data.read_parquet(parquet), parquet),
                     (ray_local.data.read_json(jsonl), jsonl)]:
        got = count_words(ds, pre_tokenizer="metaspace")
        assert got.equals(count_words([path], pre_tokenizer="metaspace"))


def test_train_on_ray_gives_the_single_machine_tokenizer(ray_local, inputs):
    single = train(inputs, vocab_size=3600, pre_tokenizer="whitespace")
    on_ray = train(inputs, vocab_size=3600, pre_tokenizer="whitespace", engine="ray")
    assert on_ray.words.equals(single.words)
    assert on_ray.merges.equals(single.merges)
    assert on_ray.vocab.equals(single.vocab)


@pytest.fixture(scope="module")
def tokenizer(inputs) -> Tokenizer:
    return train(inputs[:1], vocab_size=500, pre_tokenizer="byte-level").tokenizer()


def test_encode_files_on_ray_writes_the_single_machine_rows(ray_local, inputs, tokenizer,
                                                            tmp_path):
    from tokcolumnar.distributed.ray_encode import encode_files_ray

    n = encode_files(tokenizer, inputs, str(tmp_path / "one.parquet"), progress=False)
    rows = encode_files_ray(tokenizer, inputs, str(tmp_path / "parts"), progress=False,
                            unit_bytes=50_000)
    assert rows == n
    parts = sorted((tmp_path / "parts").glob("part-*.parquet"))
    assert len(parts) > len(inputs)
    got = pl.concat([pl.read_parquet(p) for p in parts])
    assert got.equals(pl.read_parquet(tmp_path / "one.parquet"))


def test_encode_ray_appends_the_ids(ray_local, inputs, tokenizer):
    ds = ray_local.data.read_parquet(inputs[1])
    got = pl.from_arrow(pa.concat_tables(ray_local.get(
        tokenizer.encode_ray(ds, column="text").to_arrow_refs())))
    texts = pl.read_parquet(inputs[1]).get_column("text")
    assert got.get_column("text").equals(texts)
    assert got.get_column("ids").equals(tokenizer.encode_ids(texts).get_column("ids"))
    assert got.schema["ids"] == pl.List(pl.UInt32)


def test_errors(ray_local, inputs, tokenizer, tmp_path):
    from tokcolumnar.errors import TokcolumnarError

    with pytest.raises(TokcolumnarError, match="no column 'body' in the dataset"):
        tokenizer.encode_ray(ray_local.data.read_parquet(inputs[1]), column="body")
    with pytest.raises(TokcolumnarError, match="--engine ray reads files"):
        count_words(pl.DataFrame({"text": ["a b"]}), engine="ray")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(TokcolumnarError, match="no words"):
        count_words([str(empty)], engine="ray")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\n" * 20 + b"bad \xff\n")
    with pytest.raises(TokcolumnarError) as single:
        count_words([inputs[0], str(bad)])
    with pytest.raises(TokcolumnarError) as on_ray:
        count_words([inputs[0], str(bad)], engine="ray")
    assert type(on_ray.value) is TokcolumnarError
    assert str(on_ray.value) == str(single.value)


@SLOW_ONLY  # a minute or more of Ray start-up and scheduling: docs/testing.md
def test_uris_on_ray_read_as_local_paths(ray_local, inputs, tokenizer, tmp_path):
    # file:// URIs (read through the Arrow filesystem, made again on each worker): the words,
    # the tokenizer and the ids of the local paths
    from tokcolumnar.distributed.ray import count_words_ray
    from tokcolumnar.distributed.ray_encode import encode_files_ray

    uris = [f"file://{path}" for path in inputs]
    cfg = TrainConfig(pre_tokenizer="byte-level", show_progress=False)
    assert count_words_ray(uris, cfg, unit_bytes=50_000).equals(count_words(inputs, config=cfg))
    single = train(inputs, vocab_size=3600, pre_tokenizer="whitespace")
    on_ray = train(uris, vocab_size=3600, pre_tokenizer="whitespace", engine="ray")
    assert on_ray.merges.equals(single.merges) and on_ray.vocab.equals(single.vocab)
    n = encode_files(tokenizer, inputs, str(tmp_path / "one.parquet"), progress=False)
    assert encode_files_ray(tokenizer, uris, str(tmp_path / "parts"), progress=False,
                            unit_bytes=50_000) == n
    parts = sorted((tmp_path / "parts").glob("part-*.parquet"))
    assert pl.concat([pl.read_parquet(p) for p in parts]).equals(
        pl.read_parquet(tmp_path / "one.parquet"))
