"""`Tokenizer.prepare(executor)`: the model's tables are built on the executor's thread while a
batch is normalized and pre-tokenized; the batch waits for them at its model stage, never
builds them itself, gets the same ids, and gets the error building them raised."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future
from typing import Any

import polars as pl
import pytest

from tests.support.corpora import PRIMER
from tokcolumnar import Tokenizer

LINES = [line for line in PRIMER.read_text(encoding="utf-8").splitlines() if line.strip()][:300]


class HeldExecutor(Executor):
    """Runs what it is given only when told to (`release`), on the caller's thread."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Any, Future]] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:  # type: ignore[override]
        future: Future = Future()
        self.jobs.append((lambda: fn(*args, **kwargs), future))
        return future

    def release(self) -> None:
        for job, future in self.jobs:
            try:
                future.set_result(job())
            except BaseException as e:  # noqa: BLE001 - handed to the waiting batch
                future.set_exception(e)


def _ids(tok: Tokenizer) -> list[list[int]]:
    return tok.encode_frame(pl.Series("text", LINES)).get_column("ids").to_list()


@pytest.mark.parametrize("preset", ["gpt2", "bert", "whitespace"])
def test_a_batch_waits_for_the_tables_at_its_model_stage(preset_tokenizers, preset):
    expected = _ids(Tokenizer.load(preset_tokenizers[preset]))  # prepared on first use
    tok = Tokenizer.load(preset_tokenizers[preset])
    held = HeldExecutor()
    tok.prepare(held)
    assert len(held.jobs) == 1
    events: list[str] = []
    waiting = threading.Event()
    ready = tok._model_ready
    assert ready is not None

    class Watched:  # the batch's wait, seen from here
        def result(self) -> None:
            events.append("batch waits")
            waiting.set()
            ready.result()
            events.append("batch goes on")

    tok._model_ready = Watched()  # type: ignore[assignment]
    model_prepare = tok.model.prepare

    def prepare() -> None:
        events.append("tables built")
        model_prepare()

    tok.model.prepare = prepare  # type: ignore[method-assign]
    got: list[Any] = []
    batch = threading.Thread(target=lambda: got.append(_ids(tok)))
    batch.start()
    assert waiting.wait(timeout=120)  # normalized and pre-tokenized without the tables
    assert events == ["batch waits"]
    held.release()
    batch.join(timeout=120)
    assert events == ["batch waits", "tables built", "batch goes on"]
    assert got == [expected]


def test_a_failure_to_build_the_tables_reaches_the_batch(preset_tokenizers):
    tok = Tokenizer.load(preset_tokenizers["gpt2"])

    def fail() -> None:
        raise MemoryError("no room for the merge table")

    tok.model.prepare = fail  # type: ignore[method-assign]
    held = HeldExecutor()
    tok.prepare(held)
    held.release()
    with pytest.raises(MemoryError, match="no room for the merge table"):
        _ids(tok)


def test_prepare_without_an_executor_builds_at_once(preset_tokenizers):
    tok = Tokenizer.load(preset_tokenizers["bert"])
    tok.prepare()
    assert tok._model_ready is None and tok._cache is not None
    assert tok._char_split is not None  # the BERT pipeline's code-point split, made
    assert _ids(tok) == _ids(Tokenizer.load(preset_tokenizers["bert"]))
