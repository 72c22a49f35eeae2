"""The code-point split of BERT pipelines (`encode.charsplit`) against HF: ids and word ids
identical on random text mixing CJK ideographs, punctuation, accents, whitespace kinds,
control and unknown characters, added tokens; its classes and the normalizer invariance it
relies on checked over every code point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, normalizers, pre_tokenizers, processors

from tests.support.corpora import corpus, small_scripts
from tokcolumnar import Tokenizer, train
from tokcolumnar.encode.charsplit import (
    ALONE,
    COMPATIBILITY_IDEOGRAPHS,
    COMPLEX,
    NORMALIZED_INTO_SPLIT,
    PART,
    SPACE,
    CharSplit,
    class_table,
)
from tokcolumnar.errors import TokcolumnarError
from tokcolumnar.text.normalizers import BertNormalizer
from tokcolumnar.text.unicode_tables import HF_CHINESE_CHARS, class_body

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# ideographs (BMP, compatibility, extension B), some in the vocabulary and some not
CJK = ["中", "国", "人", "的", "一", "是", "不", "了", "龍", "丽", "豈", "𠀀", "𪜀", "㐀", "鿿"]
PUNCT = [",", ".", "!", "'", "(", "，", "。", "「", "」", "、", "？", "《", "·", "¿", "—"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2000", "\u2028", "\x0b",
          "\x85"]
OTHER = ["a", "B", "ab", "abc", "xyz", "Hello", "ÉCOLE", "é", "e\u0301", "naïve", "Σ", "İ",
         "あ", "カタカナ", "한국", "Ａ", "１２", "42", "😀", "\x00", "\x07", "\ufffd", "\u0301",
         "ﬁ", "ß", "Ω", "\u200b", "x" * 12, "\u0316\u0301", "Å", "\u037e", "\u0387"]
# characters normalized into punctuation: the batch is normalized before it is split
INTO_SPLIT = ["\u1fef", "\u2260", "a\u226e", "\u226f"]
ADDED = ["[MASK]", "[CLS]"]
CHUNKS = CJK + PUNCT + SPACES + OTHER + ADDED + INTO_SPLIT


def vocabulary() -> dict[str, int]:
    """Specials, most one-character tokens (some ideographs and marks left out: [UNK]),
    continuation pieces and a few words."""
    tokens = list(SPECIALS)
    singles = ["中", "国", "的", "一", "龍", "丽", "𠀀", "㐀", ",", ".", "!", "'", "，", "。",
               "「", "、", "·", "a", "b", "c", "x", "y", "z", "e", "h", "l", "o", "é", "σ",
               "あ", "カ", "タ", "ナ", "１", "2", "4", "ß", "ω", "Ω", "ｆ"]
    tokens += singles
    tokens += ["##" + c for c in "abcxyzehlo2"] + ["##タ", "##カ", "##ナ", "##２"]
    tokens += ["hello", "##llo", "ab", "abc", "xyz", "##xyz", "中国", "naive", "ecole"]
    return {t: i for i, t in enumerate(dict.fromkeys(tokens))}


def pair(lowercase: bool = True, strip_accents: bool | None = None,
         handle_chinese_chars: bool = True, clean_text: bool = True,
         max_input_chars_per_word: int = 100, vocab: dict[str, int] | None = None
         ) -> tuple[Tokenizer, HFTokenizer]:
    vocab = vocab or vocabulary()
    hf = HFTokenizer(models.WordPiece(vocab, unk_token="[UNK]",
                                      max_input_chars_per_word=max_input_chars_per_word))
    hf.normalizer = normalizers.BertNormalizer(
        clean_text=clean_text, handle_chinese_chars=handle_chinese_chars,
        strip_accents=strip_accents, lowercase=lowercase)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]),
                                                  ("[CLS]", vocab["[CLS]"]))
    hf.add_special_tokens(SPECIALS)
    ours = Tokenizer.from_hf_dict(json.loads(hf.to_str()))
    return ours, hf


@contextmanager
def forced_split() -> Iterator[list[int]]:
    """Every batch through the code-point split (whatever its density); the splits' sizes."""
    calls: list[int] = []
    items = CharSplit._items

    def counted(self, texts, classes, slot):
        calls.append(len(texts))
        return items(self, texts, classes, slot)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CharSplit, "worth_it", lambda self, texts: True)
        mp.setattr(CharSplit, "_items", counted)
        yield calls


@pytest.fixture
def forced():
    with forced_split() as calls:
        yield calls


