"""Byte-level BPE with today's LLM patterns (`--pattern cl100k|o200k|qwen2`) against HF:
merges and vocabulary identical to HF's `BpeTrainer` behind `Split(Regex(p), "isolated")` +
`ByteLevel(add_prefix_space=False, use_regex=False)` with the 256 bytes as initial alphabet,
and HF loading our tokenizer.json, and tiktoken with our tokenizer.tiktoken and the same
pattern, encode every line to our ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from tests.support.corpora import MEDIUM, MISSING, corpus, small_scripts, small_tiered
from tests.support.markers import with_name
from tests.support.tiktoken_check import check_tiktoken_outputs
from tokcolumnar import Tokenizer, TrainConfig, train
from tokcolumnar.text.bytelevel import BYTE_ALPHABET
from tokcolumnar.text.patterns import PATTERNS
from tokcolumnar.text.pretokenizers import PatternByteLevel

NAMES = ("cl100k", "o200k", "qwen2")


def hf_pattern_bpe(path: Path, regex: str, vocab_size: int) -> HFTokenizer:
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train([str(path)], trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


#: A user's regex with look-ahead (run by Python's engine, `text.backtracking`): cl100k's, with
#: digits grouped in twos from the right (`1234567` -> `1`, `23`, `45`, `67`).
LOOKAHEAD = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
             r"|\p{N}{1,2}(?=(?:\p{N}{2})*(?!\p{N}))"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def check_pattern(name: str, path: Path, tmp: Path, encode_lines: int | None = None) -> None:
    """`name`: a named pattern, or a regex."""
    out = tmp / "ours"
    train([str(path)], out_dir=out, pattern=name, vocab_size=30000,
          initial_alphabet=list(BYTE_ALPHABET))
    hf = hf_pattern_bpe(path, PATTERNS[name].regex if name in PATTERNS else name, 30000)
    (tmp / "hf").mkdir()
    hf.model.save(str(tmp / "hf"))
    assert (out / "merges.txt").read_bytes() == (tmp / "hf" / "merges.txt").read_bytes()
    assert json.loads((out / "vocab.json").read_text(encoding="utf-8")) == hf.get_vocab()
    # HF reads our tokenizer.json (the Sequence above) and encodes as we do
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:encode_lines]
    ours = Tokenizer.from_dir(out)
    assert isinstance(ours.pre_tokenizer, PatternByteLevel) or name not in PATTERNS
    got = ours.encode_ids(lines).get_column("ids").to_list()
    want = [e.ids for e in HFTokenizer.from_file(str(out / "tokenizer.json")).encode_batch(lines)]
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert len(got) == len(want) and not bad, f"line {bad[:1]}"
    assert all(ours.decode(ids) == line for ids, line in zip(got, lines))
    # tiktoken with our tokenizer.tiktoken and the same pattern: the same ids on every line
    check_tiktoken_outputs(out, path, PATTERNS[name].regex if name in PATTERNS else name, {},
                           encode_lines)


# cl100k (GPT-4's, Llama 3's) on every small corpus; o200k and qwen2 (cl100k's split with one
# digit a piece) on those of other scripts in the full run, on every one with TOKCOLUMNAR_SLOW=1
@pytest.mark.corpus
@pytest.mark.parametrize("name,corpus_name", [
    *with_name("cl100k", small_tiered("en_taylorswift_wiki.txt")),
    *with_name("o200k", small_scripts("en_taylorswift_wiki.txt")),
    *with_name("qwen2", small_scripts("en_taylorswift_wiki.txt"))])
def test_small_identical_to_hf(name, corpus_name, tmp_path):
    check_pattern(name, corpus(f"small/{corpus_name}"), tmp_path)


@pytest.mark.corpus
@pytest.mark.parametrize("corpus_name", small_tiered("en_taylorswift_wiki.txt"))
def test_small_custom_lookahead_identical_to_hf_and_tiktoken(corpus_name, tmp_path):
    """A regex with look-ahead: HF, and tiktoken (whose engine has look-around) with our
    tokenizer.tiktoken and the same regex (`check_pattern`)."""
    check_pattern(LOOKAHEAD, corpus(f"small/{corpus_name}"), tmp_path)


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("name", [*NAMES, LOOKAHEAD])
@pytest.mark.parametrize("lang", [m for m in MEDIUM if m != MISSING])
def test_medium_identical_to_hf(name, lang, tmp_path):
    if not os.environ.get("TOKCOLUMNAR_SLOW"):
        pytest.skip("the medium corpora against HF take ~20 minutes in all (CI's "
                    "budget); set TOKCOLUMNAR_SLOW=1")
    check_pattern(name, corpus(f"medium/{lang}"), tmp_path, encode_lines=20000)


def test_pattern_option_rules():
    assert TrainConfig(pattern="llama3").pattern == "cl100k"
    assert TrainConfig(pattern="llama3").pre_tokenizer == "byte-level"
    assert TrainConfig(pattern=PATTERNS["o200k"].regex).pattern == "o200k"
    assert TrainConfig(pre_tokenizer="byte-level").pattern == "gpt2"
    assert TrainConfig().pattern is None
    with pytest.raises(ValueError, match="--pattern applies to --pre-tokenizer byte-level"):
        TrainConfig(pattern="cl100k", pre_tokenizer="whitespace")
    with pytest.raises(ValueError, match="fixes --pattern gpt2"):
        TrainConfig(pattern="cl100k", preset="gpt2")
    with pytest.raises(ValueError, match="Polars engine"):
        TrainConfig(pattern="qwen2", engine="duckdb")
    with pytest.raises(ValueError, match="unknown pattern 'gpt5'"):  # a name, misspelt
        TrainConfig(pattern="gpt5")


CUSTOM = r"\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+"  # no look-around; leaves nothing unmatched


@pytest.mark.corpus
@pytest.mark.parametrize("regex", [CUSTOM, r"[\p{L}']+| ?\p{N}{1,2}"])  # the second has gaps
def test_custom_regex_without_look_around_identical_to_hf(regex, tmp_path):
    """A user's regex without look-around: HF's Split run by Polars' engine, exact."""
    path = corpus("small/en_taylorswift_wiki.txt")
    out = tmp_path / "ours"
    train([str(path)], out_dir=out, pattern=regex, vocab_size=5000,
          initial_alphabet=list(BYTE_ALPHABET))
    hf = hf_pattern_bpe(path, regex, 5000)
    (tmp_path / "hf").mkdir()
    hf.model.save(str(tmp_path / "hf"))
    assert (out / "merges.txt").read_bytes() == (tmp_path / "hf" / "merges.txt").read_bytes()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    got = Tokenizer.from_dir(out).encode_ids(lines).get_column("ids").to_list()
    want = [e.ids for e in HFTokenizer.from_file(str(out / "tokenizer.json")).encode_batch(lines)]
    assert got == want


def test_custom_regex_rules():
    assert TrainConfig(pattern=CUSTOM).pattern == CUSTOM
    assert TrainConfig(pattern=LOOKAHEAD).pattern == LOOKAHEAD  # Python's engine runs it
    with pytest.raises(ValueError, match=r"^--pattern: regex .*: \\k is not supported"):
        TrainConfig(pattern=r"(?<q>')\p{L}+\k<q>|\s+")
    with pytest.raises(ValueError, match="^--pattern: invalid regex '\\[a': [^\n]*$"):
        TrainConfig(pattern="[a")
