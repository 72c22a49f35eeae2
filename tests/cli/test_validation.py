"""Options are validated, not ignored; tokenizers are validated on load; side files are written
only when their readers get the tokens back exactly.

CLI behaviour through subprocess (`python -m tokcolumnar`): one `tokcolumnar: error: ...` line,
exit code 2. The Python API raises `ValueError`/`TypeError` subclasses with the same messages.
What HF accepts or refuses on load is asked of HF itself (`tokenizers`), not assumed."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models

import tokcolumnar as tc
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import PRIMER as DATA
from tests.support.examples import examples
from tests.support.markers import tiered
from tokcolumnar import (
    TokcolumnarError,
    TokcolumnarTypeError,
    TokcolumnarValueError,
    TokcolumnarWarning,
    Tokenizer,
    TrainConfig,
)
from tokcolumnar.models import WordPieceModel

SLOW = pytest.mark.slow
TEXTS = ["low lower newest widest", "the cat sat on the mat", "hello there, world!"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("txt") / "t.txt"
    p.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")
    return p


# -- item 7: presets --------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--preset", "gpt2", "--model", "wordpiece"],
     "--preset gpt2 fixes --model bpe; got --model wordpiece"),
    pytest.param(["--preset", "bert", "--model", "bpe"],
                 "--preset bert fixes --model wordpiece; got --model bpe", marks=SLOW),
    pytest.param(["--preset", "subword-nmt", "--tie-break", "id"],
                 "--preset subword-nmt fixes --tie-break lexical-max; got --tie-break id",
                 marks=SLOW),
    pytest.param(["--preset", "gpt2", "--pre-tokenizer", "whitespace"],
                 "--preset gpt2 fixes --pre-tokenizer byte-level; got --pre-tokenizer whitespace",
                 marks=SLOW),
    pytest.param(["--preset", "bert", "--normalizer", "nfc"],
                 "--preset bert fixes --normalizer bert; got --normalizer nfc", marks=SLOW),
    pytest.param(["--preset", "gpt2", "--end-of-word-suffix", "</w>"],
                 "--preset gpt2 uses no --end-of-word-suffix; got --end-of-word-suffix '</w>'",
                 marks=SLOW),
    (["--preset", "subword-nmt", "--lowercase"],
     "--preset subword-nmt uses no --lowercase; got --lowercase"),
    pytest.param(["--preset", "gpt2", "--initial-alphabet", "abc"],
                 "--preset gpt2 fixes --initial-alphabet (the 256 byte-level characters); "
                 "got --initial-alphabet abc", marks=SLOW),
])
def test_preset_contradictions_are_refused_naming_both(text_file, tmp_path, args, message):
    proc = run_cli("train", str(text_file), "--out", str(tmp_path / "o"), "--vocab-size", "400",
                   *args)
    assert assert_clean_error(proc) == f"tokcolumnar: error: {message}"
    assert not (tmp_path / "o").exists()
    # the Python API: the same message, as a ValueError
    kw = {a[2:].replace("-", "_"): b for a, b in zip(args[::2], args[1::2])}
    if args[-1] == "--lowercase":
        kw = {"preset": "subword-nmt", "lowercase": True}
    with pytest.raises(ValueError) as e:
        tc.train([str(text_file)], vocab_size=400, **kw)
    assert isinstance(e.value, TokcolumnarError) and str(e.value) == message


def test_preset_values_given_again_are_accepted():
    """Giving the value a preset fixes is no contradiction: same result as the preset alone."""
    plain = tc.train(iter(TEXTS), preset="gpt2", vocab_size=300)
    again = tc.train(iter(TEXTS), preset="gpt2", vocab_size=300, model="bpe",
                     pre_tokenizer="byte-level", normalizer="none", tie_break="id",
                     lowercase=False)
    assert again.merges.equals(plain.merges) and again.vocab.equals(plain.vocab)
    snmt = TrainConfig(preset="subword-nmt", tie_break="lexical-max",
                       end_of_word_suffix="</w>")
    assert snmt.tie_break == "lexical-max" and snmt.max_merges == 30000


@pytest.mark.parametrize("preset", ["gpt2", "bert", "subword-nmt", None])
def test_a_resolved_config_resolves_to_itself(preset):
    """crosscheck re-creates the config (`dataclasses.replace`): the preset must not refuse its
    own resolved values, nor change them."""
    cfg = TrainConfig(preset=preset, vocab_size=500, show_progress=False)
    again = dataclasses.replace(cfg, engine="duckdb")
    assert dataclasses.replace(again, engine="polars") == cfg


def test_preset_defaults_may_be_replaced(tmp_path):
    cased = tc.train(iter(["The Cat sat on The Mat", "the cat"] * 3), preset="bert",
                     vocab_size=60, lowercase=False, out_dir=tmp_path / "cased")
    tokens = set(cased.vocab.get_column("token").to_list())
    assert "T" in tokens and "t" in tokens  # "The" kept its case
    hf = HFTokenizer.from_file(str(tmp_path / "cased" / "tokenizer.json"))
    assert json.loads(hf.to_str())["normalizer"]["lowercase"] is False
    ours = Tokenizer.from_dir(tmp_path / "cased")
    assert ours.encode("The Cat").ids == hf.encode("The Cat").ids
    none = tc.train(iter(TEXTS), preset="gpt2", vocab_size=300, special_tokens=[])
    assert none.vocab.filter(pl.col("kind") == "special").height == 0
    with pytest.raises(ValueError, match=r"--preset bert needs \[SEP\]"):
        tc.train(iter(TEXTS), preset="bert", vocab_size=100, special_tokens=["[UNK]", "[CLS]"])


def test_subword_nmt_min_frequency_is_honoured(tmp_path):
    """`--min-frequency 1` used to be raised silently to 2; it is subword-nmt's own option."""
    ref = tmp_path / "codes.txt"
    with open(DATA, "rb") as fin, open(ref, "wb") as fout:
        subprocess.run([sys.executable, "-c", "from subword_nmt.subword_nmt import main; main()",
                        "learn-bpe", "-s", "3000", "--min-frequency", "1"], stdin=fin,
                       stdout=fout, stderr=subprocess.DEVNULL, check=True)
    tc.train([str(DATA)], out_dir=tmp_path / "o", preset="subword-nmt", vocab_size=3000,
             min_frequency=1)
    ours = (tmp_path / "o" / "codes.txt").read_bytes()
    assert ours == ref.read_bytes()
    default = tc.train([str(DATA)], preset="subword-nmt", vocab_size=3000)
    assert default.merges.height < ours.count(b"\n") - 1  # the default 2 stops earlier


