"""Tokens longer than the training layout's spans hold (`Layout._widen_span`): spans start as
uint8 and widen, in the middle of a loop, when a merge makes a token of 256 positions (uint16)
or 65,536 (int32). BPE against HF's `BpeTrainer` and its plain-Python transcription,
WordPiece (whose small passes merge one position at a time, `Layout.merge1`) against its
oracle; each run checks that the widening it covers happened."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

import tokcolumnar as tc
from tests.support.bpe_oracle import hf_bpe
from tests.support.strategies import as_table
from tests.support.wordpiece_oracle import likelihood_wordpiece
from tokcolumnar.layout import Layout

# "a" * 70,000 makes tokens of 2, 4, ..., 65,536 a's in its first 16 merges (int32 spans);
# a 300-letter word of 26 letters cycling makes, merge after merge, tokens up to its whole
# length (uint16 spans, with stale values inside every merged token); short words around.
LONG_WORDS = [("a" * 70_000, 3), ("".join(chr(97 + i % 26) for i in range(300)), 40),
              ("b" * 300, 2), ("abc", 7), ("cab", 5), ("zz", 9)]


@pytest.fixture
def widened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The span types each widening made, in order."""
    made: list[str] = []
    widen = Layout._widen_span

    def recording(self: Layout) -> np.ndarray:
        span = widen(self)
        made.append(span.dtype.name)
        return span

    monkeypatch.setattr(Layout, "_widen_span", recording)
    return made


def test_bpe_tokens_past_uint8_and_uint16_spans_identical_to_hf(tmp_path: Path,
                                                                  widened: list[str]):
    vocab_size = 26 + 600
    r = tc.train(from_counts=as_table(LONG_WORDS), vocab_size=vocab_size)
    got = list(zip(r.merges["left"], r.merges["right"], r.merges["count"]))
    assert widened == ["uint16", "int32"]
    assert max(len(t) for t in r.vocab["token"].to_list()) == 70_000  # the whole word
    assert (got, r.vocab["token"].to_list()) == hf_bpe(LONG_WORDS, vocab_size)
    # and HF's trainer itself, on the words as text
    path = tmp_path / "long.txt"
    path.write_text("".join((w + "\n") * c for w, c in LONG_WORDS), encoding="utf-8")
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train([str(path)], trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False))
    assert [f"{a} {b}" for a, b, _ in got] == _hf_merges(hf, tmp_path)


def _hf_merges(hf: HFTokenizer, tmp_path: Path) -> list[str]:
    (tmp_path / "hf").mkdir()
    hf.model.save(str(tmp_path / "hf"))
    lines = (tmp_path / "hf" / "merges.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#version")]


def test_wordpiece_tokens_past_uint8_spans_identical_to_oracle(widened: list[str]):
    words = [w for w in LONG_WORDS if len(w[0]) < 1000]
    vocab_size = 60 + 400
    r = tc.train(from_counts=as_table(words), model="wordpiece", vocab_size=vocab_size)
    m = r.merges
    got = list(zip(m["left"].to_list(), m["right"].to_list(), m["count"].to_list(),
                   m["score"].to_list()))
    assert widened == ["uint16"]
    assert (got, r.vocab["token"].to_list()) == likelihood_wordpiece(words, vocab_size)
