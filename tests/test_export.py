"""What the written files mean (issue 17): each reproduction of the issue, with HF as the judge
(tests/support/hf_outputs.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.hf_outputs import check_outputs_in_hf
from tokcolumnar.tokenizer import Tokenizer


def _train(tmp_path, text: str, *options: str):
    src = tmp_path / "c.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "o"
    proc = run_cli("train", str(src), "--out", str(out), *options)
    assert proc.returncode == 0, proc.stderr
    return out, proc


# -- 1 and 2: --end-of-word-token has no HF form; a merge HF reads as another token --------------
@pytest.mark.parametrize("eow, prefix", [("_", "##"), ("</w>", "w"), ("</w>", None)])
def test_end_of_word_token_writes_no_tokenizer_json(tmp_path, eow, prefix):
    options = ["--end-of-word-token", eow]
    if prefix:
        options += ["--continuing-subword-prefix", prefix]
    out, proc = _train(tmp_path, "ab\nlow lower\n", *options)
    # before: HF panicked ("slice index starts at 2 but ends at 1"), refused ("Token `ab/w>`
    # out of vocabulary") or encoded ['low', 'lower'] where ours gives ['low</w>', 'lower</w>']
    assert not (out / "tokenizer.json").exists()
    assert "tokenizer.json not written: HF's BPE has no end-of-word token" in proc.stderr
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert "tokenizer.json" in run["skipped_files"]
    assert (out / "merges.txt").exists() == (prefix is None)  # with a prefix HF misreads it
    own = json.loads((out / "tokenizer.tokcolumnar.json").read_text(encoding="utf-8"))
    assert Tokenizer.from_dir(out).encode("ab").ids == [own["model"]["vocab"]["ab" + eow]]
    check_outputs_in_hf(out, ["ab", "low lower", "lowab x"])


def test_end_of_word_token_encodes_with_it(tmp_path):
    out, _ = _train(tmp_path, "low lower\n", "--end-of-word-token", "</w>")
    assert Tokenizer.from_dir(out).encode("low lower").tokens == ["low</w>", "lower</w>"]