# -- item 7: degenerate values, model options, argparse ---------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--limit-alphabet", "0"], "--limit-alphabet must be positive, got 0"),
    pytest.param(["--max-merges", "-3"], "--max-merges must be >= 0, got -3", marks=SLOW),
    pytest.param(["--max-word-chars", "0"], "--max-word-chars must be positive, got 0", marks=SLOW),
    pytest.param(["--end-of-word-token", ""], "--end-of-word-token must not be empty", marks=SLOW),
    pytest.param(["--model", "wordpiece", "--min-score", "nan"],
                 "--min-score must be a finite number >= 0, got nan", marks=SLOW),
    pytest.param(["--model", "wordpiece", "--min-score", "-1"],
                 "--min-score must be a finite number >= 0, got -1.0", marks=SLOW),
    pytest.param(["--special-tokens", "a,,b"], "--special-tokens has an empty name", marks=SLOW),
    (["--special-tokens", "a,b,a"], "--special-tokens contains duplicates: a"),
    pytest.param(["--min-score", "0.5"], "--min-score applies to --model wordpiece only",
                 marks=SLOW),
    pytest.param(["--wordpiece-scoring", "frequency"],
                 "--wordpiece-scoring applies to --model wordpiece only", marks=SLOW),
    pytest.param(["--model", "wordpiece", "--tie-break", "first-seen"],
                 "--tie-break applies to BPE only", marks=SLOW),
    (["--unk-token", "<unk>"], "--unk-token <unk> must be among --special-tokens"),
    (["--vocab-size", "abc"], "argument --vocab-size: invalid int value: 'abc'"),
    pytest.param(["--min-score", "x"], "argument --min-score: invalid float value: 'x'",
                 marks=SLOW),
    pytest.param(["--model", "foo"], "argument --model: invalid choice: 'foo'", marks=SLOW),
    pytest.param(["--no-such-option"], "unrecognized arguments: --no-such-option", marks=SLOW),
])
def test_bad_options_give_one_line(text_file, tmp_path, args, message):
    proc = run_cli("train", str(text_file), "--out", str(tmp_path / "o"), *args)
    assert message in assert_clean_error(proc)
    assert not (tmp_path / "o").exists()


