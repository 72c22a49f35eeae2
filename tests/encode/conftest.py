"""Tokenizers the dataset-layout tests share (trained once per session on the primer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpora import PRIMER
from tokcolumnar import train


@pytest.fixture(scope="session")
def layout_tokenizers(tmp_path_factory) -> dict[str, Path]:
    """bert and gpt2 presets, and a BPE without any special token ("plain")."""
    out = {}
    for name, kw in {"bert": {"preset": "bert"}, "gpt2": {"preset": "gpt2"},
                     "plain": {"model": "bpe"}}.items():
        d = tmp_path_factory.mktemp(name) / "o"
        train([str(PRIMER)], out_dir=d, vocab_size=900, **kw)
        out[name] = d
    return out