def assert_same(ours: Tokenizer, hf: HFTokenizer, texts: list[str]) -> None:
    got = ours.encode_ids(pl.Series(texts, dtype=pl.String))
    want = hf.encode_batch(texts)
    assert got.get_column("ids").to_list() == [e.ids for e in want]
    assert got.get_column("word_ids").to_list() == [e.word_ids for e in want]


texts_strategy = st.lists(st.lists(st.sampled_from(CHUNKS), max_size=30).map("".join),
                          min_size=1, max_size=6)

CONFIGS = [
    {},
    {"lowercase": False},
    {"lowercase": False, "strip_accents": True},
    {"strip_accents": False},
    {"clean_text": False},
    {"handle_chinese_chars": False},
    {"max_input_chars_per_word": 3},
    {"max_input_chars_per_word": 0},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in
                                                                   c.items()) or "default")
@given(texts=texts_strategy)
def test_ids_and_word_ids_match_hf(config, texts):
    ours, hf = pair(**config)
    assert ours.char_split() is not None
    with forced_split() as calls:
        assert_same(ours, hf, texts)
    assert calls  # the code-point split did run


def test_chinese_lines_take_the_split_and_match_hf(monkeypatch):
    """Unforced: CJK-dense batches take the split, English ones do not; both match HF."""
    calls = []
    items = CharSplit._items
    monkeypatch.setattr(CharSplit, "_items",
                        lambda self, *a: calls.append(1) or items(self, *a))
    ours, hf = pair()
    zh = ["中国的人，一是不了。", "「龍」丽豈𠀀 abc 42！", "我们中国的龍"]
    assert_same(ours, hf, zh)
    assert calls
    calls.clear()
    en = ["Hello, world! naïve ÉCOLE", "xyz abc", "a 中 b"]
    assert_same(ours, hf, en)
    assert not calls


def test_unknown_token_missing_is_the_models_error(forced):
    vocab = {t: i for i, t in enumerate(["[CLS]", "[SEP]", "[UNK]", "中", "a"])}
    ours, hf = pair(vocab=vocab)
    ours.model.vocab.pop("[UNK]")  # a vocabulary without its unknown token (HF refuses it)
    ours = Tokenizer(ours.model, ours.normalizer, ours.pre_tokenizer)
    assert ours.encode_ids(["中 a 中"]).get_column("ids").to_list() == [[3, 4, 3]]
    with pytest.raises(TokcolumnarError, match="unknown token"):
        ours.encode_ids(["中国"])


def test_other_pipelines_have_no_split():
    ours, _ = pair()
    other = Tokenizer(ours.model, BertNormalizer(), None)  # not BertPreTokenizer
    assert other.char_split() is None


def test_offsets_do_not_take_the_split(forced):
    ours, hf = pair()
    texts = ["中国的人，一是不了。", "naïve 中"]
    got = ours.encode_batch(texts)
    want = hf.encode_batch(texts)
    assert [e.offsets for e in got] == [e.offsets for e in want]
    assert [e.ids for e in got] == [e.ids for e in want]
    assert not forced


# -- over every code point ------------------------------------------------------------------
def all_code_points() -> tuple[np.ndarray, pl.Series]:
    cps = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF])
    return cps, pl.Series("t", [chr(c) for c in cps], dtype=pl.String)


@pytest.mark.slow
def test_classes_are_hfs_over_every_code_point():
    """SPACE is the regex crate's `\\s` (what BERT_PATTERN drops), ALONE the pattern's
    one-character pieces plus the ideographs."""
    cps, chars = all_code_points()
    table = class_table(chinese=True)
    space = chars.str.contains(r"^\s$").to_numpy()
    assert np.array_equal(table[cps] == SPACE, space)
    from tokcolumnar.text.pretokenizers import HF_PUNCTUATION
    punct = chars.str.contains(f"^[{class_body(HF_PUNCTUATION)}]$").to_numpy()
    chinese = chars.str.contains(f"^[{class_body(HF_CHINESE_CHARS)}]$").to_numpy()
    assert np.array_equal(table[cps] == ALONE, punct | chinese)
    assert np.array_equal(class_table(chinese=False)[cps] == ALONE, punct)


@pytest.mark.slow
@pytest.mark.parametrize("config", [{}, {"lowercase": False, "strip_accents": False},
                                    {"lowercase": False, "strip_accents": True},
                                    {"clean_text": False}])