def test_argparse_errors_one_line_help_unchanged():
    assert "the following arguments are required: --out" in assert_clean_error(
        run_cli("train", "x"))
    assert "invalid choice: 'trian'" in assert_clean_error(run_cli("trian"))
    assert "required: --tokenizer, --out" in assert_clean_error(run_cli("encode", "x"))
    help_ = run_cli("train", "--help")
    assert help_.returncode == 0 and help_.stdout.startswith("usage: tokcolumnar train")
    assert "--no-lowercase" in help_.stdout


@pytest.mark.parametrize("options, kind, message", [
    ({"vocab_size": "500"}, TypeError, "--vocab-size must be an integer, got '500'"),
    ({"vocab_size": 500.5}, TypeError, "--vocab-size must be an integer, got 500.5"),
    ({"vocab_size": True}, TypeError, "--vocab-size must be an integer, got True"),
    ({"min_frequency": -1}, ValueError, "--min-frequency must be >= 0, got -1"),
    ({"special_tokens": "[UNK]"}, TypeError,
     "--special-tokens must be a list of strings, not one string (write ['[UNK]'])"),
    ({"special_tokens": ["a", 3]}, TypeError, "--special-tokens must be a list of strings"),
    ({"special_tokens": [""]}, ValueError, "--special-tokens has an empty name"),
    ({"lowercase": "yes"}, TypeError, "--lowercase must be True or False, got 'yes'"),
    ({"model": 3}, TypeError, "--model must be a string, got 3"),
    ({"model": "wordpiece", "min_score": float("inf")}, ValueError,
     "--min-score must be a finite number >= 0, got inf"),
    ({"initial_alphabet": ["ab"]}, ValueError, "single characters, got 'ab'"),
    ({"engine": "dask"}, ValueError,
     "unknown engine 'dask' (choose from polars, duckdb, ray, spark)"),
    ({"column": ""}, ValueError, "--column must not be empty"),
])
def test_python_api_raises_value_and_type_errors(options, kind, message):
    ours = TokcolumnarTypeError if kind is TypeError else TokcolumnarValueError
    for call in (lambda: tc.train(iter(TEXTS), **options),
                 lambda: tc.count_words(iter(TEXTS), **options)):
        with pytest.raises(kind) as e:
            call()
        assert isinstance(e.value, ours) and message in str(e.value)


def test_python_api_takes_numpy_ints_and_alphabet_strings():
    cfg = TrainConfig(vocab_size=np.int64(300), initial_alphabet="xyzx")
    assert type(cfg.vocab_size) is int and cfg.vocab_size == 300
    assert cfg.initial_alphabet == ["x", "y", "z"]


def test_wordpiece_defaults_live_in_the_config():
    cfg = TrainConfig(model="wordpiece")
    assert cfg.continuing_subword_prefix == "##" and cfg.wordpiece_scoring == "likelihood"
    assert TrainConfig().wordpiece_scoring is None  # BPE has no scoring


