"""Tokenizers the encode tests share (trained once per session on the primer): the dataset
layout tests' (`layout_tokenizers`) and the four presets the offsets and truncation tests compare
with HF (`preset_tokenizers`, `hf_of`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer as HFTokenizer

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


#: The presets compared with HF (the whitespace pre-tokenizer is the default).
PRESETS = {"whitespace": {}, "gpt2": {"preset": "gpt2"}, "bert": {"preset": "bert"},
           "subword-nmt": {"preset": "subword-nmt"}}


@pytest.fixture(scope="session")
def preset_tokenizers(tmp_path_factory) -> dict[str, Path]:
    """A tokenizer of 800 tokens per preset of `PRESETS`."""
    out = {}
    for name, kw in PRESETS.items():
        d = tmp_path_factory.mktemp(name) / "o"
        train([str(PRIMER)], out_dir=d, vocab_size=800, **kw)
        out[name] = d
    return out


def hf_of(directory: Path) -> HFTokenizer:
    """HF's tokenizer of one of our output directories."""
    return HFTokenizer.from_file(str(directory / "tokenizer.json"))
