"""tokenizer.json files built with HF's own classes the way Llama 3's, Qwen2's and GPT-4(o)'s
HF ports are (`Sequence[Split(Regex(p), "isolated"), ByteLevel(use_regex=False)]`, the
`ByteLevel` + `TemplateProcessing` post-processor of Llama 3), trained by HF: our encoder (and
`tokcolumnar encode`) gives HF's ids and offsets on every line."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from tokenizers import Regex, decoders, models, processors, trainers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import pre_tokenizers as hfp

from tests.support.cli import run_cli
from tests.support.corpora import MEDIUM, MISSING, corpus, small_scripts
from tests.support.hf_text import encoded_rows
from tokcolumnar import Tokenizer
from tokcolumnar.text.patterns import PATTERNS
from tokcolumnar.text.pretokenizers import PatternByteLevel

NAMES = ("cl100k", "o200k", "qwen2")
#: A user's regex with look-ahead (tests/training/test_llm_patterns.py)
LOOKAHEAD = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
             r"|\p{N}{1,2}(?=(?:\p{N}{2})*(?!\p{N}))"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BOS = "<|begin_of_text|>"


def hf_llm_tokenizer(path: Path, name: str, out: Path, vocab_size: int = 8000) -> HFTokenizer:
    tok = HFTokenizer(models.BPE())
    regex = PATTERNS[name].regex if name in PATTERNS else name  # a named pattern, or a regex
    tok.pre_tokenizer = hfp.Sequence([hfp.Split(Regex(regex), "isolated"),
                                      hfp.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                      special_tokens=[(BOS, 0)])])
    tok.train([str(path)], trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=[BOS],
        initial_alphabet=hfp.ByteLevel.alphabet()))
    tok.save(str(out))
    return tok


def check_encodes_as_hf(name: str, path: Path, tmp: Path, limit: int | None = None) -> None:
    hf = hf_llm_tokenizer(path, name, tmp / "tokenizer.json")
    ours = Tokenizer.from_file(tmp / "tokenizer.json")
    assert isinstance(ours.pre_tokenizer, PatternByteLevel) or name not in PATTERNS
    lines = encoded_rows(path)[:limit]
    got, want = ours.encode_batch(lines), hf.encode_batch(lines)
    bad = [i for i, (a, b) in enumerate(zip(got, want))
           if (a.ids, a.offsets) != (b.ids, b.offsets)]
    assert not bad, f"line {bad[0]}: {lines[bad[0]]!r}"
    # the columnar path of `tokcolumnar encode`
    ids = ours.encode_ids(lines).get_column("ids").to_list()
    assert ids == [e.ids for e in want]


@pytest.mark.corpus
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("file", small_scripts("udhr_multiscript.txt"))
def test_small_corpora_encode_as_hf(name, file, tmp_path):
    check_encodes_as_hf(name, corpus(f"small/{file}"), tmp_path)


@pytest.mark.corpus
@pytest.mark.parametrize("file", small_scripts("udhr_multiscript.txt"))
def test_small_corpora_encode_as_hf_with_a_lookahead_regex(file, tmp_path):
    """An HF-made tokenizer.json whose Split has a user's regex with look-ahead (run by
    Python's engine, `text.backtracking`): HF's ids and offsets on every line."""
    check_encodes_as_hf(LOOKAHEAD, corpus(f"small/{file}"), tmp_path)


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", [*NAMES, LOOKAHEAD])
@pytest.mark.parametrize("file", [m for m in MEDIUM if m != MISSING])
def test_medium_corpora_encode_as_hf(name, file, tmp_path):
    if not os.environ.get("TOKCOLUMNAR_SLOW"):
        pytest.skip("the medium corpora against HF take ~20 minutes in all (CI's "
                    "budget); set TOKCOLUMNAR_SLOW=1")
    check_encodes_as_hf(name, corpus(f"medium/{file}"), tmp_path)  # every line


@pytest.mark.corpus
def test_cli_encode_with_an_hf_llama3_style_file(tmp_path):
    """`tokcolumnar encode --tokenizer tokenizer.json` on such a file (it used to stop with
    "look-around and atomic groups are not supported")."""
    path = corpus("small/en_taylorswift_wiki.txt")
    hf = hf_llm_tokenizer(path, "cl100k", tmp_path / "tokenizer.json")
    out = tmp_path / "ids.parquet"
    proc = run_cli("encode", str(path), "--tokenizer", str(tmp_path / "tokenizer.json"),
                   "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    got = pl.read_parquet(out).get_column("ids").to_list()
    assert got == [e.ids for e in hf.encode_batch(encoded_rows(path))]


@pytest.mark.parametrize("byte_level", [True, False])
def test_ignore_merges_as_hf(byte_level, tmp_path):
    """HF's `ignore_merges` (Llama 3's tokenizer.json, transformers' TikTokenConverter): a word
    that is a token is that token, though the merges make something else of it ("abc" here:
    the merges stop at a + bc). Ids, offsets and the option written back."""
    from tokcolumnar.text.bytelevel import BYTE_ALPHABET

    alphabet = list(BYTE_ALPHABET) if byte_level else list("abcx")
    vocab = {c: i for i, c in enumerate(alphabet)}
    for t in ("bc", "ab", "abc", "Ġabc") if byte_level else ("bc", "ab", "abc"):
        vocab[t] = len(vocab)
    merges = [("b", "c"), ("a", "b"), ("ab", "c"), ("Ġ", "abc")][:4 if byte_level else 3]
    lines = ["abc abc xabc", "abcabc", " abc", "", "ab c abc"]
    for ignore in (False, True):
        hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore))
        if byte_level:
            hf.pre_tokenizer = hfp.Sequence([
                hfp.Split(Regex(PATTERNS["cl100k"].regex), "isolated"),
                hfp.ByteLevel(add_prefix_space=False, use_regex=False)])
            hf.decoder = decoders.ByteLevel()
        else:
            hf.pre_tokenizer = hfp.Whitespace()
        hf.save(str(tmp_path / "t.json"))
        ours = Tokenizer.from_file(tmp_path / "t.json")
        got, want = ours.encode_batch(lines), hf.encode_batch(lines)
        assert [(e.ids, e.offsets) for e in got] == [(e.ids, e.offsets) for e in want]
        assert ours.encode_ids(lines).get_column("ids").to_list() == [e.ids for e in want]
        assert ours.to_dict()["model"].get("ignore_merges", False) is ignore
    assert want[0].ids[0] == vocab["abc"]  # the option mattered