@pytest.mark.duckdb
def test_from_counts_is_checked(tmp_path):
    with pytest.raises(ValueError, match=r"from_counts: no column 'word' \(columns: w, count\)"):
        tc.train(from_counts=pl.DataFrame({"w": ["a"], "count": [1]}), vocab_size=50)
    with pytest.raises(ValueError, match="column 'count' must be integers"):
        tc.train(from_counts=pl.DataFrame({"word": ["a"], "count": ["1"]}), vocab_size=50)
    with pytest.raises(TypeError, match="from_counts must be the path"):
        tc.train(from_counts=pl.DataFrame({"word": ["a"]}).lazy(), vocab_size=50)
    words = tc.count_words(iter(TEXTS))
    with pytest.raises(ValueError, match="either inputs or from_counts"):
        tc.train(iter(TEXTS), from_counts=words, vocab_size=50)
    with pytest.raises(ValueError, match="either config= or options"):
        tc.train(iter(TEXTS), config=TrainConfig(), vocab_size=50)
    a, b = (tc.train(from_counts=words, vocab_size=60, engine=e) for e in ("polars", "duckdb"))
    assert a.merges.height > 10 and a.merges.equals(b.merges)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "o"
    tc.train([str(DATA)], out_dir=out, vocab_size=400, special_tokens=["<unk>", "<s>"],
             unk_token="<unk>")
    return out


def test_encode_and_decode_check_their_arguments(trained):
    tok = Tokenizer.from_dir(trained)
    n = tok.get_vocab_size()
    for call, kind, message in (
            (lambda: tok.encode(123), TypeError, "encode: text must be a string, got int"),
            (lambda: tok.encode("a", pair=5), TypeError, "pair must be a string"),
            (lambda: tok.encode_batch(["a", 5]), TypeError, "item 1 is int"),
            (lambda: tok.encode_batch(["a", None]), TypeError, "item 1 is NoneType"),
            (lambda: tok.encode_batch("abc"), TypeError, "use encode for one text"),
            (lambda: tok.encode_ids(pl.Series([1, 2])), TypeError, "a Series of Int64"),
            (lambda: tok.decode([-1]), ValueError, "decode: -1 is not a token id"),
            (lambda: tok.decode([10**9]), ValueError, f"(ids go from 0 to {n - 1})"),
            (lambda: tok.decode([n]), ValueError, f"decode: {n} is not a token id"),
            (lambda: tok.decode(["a"]), TypeError, "token ids are integers, got 'a'"),
            (lambda: tok.decode([1.0]), TypeError, "got 1.0"),
            (lambda: tok.decode([True]), TypeError, "got True"),
            (lambda: tok.decode("12"), TypeError, "sequence of token ids, got str")):
        with pytest.raises(kind) as e:
            call()
        assert isinstance(e.value, TokcolumnarError) and message in str(e.value)
    enc = tok.encode("the lowest newer")
    assert tok.decode(np.array(enc.ids)) == tok.decode(enc.ids)
    assert tok.encode_ids(pl.Series(["the", None])).get_column("ids").to_list()[1] == []


# -- item 8: tokenizers validated on load ------------------------------------------------------
def _mutated(good: dict, how: str) -> dict | str:
    d = copy.deepcopy(good)
    m = d["model"]
    v = m["vocab"]
    tokens = sorted(v, key=v.get)
    first_merge = m["merges"][0]
    if how == "no merges":
        m["merges"] = []
    elif how == "merges missing":
        del m["merges"]
    elif how == "vocab missing":
        del m["vocab"]
    elif how == "duplicate id":
        v[tokens[10]] = v[tokens[11]]
    elif how == "negative id":
        v[tokens[10]] = -1
    elif how == "id too large":
        v[tokens[10]] = 1 << 32
    elif how == "float id":
        v[tokens[10]] = 10.5
    elif how == "string id":
        v[tokens[10]] = "10"
    elif how == "merge of unknown token":
        m["merges"].insert(0, ["zzz", "q"])
    elif how == "merge result missing":
        del v["".join(first_merge)]
    elif how == "merge of three":
        m["merges"][0] = " ".join(first_merge + ["x"])
    elif how == "model not object":
        d["model"] = "BPE"
    elif how == "model missing":
        del d["model"]
    elif how == "unknown model type":
        m["type"] = "NoSuchModel"
    elif how == "decoder field type":
        d["decoder"] = {"type": "BPEDecoder", "suffix": 3}
    elif how == "normalizer not object":
        d["normalizer"] = "NFC"
    elif how == "pre_tokenizer unknown type":
        d["pre_tokenizer"] = {"type": "Nope"}
    elif how == "post_processor bad template":
        d["post_processor"] = {"type": "TemplateProcessing", "single": "x", "pair": [],
                               "special_tokens": {}}
    elif how == "added_tokens null":
        d["added_tokens"] = None
    elif how == "added token id taken":
        d["added_tokens"].append({"id": 3, "content": "<x>", "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False,
                                  "special": True})
    elif how == "added token id differs from vocab":
        d["added_tokens"][0]["id"] = 7
    elif how == "byte_fallback":
        m["byte_fallback"] = True
    elif how == "dropout":
        m["dropout"] = 0.5
    elif how == "truncated":
        return json.dumps(good)[:300]
    elif how == "empty":
        return ""
    elif how == "not an object":
        return "[1, 2]"
    else:
        raise AssertionError(how)
    return d


