"""WordPiece without special tokens (issue 27, item 12): the unknown token the model names is
added to the vocabulary (and a note says so), so that HF loading our tokenizer.json encodes an
unseen character to it, as our encoder does — where HF's own WordPieceTrainer leaves it out
and both encoders then fail."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer as HFTokenizer

from tests.support.cli import run_cli
from tokcolumnar import Tokenizer


@pytest.mark.parametrize("engine", ["polars", pytest.param("duckdb", marks=pytest.mark.duckdb)])
@pytest.mark.parametrize("specials", [[], ["<s>"]])
def test_unknown_token_is_added_and_unseen_characters_encode_to_it(tmp_path, engine, specials):
    src = tmp_path / "c.txt"
    src.write_text("hug pug pun bun hugs\n" * 10, encoding="utf-8")
    out = tmp_path / "o"
    extra = ["--special-tokens", ",".join(specials)] if specials else []
    proc = run_cli("train", str(src), "--model", "wordpiece", "--vocab-size", "40",
                   "--engine", engine, "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    notes = [x for x in proc.stderr.splitlines() if x.startswith("tokcolumnar: note:")]
    assert len(notes) == 1 and "[UNK] added to --special-tokens" in notes[0], proc.stderr
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    ours = Tokenizer.from_dir(out)
    assert hf.token_to_id("[UNK]") == len(specials)  # after the given special tokens
    for text in ["hug zzz", "pü bun", "q"]:
        want = hf.encode(text)
        got = ours.encode(text)
        assert got.tokens == want.tokens and got.ids == want.ids, text
        assert "[UNK]" in want.tokens


def test_quiet_run_says_nothing(tmp_path):
    src = tmp_path / "c.txt"
    src.write_text("hug pug\n", encoding="utf-8")
    proc = run_cli("train", str(src), "--model", "wordpiece", "--vocab-size", "20", "--quiet",
                   "--out", str(tmp_path / "o"))
    assert proc.returncode == 0 and proc.stderr == ""
