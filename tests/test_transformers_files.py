"""transformers-ready outputs (issue 28, item 2): `tokenizer_config.json` and
`special_tokens_map.json` give the special tokens their roles, so that
`transformers.AutoTokenizer.from_pretrained(out)` pads, truncates and adds the template tokens
as the released models' tokenizers do.

The reference is transformers itself: for `--preset bert` and `--preset gpt2`, the released
model's layout (its vocabulary files and the `tokenizer_config.json` bert-base-uncased / gpt2
publish: `{"do_lower_case": true, "model_max_length": 512}`, `{"model_max_length": 1024}`)
loaded by the released class (BertTokenizerFast / GPT2TokenizerFast), whose roles are that
class's defaults; for other runs, `PreTrainedTokenizerFast` built by hand on our
`tokenizer.json` with the roles given. No expected output is copied from our program."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import tokcolumnar as tc
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import PRIMER

transformers = pytest.importorskip("transformers")

LINES = [line for line in PRIMER.read_text(encoding="utf-8").splitlines() if line.strip()]
#: A batch with texts of very different lengths: one longer than 1024 tokens (truncated by
#: `truncation=True` at model_max_length), one empty, one with characters the corpus lacks.
TEXTS = [LINES[0], "Short.", " ".join(LINES) * 2, "", "naïve café ÉCOLE 東京 [MASK] tokens",
         LINES[3] + " " + LINES[4]]


def _train(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "out"
    proc = run_cli("train", str(PRIMER), "--out", str(out), "-q", *args)
    assert proc.returncode == 0, proc.stderr
    return out


def _batches(tok, texts: list[str] = TEXTS) -> list[dict]:
    """What a data collator asks of a tokenizer: padded and truncated batches, single texts
    and pairs, padded to the longest and to a length."""
    return [dict(tok(texts, padding=True, truncation=True)),
            dict(tok(texts, padding="max_length", truncation=True, max_length=24)),
            dict(tok(texts[:3], texts[3:], padding=True, truncation=True)),
            dict(tok(texts, truncation=True, max_length=9)),
            dict(tok(texts[:2], padding="longest", return_attention_mask=True,
                     add_special_tokens=False))]


def test_bert_preset_loads_with_berts_roles(tmp_path):
    out = _train(tmp_path, "--preset", "bert", "--vocab-size", "400")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    # the released layout: vocab.txt and bert-base-uncased's own tokenizer_config.json, loaded
    # by its class (roles: that class's defaults)
    ref_dir = tmp_path / "released"
    ref_dir.mkdir()
    shutil.copy(out / "vocab.txt", ref_dir / "vocab.txt")
    (ref_dir / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": True, "model_max_length": 512}))
    ref = transformers.BertTokenizerFast.from_pretrained(str(ref_dir))
    for role in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                 "bos_token", "eos_token"):
        assert getattr(tok, role) == getattr(ref, role), role
    assert (tok.pad_token, tok.cls_token, tok.sep_token, tok.mask_token, tok.unk_token) == (
        "[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")
    assert tok.model_max_length == ref.model_max_length == 512
    assert tok.model_input_names == ref.model_input_names
    ours, theirs = _batches(tok), _batches(ref)
    assert ours == theirs
    assert max(len(ids) for ids in ours[0]["input_ids"]) == 512  # truncated at 512
    assert tok.decode(ours[0]["input_ids"][1], skip_special_tokens=True) == ref.decode(
        theirs[0]["input_ids"][1], skip_special_tokens=True)
    assert json.loads((out / "special_tokens_map.json").read_text()) == {
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]"}


def test_bert_preset_cased(tmp_path):
    """--no-lowercase: the config says so (BertTokenizer would otherwise lowercase)."""
    out = _train(tmp_path, "--preset", "bert", "--vocab-size", "400", "--no-lowercase")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ref = transformers.BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=False,
                                         model_max_length=512) if _v4() else \
        transformers.BertTokenizerFast(vocab=str(out / "vocab.txt"), do_lower_case=False,
                                       model_max_length=512)
    assert _batches(tok) == _batches(ref)
    assert tok("The")["input_ids"] != tok("the")["input_ids"]


def _v4() -> bool:
    return int(transformers.__version__.split(".")[0]) < 5


def test_gpt2_preset_loads_with_gpt2s_roles(tmp_path):
    """gpt2's roles: bos, eos and unk `<|endoftext|>`, no pad token (as released: padding
    needs one, and the usual pad = eos is set on both sides)."""
    out = _train(tmp_path, "--preset", "gpt2", "--vocab-size", "400")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ref_dir = tmp_path / "released"
    ref_dir.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(out / name, ref_dir / name)
    (ref_dir / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1024}))
    ref = transformers.GPT2TokenizerFast.from_pretrained(str(ref_dir))
    for role in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                 "mask_token"):
        assert getattr(tok, role) == getattr(ref, role), role
    assert (tok.bos_token, tok.eos_token, tok.unk_token, tok.pad_token) == (
        "<|endoftext|>", "<|endoftext|>", "<|endoftext|>", None)
    assert tok.model_max_length == ref.model_max_length == 1024
    assert tok.model_input_names == ref.model_input_names == ["input_ids", "attention_mask"]
    with pytest.raises(ValueError):  # as the release: no pad token to pad with
        tok(TEXTS, padding=True)
    for t in (tok, ref):
        t.pad_token = t.eos_token
    ours = _batches(tok)
    assert ours == _batches(ref)
    assert max(len(ids) for ids in ours[0]["input_ids"]) == 1024
    for t in (tok, ref):
        t.padding_side = "left"
    assert _batches(tok) == _batches(ref)


def test_roles_without_preset(tmp_path):
    """--special-token-roles gives the roles of any run; AutoTokenizer's batches are those of
    PreTrainedTokenizerFast built by hand on the same tokenizer.json with the same roles."""
    out = _train(tmp_path, "--vocab-size", "300", "--pre-tokenizer", "byte-level",
                 "--special-tokens", "<pad>,<s>,</s>",
                 "--special-token-roles", "pad=<pad>,bos=<s>",
                 "--special-token-roles", "eos_token=</s>")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ref = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"),
                                               pad_token="<pad>", bos_token="<s>",
                                               eos_token="</s>")
    assert (tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token, tok.cls_token) == (
        "<pad>", "<s>", "</s>", None, None)
    assert tok.pad_token_id == 0
    assert _batches(tok) == _batches(ref)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert "model_max_length" not in config  # no released model to take it from


def test_roles_json_and_comma_token(tmp_path):
    """A token holding a comma: --special-token and a JSON object of roles."""
    out = _train(tmp_path, "--vocab-size", "300", "--special-token", "<p,d>",
                 "--special-tokens", "[A],[B]", "--special-token", "x=y",
                 "--special-token-roles", '{"pad": "<p,d>", "sep": "x=y"}')
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert (tok.pad_token, tok.sep_token) == ("<p,d>", "x=y")
    added = json.loads((out / "tokenizer.json").read_text())["added_tokens"]
    assert [t["content"] for t in added] == ["<p,d>", "[A]", "[B]", "x=y"]
    # the tokens without a role are special to transformers too (skipped by decode)
    ids = tok("a <p,d> [A] b")["input_ids"]
    assert tok.convert_ids_to_tokens(ids).count("[A]") == 1
    assert "[A]" not in tok.decode(ids, skip_special_tokens=True)
    assert json.loads((out / "special_tokens_map.json").read_text()) == {
        "sep_token": "x=y", "pad_token": "<p,d>", "additional_special_tokens": ["[A]", "[B]"]}


def test_python_api_roles(tmp_path):
    tc.train(PRIMER, out_dir=tmp_path / "o", preset="bert", vocab_size=300,
             special_token_roles={"mask": "[MASK]", "eos": "[SEP]"})
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "o"))
    assert (tok.eos_token, tok.mask_token, tok.pad_token) == ("[SEP]", "[MASK]", "[PAD]")


def test_preset_roles_follow_the_special_tokens(tmp_path):
    """A preset role whose token the run does not have is unset (not the class default,
    which would add a token the vocabulary lacks)."""
    out = _train(tmp_path, "--preset", "bert", "--vocab-size", "300",
                 "--special-tokens", "[UNK],[CLS],[SEP]")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert (tok.pad_token, tok.mask_token, tok.cls_token) == (None, None, "[CLS]")
    assert len(tok) == len(json.loads((out / "tokenizer.json").read_text())["model"]["vocab"])


def test_rewrite_keeps_being_ours(tmp_path):
    """A second run replaces a directory holding the two files without --force (they are
    among the files a run writes)."""
    _train(tmp_path, "--preset", "bert", "--vocab-size", "300")
    out = _train(tmp_path, "--preset", "gpt2", "--vocab-size", "300")
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "GPT2Tokenizer"


def test_not_written_without_tokenizer_json(tmp_path):
    """When HF's format cannot express the run (tokenizer.tokcolumnar.json instead of
    tokenizer.json), transformers could not load it: no config to point it at the side files."""
    out = tmp_path / "out"
    with pytest.warns(tc.TokcolumnarWarning):
        tc.train(PRIMER, out_dir=out, vocab_size=300, end_of_word_token="</w>",
                 special_tokens=["<pad>"], special_token_roles={"pad": "<pad>"})
    assert (out / "tokenizer.tokcolumnar.json").exists()
    assert not (out / "tokenizer_config.json").exists()
    assert not (out / "special_tokens_map.json").exists()


@pytest.mark.parametrize("args, needle", [
    (["--special-token-roles", "pad=[NOPE]"], "pad=[NOPE] is not among --special-tokens"),
    (["--special-token-roles", "padding=[PAD]"], "unknown role 'padding'"),
    (["--special-token-roles", "pad"], "expected ROLE=TOKEN, got 'pad'"),
    (["--special-token-roles", "{pad"], "not a JSON object"),
    (["--special-token-roles", "cls=[MASK]"], "cls must be [CLS]"),
    (["--special-token-roles", "unk=[PAD]"], "differs from the model's --unk-token [UNK]"),
])
def test_bad_roles_are_one_line_errors(tmp_path, args, needle):
    proc = run_cli("train", str(PRIMER), "--out", str(tmp_path / "o"), "--preset", "bert",
                   *args)
    assert_clean_error(proc, needle)
    assert not (tmp_path / "o").exists()


def test_bad_roles_python():
    with pytest.raises(tc.TokcolumnarValueError, match="is not among --special-tokens"):
        tc.TrainConfig(special_token_roles={"pad": "<pad>"})
    with pytest.raises(tc.TokcolumnarTypeError):
        tc.TrainConfig(special_token_roles=["pad=<pad>"])


def test_class_only_when_it_rebuilds_the_same_tokenizer(tmp_path):
    """transformers 5 rebuilds BertTokenizer's / GPT2Tokenizer's pipeline from the vocabulary:
    a run whose tokenizer.json differs from that pipeline names PreTrainedTokenizerFast, which
    loads tokenizer.json as it is (the roles and length stay the preset's)."""
    from tokcolumnar.hfconfig import transformers_files

    out = _train(tmp_path, "--preset", "bert", "--vocab-size", "300")
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    segmented = {**tok, "pre_tokenizer": {"type": "WhitespaceSplit"}}  # (bert-zh-wwm's)
    config = transformers_files(tc.TrainConfig(preset="bert-zh-wwm"),
                                segmented)["tokenizer_config.json"]
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert (config["model_max_length"], config["pad_token"], config["cls_token"]) == (
        512, "[PAD]", "[CLS]")
    assert "token_type_ids" in config["model_input_names"]
    prefixed = tc.TrainConfig(preset="bert", continuing_subword_prefix="@@")
    other = {**tok, "model": {**tok["model"], "continuing_subword_prefix": "@@"}}
    assert transformers_files(prefixed, other)["tokenizer_config.json"][
        "tokenizer_class"] == "PreTrainedTokenizerFast"
    out = _train(tmp_path, "--preset", "gpt2", "--vocab-size", "300",
                 "--unk-token", "<|endoftext|>")
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    loaded = transformers.AutoTokenizer.from_pretrained(str(out))
    assert (loaded.eos_token, loaded.model_max_length) == ("<|endoftext|>", 1024)
