"""The tiktoken checks of a trained byte-level BPE run (tests/test_tiktoken.py, and each run of
tests/training/test_llm_patterns.py, which trains the same patterns on the same corpora): the
pattern and special tokens recorded in run.json, tiktoken's own reader of
`tokenizer.tiktoken`, the file giving the run's merges back, and tiktoken with that file and
pattern encoding every line to our ids (and `Tokenizer.to_tiktoken`)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tokcolumnar import Tokenizer
from tokcolumnar.text.bytelevel import byte_map_bytes
from tokcolumnar.tiktoken_format import read_tiktoken, trained_merges_of_ranks


def check_tiktoken_outputs(out: Path, path: Path, regex: str, special: dict[str, int],
                           encode_lines: int | None = None) -> None:
    """`out`: the run's output directory, trained on `path` with the pattern `regex` and the
    special tokens `special` (token -> id)."""
    tiktoken = pytest.importorskip("tiktoken")
    load = pytest.importorskip("tiktoken.load")
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    record = run["tiktoken"]
    assert record["pat_str"] == regex
    assert record["special_tokens"] == special
    # tiktoken's own reader of the file, with the recorded pattern and special tokens
    ranks = load.load_tiktoken_bpe(str(out / "tokenizer.tiktoken"))
    assert ranks == read_tiktoken(str(out / "tokenizer.tiktoken"))
    # the file gives the run's merges back (what `train --extend FILE.tiktoken` starts from)
    merges = pl.read_parquet(out / "merges.parquet").sort("rank")
    assert [(byte_map_bytes(a), byte_map_bytes(b)) for a, b, _ in trained_merges_of_ranks(ranks)
            ] == list(zip(merges.get_column("left").to_list(),
                          merges.get_column("right").to_list()))
    enc = tiktoken.Encoding("t", pat_str=record["pat_str"], mergeable_ranks=ranks,
                            special_tokens=record["special_tokens"])
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:encode_lines]
    ours = Tokenizer.from_dir(out)
    got = ours.encode_ids(lines).get_column("ids").to_list()
    want = enc.encode_ordinary_batch(lines)
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert len(got) == len(want) and not bad, f"line {bad[:1]}: {lines[bad[0]]!r}" if bad else ""
    assert ours.to_tiktoken().encode_ordinary_batch(lines) == want
    for token, token_id in special.items():
        assert ours.to_tiktoken().encode(f"a{token}", allowed_special="all")[-1] == token_id