def test_normalizer_keeps_ideographs_apart_over_every_code_point(config):
    """What skipping the padding relies on: after the other steps an ideograph gives only
    ideographs and any other character none."""
    _, chars = all_code_points()
    chinese_re = f"[{class_body(HF_CHINESE_CHARS)}]"
    norm = BertNormalizer(handle_chinese_chars=False, **config)
    out = chars.to_frame().select(norm.expr(pl.col("t"))).to_series()
    was = chars.str.contains(chinese_re).to_numpy()
    has = out.str.contains(chinese_re).to_numpy()
    has_other = out.str.contains(f"[^{class_body(HF_CHINESE_CHARS)}]").to_numpy()
    assert not (was & has_other).any()
    assert (has[was]).all()
    assert not (has & ~was).any()


def test_characters_normalized_into_punctuation_take_the_normalized_route(monkeypatch):
    calls = []
    split = CharSplit.split
    monkeypatch.setattr(CharSplit, "split", lambda self, t: calls.append(1) or split(self, t))
    ours, hf = pair()
    assert_same(ours, hf, ["中国的人", "一是不了"])
    assert not calls
    assert_same(ours, hf, ["中\u2260国的人", "a\u1fefb 一是不了"])
    assert calls


@pytest.mark.slow
@pytest.mark.parametrize("config", [{}, {"lowercase": False, "strip_accents": False},
                                    {"lowercase": False, "strip_accents": True},
                                    {"strip_accents": False}, {"clean_text": False},
                                    {"clean_text": False, "handle_chinese_chars": False}])
def test_raw_classes_hold_after_normalization_over_every_code_point(config):
    """What classing the text before normalizing it relies on: a PART character normalizes
    into PART characters only (or nothing), a SPACE one into one whitespace character, an
    ALONE one into the one character whose slot it takes; the exceptions are exactly the
    COMPLEX ones, and an ideograph outside the compatibility blocks stays itself."""
    ours, _ = pair(**config)
    chars = ours.char_split()
    cps, text = all_code_points()
    forms = chars.normalized(text).to_list()
    post = chars.classes
    raw = chars.raw_classes[cps]
    wrong = []
    for c, k, form in zip(cps.tolist(), raw.tolist(), forms):
        got = [int(post[ord(x)]) for x in form]
        if k == PART:
            ok = all(g == PART for g in got)
        elif k == SPACE:
            ok = got == [SPACE]
        elif k == ALONE:
            ok = got == [ALONE] and chars.raw_slot[c] == chars.slot[ord(form)]
        else:
            ok = False  # COMPLEX: must be needed
        if not ok:
            wrong.append(c)
    complex_ = set(cps[raw == COMPLEX].tolist())
    needed = set(wrong) - complex_
    assert not needed
    if chars.normalizer is not None and chars.normalizer.lowercase is not False:
        # with accent stripping (NFD) every COMPLEX character is needed
        strip = (chars.normalizer.strip_accents if chars.normalizer.strip_accents is not None
                 else chars.normalizer.lowercase)
        if strip:
            assert set(wrong) == complex_ == set(NORMALIZED_INTO_SPLIT)
    unified = np.zeros(0x110000, dtype=bool)
    for low, high in HF_CHINESE_CHARS:
        unified[low:high + 1] = True
    for low, high in COMPATIBILITY_IDEOGRAPHS:
        unified[low:high + 1] = False
    for c, form in zip(cps.tolist(), forms):
        if unified[c]:
            assert form == chr(c)


def test_replacing_a_component_remakes_the_split():
    ours, hf = pair()
    assert ours.char_split() is not None
    ours.normalizer = BertNormalizer(lowercase=False)
    hf.normalizer = normalizers.BertNormalizer(lowercase=False)
    assert ours.char_split().normalizer == BertNormalizer(lowercase=False,
                                                          handle_chinese_chars=False)
    with forced_split() as calls:
        assert_same(ours, hf, ["Hello 中国 ÉCOLE"])
    assert calls


@pytest.mark.corpus
@pytest.mark.parametrize("name", small_scripts("zh_hongloumeng_300k.txt"))
def test_every_line_of_the_small_corpora_matches_hf(tmp_path, name):
    """The code-point split (forced on every batch, whatever its language) on real text: a
    bert-preset tokenizer trained on the file gives HF's ids and word ids on every line."""
    path = corpus(f"small/{name}")
    # an alphabet of 1,000 characters: the rarer ones (and their words) are [UNK]
    train([str(path)], out_dir=tmp_path / "o", preset="bert", vocab_size=3000,
          limit_alphabet=1000)
    ours = Tokenizer.load(tmp_path / "o")
    hf = HFTokenizer.from_file(str(tmp_path / "o" / "tokenizer.json"))
    lines = path.read_text(encoding="utf-8").splitlines()
    with forced_split() as calls:
        assert_same(ours, hf, lines)
    assert calls
