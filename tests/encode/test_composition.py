"""Offsets through NFC and NFKC (`encode/composition.py`): each normalized character is aligned
to the original character HF's alignment crate aligns it to, on random text full of combining
marks, decompositions and Hangul; and a Qwen2-style tokenizer.json (NFC, built and trained by
HF) encodes to HF's ids and offsets on the corpora and on such text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from tests.support.corpora import corpus, small_scripts
from tests.support.hf_text import NORM_DIFF, read_lines, text_strategy
from tokcolumnar import Tokenizer
from tokcolumnar.encode.composition import composed_counts
from tokcolumnar.text.patterns import PATTERNS

# starters that compose, marks of several classes (blocked and not), singletons, characters
# whose NFC is two characters (U+0344, U+0F73), compatibility ones (NFKC), Hangul jamo
COMPOSING = (list("aeiouAEOUnNcCsSkKyY가각 ") + [
    "\u0301", "\u0300", "\u0316", "\u0327", "\u0308", "\u0344", "\u0340", "\u0343", "\u0345",
    "\u05b0", "\u0e33", "\ufb01", "\u2126", "\u212b", "\u1e9b", "\u0323", "\u0307", "\u3099",
    "\u304b", "\u30ab", "\u00c5", "\u00e9", "\u0958", "\u0915", "\u093c", "\u1f00", "\u0313",
    "\u0f73", "\u0f71", "\u0f72", "\u0f80", "\u1100", "\u1161", "\u11a8", "\u00bd", "\u2460"])
MARKED = st.lists(st.sampled_from(COMPOSING), min_size=1, max_size=12).map("".join)
SAFE = text_strategy(exclude=NORM_DIFF)  # HF's older Unicode tables aside


def hf_alignment(text: str, compat: bool) -> list[tuple[int, int]]:
    """Each normalized character's original span, as HF aligns it."""
    tok = HFTokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = normalizers.NFKC() if compat else normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"(?m:.)|\n"), "isolated")
    return tok.encode(text).offsets


@pytest.mark.parametrize("compat", [False, True])
@given(text=st.one_of(MARKED, SAFE))
def test_alignment_is_hfs(compat, text):
    counts = composed_counts(text, compat)
    ours = [(i, i + 1) for i, k in enumerate(counts.tolist()) for _ in range(k)]
    assert ours == hf_alignment(text, compat)


@pytest.fixture(scope="module")
def qwen2_style(tmp_path_factory):
    """A tokenizer.json as Qwen2's: NFC, the qwen2 split then byte-level, trained by HF."""
    tok = HFTokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS["qwen2"].regex), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train([str(corpus("small/en_botchan.txt")), str(corpus("small/ru_pushkin_300k.txt"))],
              trainers.BpeTrainer(vocab_size=3000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("qwen2") / "tokenizer.json"
    tok.save(str(path))
    return path


def assert_encodes_as_hf(path, texts):
    hf = HFTokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    got, want = ours.encode_batch(texts), hf.encode_batch(texts)
    for text, a, b in zip(texts, got, want):
        assert (a.ids, a.offsets) == (b.ids, b.offsets), text


@pytest.mark.corpus
@given(texts=st.lists(st.one_of(MARKED, SAFE), min_size=1, max_size=6))
def test_qwen2_style_offsets_on_marked_text(qwen2_style, texts):
    assert_encodes_as_hf(qwen2_style, texts)


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("udhr_multiscript.txt"))
def test_qwen2_style_offsets_on_the_corpora(qwen2_style, name):
    assert_encodes_as_hf(qwen2_style, list(read_lines(str(corpus(f"small/{name}")))))