# (case, what our message says, whether HF refuses it too)
LOAD_CASES = [
    ("no merges", "no merges, but", False),
    ("merges missing", "model BPE: missing field 'merges'", True),
    ("vocab missing", "model BPE: missing field 'vocab'", True),
    ("duplicate id", "is given to both", False),
    ("negative id", "ids go from 0 to 4294967295", True),
    ("id too large", "ids go from 0 to 4294967295", True),
    ("float id", "must be an integer, got a number", True),
    ("string id", "must be an integer, got a string", True),
    ("merge of unknown token", "uses 'zzz', which is not in the vocabulary", True),
    ("merge result missing", "which is not in the vocabulary", True),
    ("merge of three", "must be \"left right\" or [left, right]", True),
    ("model not object", "'model' must be an object, got a string", True),
    ("model missing", "top level: missing field 'model'", True),
    ("unknown model type", "unsupported model in tokenizer.json: 'NoSuchModel'", True),
    ("decoder field type", "decoder BPEDecoder: 'suffix' must be a string, got an integer", True),
    ("normalizer not object", "top level: 'normalizer' must be an object or null, got a string",
     True),
    ("pre_tokenizer unknown type", "unsupported pre_tokenizer in tokenizer.json: 'Nope'", True),
    ("post_processor bad template", "'single' must be an array, got a string", True),
    ("added_tokens null", "'added_tokens' must be an array, got null", True),
    ("added token id taken", "'<x>' has id 3, but HF gives it id", False),
    ("added token id differs from vocab", "has id 7, but HF gives it id 0", False),
    ("byte_fallback", "byte_fallback=true needs the 256 byte pieces in the vocabulary", False),
    ("dropout", "dropout 0.5 is not supported", False),
    ("truncated", "is not valid JSON", True),
    ("empty", "is empty (not a tokenizer.json)", True),
    ("not an object", "top level must be a JSON object, got an array", True),
]


def _hf_refuses(text: str) -> bool:
    try:
        HFTokenizer.from_str(text)
    except BaseException:  # noqa: BLE001 - HF panics (PanicException) on some bad merges
        return True
    return False


# the fast tier loads one file of each kind of fault; the full run all of them
FAST_LOAD_CASES = ("merges missing", "duplicate id", "unknown model type", "added token id taken",
                   "truncated")


@pytest.mark.parametrize("case, message, hf_refuses",
                         tiered(LOAD_CASES, lambda c: c[0] in FAST_LOAD_CASES, multi=True),
                         ids=[c[0] for c in LOAD_CASES])
