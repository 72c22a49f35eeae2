"""What the written files mean (issue 17): each reproduction of the issue, with HF as the judge
(tests/support/hf_outputs.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from tokenizers import Tokenizer as HFTokenizer

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


# -- 3: the unknown token --------------------------------------------------------------------------
def test_unk_token_outside_the_vocabulary_is_refused(tmp_path):
    src = tmp_path / "c.txt"
    src.write_text("ab ab c\n", encoding="utf-8")
    # before: trained, then ours dropped unseen characters where HF raised
    proc = run_cli("train", str(src), "--out", str(tmp_path / "o"), "--unk-token", "<unk>")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "tokcolumnar: error: --unk-token <unk> must be among --special-tokens (otherwise it has "
        "no id and an unknown character cannot be encoded)"]
    out, _ = _train(tmp_path, "ab ab c\n", "--unk-token", "<unk>",
                    "--special-tokens", "<unk>")
    check_outputs_in_hf(out, ["ab z c", "zz"])
    assert Tokenizer.from_dir(out).encode("abz").tokens == ["ab", "<unk>"]


def test_wordpiece_without_its_unknown_token_gets_it_and_both_encoders_use_it(tmp_path):
    # HF's WordPieceTrainer adds no [UNK]: both encoders then refused an unseen character.
    # tokcolumnar adds it to the special tokens (issue 27, item 12; tests/models/
    # test_wordpiece_unk.py)
    out, _ = _train(tmp_path, "ab ab c\n", "--model", "wordpiece")
    assert Tokenizer.from_dir(out).model.vocab["[UNK]"] == 0
    check_outputs_in_hf(out, ["ab c", "c ab", "abz c", "z"])
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    assert hf.encode("abz").tokens == Tokenizer.from_dir(out).encode("abz").tokens == ["[UNK]"]
    (tmp_path / "l").mkdir()
    listed, _ = _train(tmp_path / "l", "ab ab c\n", "--model", "wordpiece",
                       "--special-tokens", "[UNK]")
    check_outputs_in_hf(listed, ["abz c", "z"])


# -- 4: subword-nmt words end at its line breaks, in HF too ---------------------------------------
def _apply_bpe_pieces(codes: Path, text: str) -> list[str]:
    """`subword-nmt apply-bpe` on `text`, its output cut as it reads lines (codecs line breaks,
    `\\r\\n ` stripped from both ends, words split on the ASCII space)."""
    proc = subprocess.run([sys.executable, "-c", "from subword_nmt.subword_nmt import main; main()",
                           "apply-bpe", "-c", str(codes)], input=text.encode(),
                          capture_output=True, check=True)
    out = proc.stdout.decode()
    return [w for line in out.splitlines(keepends=True) for w in line.strip("\r\n ").split(" ")
            if w]


def test_subword_nmt_line_breaks_match_apply_bpe_and_hf(tmp_path):
    line = "ab ab\x0cab c\x0bd e\x85f ab\u2028ab\rab\tab x\x1cy\x1dz\x1e abab\n"
    out, _ = _train(tmp_path, line * 3, "--preset", "subword-nmt", "--vocab-size", "10")
    texts = ["ab\x0cab", "ab ab\x0cab c\x0bd", "e\x85f ab\u2028ab\rab\tab", "x\x1cy\x1dz\x1e",
             " ab  abab ", "ab\nab\x0b"]
    ours = Tokenizer.from_dir(out)
    for text in texts:
        pieces = [t[:-4] if t.endswith("</w>") else t + "@@" for t in ours.encode(text).tokens]
        assert pieces == _apply_bpe_pieces(out / "codes.txt", text), text
    # before: tokenizer.json split on " " only: HF encoded 'ab\x0cab' as one word
    check_outputs_in_hf(out, texts)
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    assert hf.encode("ab\x0cab").tokens == ["ab\x0c</w>", "ab</w>"]


# -- 6: side files only when HF reads them back exactly -------------------------------------------
@pytest.mark.parametrize("options, skipped", [
    (["--pre-tokenizer", "none"], {"merges.txt"}),
    (["--pre-tokenizer", "digits"], {"merges.txt"}),
    (["--pre-tokenizer", "metaspace"], {"merges.txt"}),  # the line's "\n" is in its last word
    (["--end-of-word-suffix", " x"], {"merges.txt"}),
    (["--continuing-subword-prefix", "a b"], {"merges.txt"}),
    (["--end-of-word-suffix", "x"], set()),
    (["--model", "wordpiece", "--pre-tokenizer", "none", "--special-tokens", "[UNK]"],
     {"vocab.txt"}),
    (["--model", "wordpiece", "--continuing-subword-prefix", "# ", "--special-tokens", "[UNK]"],
     set()),
], ids=lambda o: " ".join(o) if isinstance(o, list) else "")
def test_tokens_with_spaces_or_line_breaks(tmp_path, options, skipped):
    # before: merges.txt was "invalid at line 1" in HF, vocab.txt line numbers were not the ids
    text = "low lower 12 3\nnewest  widest\n" * 3
    out, proc = _train(tmp_path, text, "--vocab-size", "60", *options)
    check_outputs_in_hf(out, ["low lower", "newest widest 123\n", "lowest"])
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert set(run["skipped_files"]) == skipped
    for name in skipped:
        assert f"tokcolumnar: note: {name} not written" in proc.stderr


# -- found by the fuzzer ---------------------------------------------------------------------------
@pytest.mark.parametrize("affix", ["##", "</w>"])
def test_end_of_word_token_equal_to_the_prefix(tmp_path, affix):
    # fuzz seeds 2108/4109: our loader built the merge (x, '##') as 'x##' where the trainer
    # (a right part starting with the prefix loses it) made 'x'
    out, _ = _train(tmp_path, "2 ab ab 2'\n", "--continuing-subword-prefix", affix,
                    "--end-of-word-token", affix)
    tok = Tokenizer.from_dir(out)
    words = pl.read_parquet(out / "words.parquet")
    for word, ids in zip(words.get_column("word").to_list(), words.get_column("ids").to_list()):
        assert tok.encode(word).ids == ids, word
    check_outputs_in_hf(out, ["2 ab", "ab2"])


def test_prefix_that_is_a_character_without_merges(tmp_path):
    # fuzz seed 2114: '▁' (Metaspace's character, also the prefix) was taken for a token only
    # merges make, and the tokenizer with no merges was refused on loading
    out, _ = _train(tmp_path, "ab a b\n", "--pre-tokenizer", "metaspace",
                    "--continuing-subword-prefix", "\u2581", "--max-token-length", "1")
    assert Tokenizer.from_dir(out).encode("ab").tokens
    check_outputs_in_hf(out, ["ab", "a b ba"])


def test_run_json_records_every_input_one_a_line(tmp_path):
    """`run.json` of a folder: indented, one line per input record, and the JSON `json`
    would write (the inputs in reading order, each with its size and hash; a non-ASCII
    path as itself)."""
    folder = tmp_path / "in é"
    folder.mkdir()
    for i in range(3):
        (folder / f"f{i}.txt").write_text(f"alpha beta {i}\n" * 40)
    out = tmp_path / "out"
    assert run_cli("train", str(folder), "--out", str(out), "--vocab-size", "60",
                   "--quiet").returncode == 0
    text = (out / "run.json").read_text(encoding="utf-8")
    run = json.loads(text)
    assert [Path(x["path"]).name for x in run["inputs"]] == ["f0.txt", "f1.txt", "f2.txt"]
    assert all(x["bytes"] == (folder / Path(x["path"]).name).stat().st_size
               and len(x["head_tail_blake2b"]) == 32 for x in run["inputs"])
    lines = [line.rstrip(",") for line in text.splitlines()]
    for record in run["inputs"]:
        assert f"    {json.dumps(record, ensure_ascii=False)}" in lines
    assert text.startswith('{\n  "tool": "tokcolumnar",\n') and text.endswith("}\n")