def test_bad_tokenizer_json_is_refused(trained, text_file, tmp_path, case, message, hf_refuses):
    good = json.loads((trained / "tokenizer.json").read_text(encoding="utf-8"))
    bad = _mutated(good, case)
    text = bad if isinstance(bad, str) else json.dumps(bad)
    assert _hf_refuses(text) == hf_refuses  # what HF does with the same file
    f = tmp_path / "tokenizer.json"
    f.write_text(text, encoding="utf-8")
    line = assert_clean_error(run_cli("encode", str(text_file), "--tokenizer", str(f),
                                      "--out", str(tmp_path / "e.parquet")))
    assert str(f) in line and message in line
    assert not (tmp_path / "e.parquet").exists()
    with pytest.raises(ValueError) as e:
        Tokenizer.from_file(f)
    assert line == f"tokcolumnar: error: {e.value}"


#: Normalizers nested in `Sequence`s (each two levels: the object and its array), with the
#: innermost one: (sequences, innermost, levels of the whole file). HF reads up to 127 levels
#: (serde_json's recursion limit refuses a 128th).
NESTED = [
    (62, {"type": "Lowercase"}, 126),
    (62, {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, 127),
    (63, {"type": "Lowercase"}, 128),
    (3000, {"type": "Lowercase"}, 6002),
]


@pytest.mark.parametrize("sequences, innermost, levels", NESTED, ids=[str(n[2]) for n in NESTED])
def test_nesting_deeper_than_hf_reads_is_refused(trained, text_file, tmp_path, sequences,
                                                innermost, levels):
    """A tokenizer.json nested deeper than HF reads (3,000 levels once ended in an internal
    RecursionError) is refused in one line, as HF refuses it; one at HF's limit loads."""
    good = json.loads((trained / "tokenizer.json").read_text(encoding="utf-8"))
    good["normalizer"] = "@nested@"
    nested = ('{"type": "Sequence", "normalizers": [' * sequences + json.dumps(innermost)
              + "]}" * sequences)
    text = json.dumps(good).replace('"@nested@"', nested)
    f = tmp_path / "tokenizer.json"
    f.write_text(text, encoding="utf-8")
    fits = levels <= 127
    assert _hf_refuses(text) == (not fits)
    proc = run_cli("encode", str(text_file), "--tokenizer", str(f), "--out",
                   str(tmp_path / "e.parquet"))
    if fits:
        assert proc.returncode == 0, proc.stderr
        return
    line = assert_clean_error(proc, "nested more than 127 levels deep")
    assert str(f) in line
    with pytest.raises(ValueError, match="nested more than 127 levels deep"):
        Tokenizer.from_file(f)


def test_nesting_is_checked_in_a_tokenizer_given_as_a_dict(trained):
    """`Tokenizer.from_hf_dict` refuses the same nesting in a dict from Python."""
    d = json.loads((trained / "tokenizer.json").read_text(encoding="utf-8"))
    normalizer: dict = {"type": "Lowercase"}
    for _ in range(2000):
        normalizer = {"type": "Sequence", "normalizers": [normalizer]}
    d["normalizer"] = normalizer
    with pytest.raises(ValueError, match="nested more than 127 levels deep"):
        Tokenizer.from_hf_dict(d)


@pytest.mark.parametrize("run_json, message", [
    ("{not json", "run.json is not valid JSON"),
    pytest.param("", "run.json is empty", marks=SLOW),
    pytest.param("{}", "run.json: missing field 'settings'", marks=SLOW),
    ('{"settings": [1]}', "run.json: 'settings' must be an object, got an array"),
    pytest.param('{"settings": {"end_of_word_token": 5}}',
                 "settings: 'end_of_word_token' must be a string or null, got an integer",
                 marks=SLOW),
    pytest.param("[]", "run.json must be a JSON object, got an array", marks=SLOW),
])
def test_bad_run_json_is_refused(trained, text_file, tmp_path, run_json, message):
    d = tmp_path / "tok"
    d.mkdir()
    (d / "tokenizer.json").write_bytes((trained / "tokenizer.json").read_bytes())
    (d / "run.json").write_text(run_json, encoding="utf-8")
    line = assert_clean_error(run_cli("encode", str(text_file), "--tokenizer", str(d),
                                      "--out", str(tmp_path / "e.parquet")))
    assert message in line
    with pytest.raises(TokcolumnarError, match="run.json"):
        Tokenizer.from_dir(d)


def test_directory_without_tokenizer_json(text_file, tmp_path):
    (tmp_path / "empty").mkdir()
    line = assert_clean_error(run_cli("encode", str(text_file), "--tokenizer",
                                      str(tmp_path / "empty"), "--out",
                                      str(tmp_path / "e.parquet")))
    assert "has no tokenizer.json" in line
    with pytest.raises(TokcolumnarError, match="tokenizer directory not found"):
        Tokenizer.from_dir(tmp_path / "missing")


def _tiny(model: dict, added: list | None = None) -> dict:
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added or [],
            "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": None, "model": model}


BPE = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
       "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
       "ignore_merges": False, "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
       "merges": [["a", "b"], ["ab", "c"]]}


@pytest.mark.parametrize("name, d", [
    ("gaps between ids", _tiny({**BPE, "vocab": {"a": 0, "b": 5, "c": 6, "ab": 9, "abc": 12}})),
    ("no type field", _tiny({k: v for k, v in BPE.items() if k != "type"})),
    ("merges as strings", _tiny({**BPE, "merges": ["a b", "ab c"]})),
    ("char-only BPE without merges", _tiny({**BPE, "vocab": {"a": 0, "b": 1, "c": 2},
                                            "merges": []})),
    ("added tokens in and after the vocab", _tiny(BPE, [
        {"id": 1, "content": "b", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": 5, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": 6, "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": 9, "content": "", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}])),
    ("wordpiece without type", _tiny({"vocab": {"[UNK]": 0, "a": 1, "##b": 2},
                                      "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                                      "max_input_chars_per_word": 100})),
])
def test_what_hf_accepts_is_accepted_and_encodes_alike(name, d):
    hf = HFTokenizer.from_str(json.dumps(d))
    ours = Tokenizer.from_hf_dict(d)
    texts = ["abc ab a b c", "cab <s> abcabc </s>", "ba bc"]
    assert [e.ids for e in ours.encode_batch(texts)] == [e.ids for e in hf.encode_batch(texts)]
    some = sorted(ours.model.vocab.values())[:3]
    assert ours.decode(some) == hf.decode(some)


def test_unknown_token_outside_the_vocab_fails_when_needed_as_in_hf():
    d = _tiny({**BPE, "unk_token": "<unk>"})
    hf, ours = HFTokenizer.from_str(json.dumps(d)), Tokenizer.from_hf_dict(d)
    assert ours.encode("abc ab").ids == hf.encode("abc ab").ids
    with pytest.raises(Exception, match="Unk token"):
        hf.encode("abx")
    with pytest.raises(ValueError, match="'x' is not in the vocabulary and neither is the "
                                         "unknown token '<unk>'"):
        ours.encode("abx")


@examples(0.6)
@given(n_vocab=st.integers(0, 6), gap=st.integers(0, 3),
       added=st.lists(st.tuples(st.sampled_from(["a", "b", "<s>", "</s>", "<m>", "abc"]),
                                st.integers(0, 12)), max_size=4))
def test_added_token_ids_refused_exactly_when_hf_reassigns_them(n_vocab, gap, added):
    """HF ignores the ids of added tokens in the file; we accept a file exactly when HF's ids
    are the file's, so both encode alike."""
    letters = ["a", "b", "c", "ab", "abc", "bc"][:n_vocab]
    vocab = {t: i + (gap if i else 0) for i, t in enumerate(letters)}
    model = {**BPE, "vocab": vocab, "merges": []}
    items = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for c, i in added]
    d = _tiny(model, items)
    hf = HFTokenizer.from_str(json.dumps(d))
    hf_agrees = all(hf.token_to_id(c) == i for c, i in added)
    try:
        ours = Tokenizer.from_hf_dict(d)
    except TokcolumnarValueError as e:
        if "no merges" in str(e):  # ("abc" as an added token outside the vocab is fine)
            return
        assert not hf_agrees, str(e)
        return
    assert hf_agrees
    text = " ".join(c for c, _ in added) + " a b"
    assert ours.encode(text).ids == hf.encode(text).ids


def test_vocab_txt_is_read_as_hf_reads_it(tmp_path):
    f = tmp_path / "vocab.txt"
    f.write_bytes("[UNK]\nab \nc\u3000\nd\x1c\ne\rf\n\ng\r\nab\n".encode())
    assert WordPieceModel.from_vocab_txt(f).vocab == models.WordPiece.read_file(str(f))


# -- item 8: side files -------------------------------------------------------------------------
def test_pre_tokenizer_none_skips_merges_txt_with_a_note(tmp_path):
    src = tmp_path / "t.txt"
    lines = ["the cat sat on the mat\n", "the cat ate\n", "a mat, a hat\n"] * 4
    src.write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "o"
    proc = run_cli("train", str(src), "--out", str(out), "--pre-tokenizer", "none",
                   "--vocab-size", "80")
    assert proc.returncode == 0, proc.stderr
    notes = [x for x in proc.stderr.splitlines() if x.startswith("tokcolumnar: note: ")]
    assert len(notes) == 1 and "merges.txt not written" in notes[0]
    assert not (out / "merges.txt").exists() and (out / "vocab.json").exists()
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert set(run["skipped_files"]) == {"merges.txt"}
    merges = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert any(" " in a + b or "\n" in a + b for a, b in merges)  # the reason is real
    hf = HFTokenizer.from_file(str(out / "tokenizer.json"))
    ours = Tokenizer.from_dir(out)
    texts = lines[:3] + ["the hat sat\n", "cat  mat"]
    assert [e.ids for e in ours.encode_batch(texts)] == [e.ids for e in hf.encode_batch(texts)]
    quiet = run_cli("train", str(src), "--out", str(out), "--pre-tokenizer", "none",
                    "--vocab-size", "80", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == ""
    with pytest.warns(TokcolumnarWarning, match="merges.txt not written"):
        tc.train([str(src)], pre_tokenizer="none", vocab_size=80, out_dir=tmp_path / "p")


def test_merges_txt_round_trips_through_hf(tmp_path):
    out = tmp_path / "o"
    tc.train([str(DATA)], out_dir=out, vocab_size=600, special_tokens=["<s>"])
    vocab, merges = models.BPE.read_file(str(out / "vocab.json"), str(out / "merges.txt"))
    tok_json = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    assert vocab == tok_json["vocab"]
    assert merges == [tuple(m) for m in tok_json["merges"]] and len(merges) > 400
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run["skipped_files"] == {}


def test_vocab_txt_written_only_when_exact(tmp_path):
    # U+001C is whitespace to Python but not to HF's reader: kept, and read back exactly
    exact = tc.train(iter(["ab\x1ccd", "xy\x1c", "ab\x1c"] * 3), model="wordpiece",
                     pre_tokenizer="none", vocab_size=40, special_tokens=["[UNK]"],
                     out_dir=tmp_path / "exact")
    assert any(t.endswith("\x1c") for t in exact.vocab.get_column("token").to_list())
    assert models.WordPiece.read_file(str(tmp_path / "exact" / "vocab.txt")) == dict(
        zip(exact.vocab.get_column("token").to_list(), exact.vocab.get_column("id").to_list()))
    # U+3000 at the end of a token is trimmed by HF's reader: vocab.txt is left out
    with pytest.warns(TokcolumnarWarning, match="vocab.txt not written"):
        tc.train(iter(["ab\u3000cd", "xy\u3000", "ab\u3000"] * 3), model="wordpiece",
                 pre_tokenizer="none", vocab_size=40, special_tokens=["[UNK]"],
                 out_dir=tmp_path / "inexact")
    assert not (tmp_path / "inexact" / "vocab.txt").exists()
    run = json.loads((tmp_path / "inexact" / "run.json").read_text(encoding="utf-8"))
    assert "end with whitespace" in run["skipped_files"]["vocab.txt"]
    assert Tokenizer.from_dir(tmp_path / "inexact").encode("ab\u3000").ids
