"""The BERT pipeline's pre-tokenization on code points, for texts dense in CJK ideographs.

With `BertNormalizer(handle_chinese_chars=True)` and `BertPreTokenizer`, every CJK ideograph
becomes a word of its own (the normalizer pads it with spaces, the pre-tokenizer splits
there), and so does every punctuation character; WordPiece gives such a one-character word
its own token when the vocabulary has it, else the unknown token. On Chinese text these are
nearly all the words (~5M of medium/zh.txt's 15 MB, against a few hundred longer words per
MiB): materialising each as a string, hashing and sorting them, and normalizing the whole
text, cost far more than the model. Here the text is read as UTF-8 bytes with NumPy, each
character classed by a per-code-point table (whitespace, a word of its own, or part of a
longer word), and:

* each character that is a word of its own is an *item* whose id comes from a per-code-point
  table built once from the vocabulary (a slot in a small table of the one-character tokens,
  the last slot for the unknown token);
* each run of other characters is an item too, a word materialised as a string, normalized
  (only these go through the normalizer: a word it empties is dropped, as HF drops it) and
  encoded as before (distinct words once, the word cache, the model).

Exactness: the padding only puts spaces around each ideograph, which the split removes, so
splitting with the ideographs as words of their own gives the same words in the same order.
Classing the characters before normalizing holds because the normalizer works character by
character (NFD reorders only combining marks, which never border a word of their own) and
keeps every class: a character part of a word normalizes into such characters only (or
none), whitespace into whitespace, a one-character word into one such character (whose id it
takes). Checked over every code point by tests/encode/test_charsplit.py; the four characters
whose accent stripping gives punctuation (`NORMALIZED_INTO_SPLIT`) send their batch through
the normalizer first (`CharSplit.split`). The whitespace (Unicode White_Space: Rust's
`char::is_whitespace`, the regex crate's `\\s`) and punctuation (`HF_PUNCTUATION`) classes are
HF's. Offsets are not produced here (the path is taken only when they are not requested)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ..buffers import repeat_runs, run_index, string_parts, strings_from_parts, utf8_chars
from ..models.base import Model
from ..models.wordpiece import RUST_WHITESPACE, WordPieceModel
from ..progress import StageTimer
from ..text.normalizers import BertNormalizer, Normalizer
from ..text.pretokenizers import HF_PUNCTUATION, BertPreTokenizer, PreTokenizer
from ..text.unicode_tables import HF_CHINESE_CHARS, HF_CLEAN_REMOVED

# the classes of a code point
PART = 0  # part of a word of several characters
SPACE = 1  # splits words, dropped
ALONE = 2  # a word of its own (punctuation; a CJK ideograph when the normalizer pads it)
COMPLEX = 3  # normalized into characters of another class: the text is normalized first
# characters of no class of their own whose NFD (accent stripping) holds punctuation:
# U+1FEF GREEK VARIA -> "`", U+2260/U+226E/U+226F (not equal, not less, not greater) ->
# "=", "<", ">" and a combining mark (found over every code point, checked by the tests)
NORMALIZED_INTO_SPLIT = (0x1FEF, 0x2260, 0x226E, 0x226F)
# the compatibility ideographs, which NFD maps to unified ones
COMPATIBILITY_IDEOGRAPHS = ((0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
N_CODE_POINTS = 0x110000
# the UTF-8 bytes per character from which a batch takes this path: CJK text (3 bytes per
# ideograph) is above, English (1) and Cyrillic or Greek (at most 2) below, where the
# Polars regex split is faster
MIN_BYTES_PER_CHAR = 2.2


def class_table(chinese: bool) -> np.ndarray:
    """The class (PART, SPACE, ALONE) of every code point, uint8."""
    table = np.full(N_CODE_POINTS, PART, dtype=np.uint8)
    for low, high in HF_PUNCTUATION:
        table[low:high + 1] = ALONE
    if chinese:
        for low, high in HF_CHINESE_CHARS:
            table[low:high + 1] = ALONE
    table[[ord(c) for c in RUST_WHITESPACE]] = SPACE
    return table


@dataclass
class CharItems:
    """A batch's items in order: `words` (the PART runs, as strings), and per item whether it
    is one of them (`is_word`), its segment (`item_seg`), and for the others their slot in
    the one-character table (`alone_slot`); `per_seg` items per segment."""

    words: pl.Series
    is_word: np.ndarray
    alone_slot: np.ndarray
    item_seg: np.ndarray
    per_seg: np.ndarray


@dataclass
class CharSplit:
    """The split and the one-character ids of a BERT pipeline (see the module's docstring).

    Two routes. `split_raw` classes the characters of the text as given (`raw_classes`) and
    normalizes only the longer words; a character whose normalized form would be classed
    otherwise (`NORMALIZED_INTO_SPLIT`, or a one-character word normalized into anything
    but one such character) is COMPLEX, and a batch holding one takes `split`, which classes
    the normalized text (`classes`). `slot` / `raw_slot`: per code point, the index in
    `char_ids` of its token (of its normalized form's, for `raw_slot`), the last index (the
    unknown token) when the vocabulary lacks it."""

    classes: np.ndarray
    slot: np.ndarray
    raw_classes: np.ndarray
    raw_slot: np.ndarray
    char_ids: np.ndarray
    normalizer: BertNormalizer | None  # without the CJK padding
    model: WordPieceModel
    unk_known: bool

    @classmethod
    def build(cls, normalizer: Normalizer | None, pre_tokenizer: PreTokenizer,
              model: Model) -> CharSplit | None:
        """The split for this pipeline, or None when it does not apply (only exactly
        BertNormalizer or none, BertPreTokenizer and WordPiece)."""
        if (type(pre_tokenizer) is not BertPreTokenizer
                or type(model) is not WordPieceModel
                or not (normalizer is None or type(normalizer) is BertNormalizer)):
            return None
        chinese = normalizer is not None and normalizer.handle_chinese_chars
        unpadded = None if normalizer is None else normalizer.without_chinese_padding()
        unk = model.vocab.get(model.unk_token)
        singles = [(ord(t), i) for t, i in model.vocab.items() if len(t) == 1]
        if model.max_input_chars_per_word < 1:  # every word is too long: the unknown token
            singles = []
        char_ids = np.array([i for _, i in singles] + [unk if unk is not None else 0],
                            dtype=np.uint32)
        slot = np.full(N_CODE_POINTS, len(singles), dtype=np.int32)
        slot[[c for c, _ in singles]] = np.arange(len(singles), dtype=np.int32)
        classes = class_table(chinese)
        raw_classes, raw_slot = classes.copy(), slot
        if unpadded is not None:
            raw_classes, raw_slot = _raw_tables(unpadded, classes, slot)
        return cls(classes, slot, raw_classes, raw_slot, char_ids, unpadded, model,
                   unk is not None)

    def worth_it(self, texts: pl.Series) -> bool:
        """Whether this batch is dense enough in CJK ideographs for this path (a cheap
        estimate, from the byte and character counts: see `MIN_BYTES_PER_CHAR`)."""
        n_chars = int(texts.str.len_chars().sum() or 0)
        return n_chars > 0 and int(texts.str.len_bytes().sum() or 0) >= (
            MIN_BYTES_PER_CHAR * n_chars)

    def normalized(self, texts: pl.Series) -> pl.Series:
        """`texts` through the normalizer without its CJK padding."""
        if self.normalizer is None:
            return texts
        return texts.to_frame("t").select(self.normalizer.expr(pl.col("t"))).to_series()

    def split_raw(self, texts: pl.Series, timer: StageTimer) -> CharItems | None:
        """The items of every segment of `texts` as given (not normalized; a null segment, an
        added token's, has none), their words normalized; None when a character needs the
        whole text normalized first (`split`)."""
        with timer.stage("pre-tokenize"):
            found = self._items(texts, self.raw_classes, self.raw_slot)
        if found is None:
            return None
        with timer.stage("normalize"):
            # only the longer words need the normalizer (a few hundred per MiB of Chinese);
            # a word it empties (control characters, marks) is no word, as in HF
            words = self.normalized(found.words)
            empty = (words.str.len_bytes() == 0).to_numpy()
            if not empty.any():
                found.words = words
                return found
            keep = np.ones(len(found.is_word), dtype=bool)
            keep[np.flatnonzero(found.is_word)[empty]] = False
            item_seg = found.item_seg[keep]
            return CharItems(words.filter(pl.Series(~empty)), found.is_word[keep],
                             found.alone_slot, item_seg,
                             np.bincount(item_seg, minlength=len(found.per_seg)).astype(
                                 np.int64))

    def split(self, texts: pl.Series) -> CharItems:
        """The items of every segment of `texts`, normalized without the padding."""
        found = self._items(texts, self.classes, self.slot)
        assert found is not None  # the normalized text holds no COMPLEX character
        return found

    def _items(self, texts: pl.Series, classes: np.ndarray, slot: np.ndarray
               ) -> CharItems | None:
        offsets, data = string_parts(texts)
        # every character's code point and first byte
        code, char_byte = utf8_chars(data)
        if char_byte is None:  # all ASCII
            char_byte = np.arange(len(data) + 1, dtype=np.int64)
        starts = char_byte[:-1]
        cls_ = classes[code]
        if (cls_ == COMPLEX).any():
            return None
        # each segment's first character (segments are consecutive in `data`)
        seg_char = np.searchsorted(starts, offsets)
        n_chars = len(starts)
        first = np.zeros(n_chars + 1, dtype=bool)
        first[seg_char[:-1]] = True  # an empty segment marks its successor's first (or the end)
        part = cls_ == PART
        # a word starts at a PART character whose predecessor is not one, or a segment's first
        prev_part = np.zeros(n_chars, dtype=bool)
        prev_part[1:] = part[:-1]
        word_start = part & (~prev_part | first[:n_chars])
        is_item = word_start | (cls_ == ALONE)
        items = np.flatnonzero(is_item)
        # items per segment: the items before each segment's first character
        per_seg = np.diff(np.searchsorted(items, seg_char)).astype(np.int64)
        is_word = part[items]
        # each word's bytes: from its first character to the next non-PART character or
        # its segment's end
        next_part = np.zeros(n_chars, dtype=bool)
        next_part[:-1] = part[1:]
        word_end = np.flatnonzero(part & (~next_part | first[1:]))
        words = _strings(data, char_byte[items[is_word]], char_byte[word_end + 1])
        alone_slot = slot[code[items[~is_word]]].astype(np.int64)
        if not self.unk_known and (alone_slot == len(self.char_ids) - 1).any():
            self.model.unk_id()  # raises: the vocabulary has no unknown token
        return CharItems(words, is_word, alone_slot, run_index(per_seg), per_seg)

    def table(self, items: CharItems, offsets: np.ndarray, values: np.ndarray,
              word_index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The table of the distinct words' ids (`offsets`, `values`) with the one-character
        tokens appended, and each item's entry in it (`word_index`: each word's entry)."""
        n_table = len(offsets) - 1
        k = len(self.char_ids)
        offsets = np.concatenate([offsets, offsets[-1] + 1 + np.arange(k, dtype=np.int64)])
        values = np.concatenate([values, self.char_ids])
        index = np.empty(len(items.is_word), dtype=np.int64)
        index[items.is_word] = word_index
        index[~items.is_word] = n_table + items.alone_slot
        return offsets, values, index


def _raw_tables(normalizer: BertNormalizer, classes: np.ndarray, slot: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The classes and slots of the characters as given, before `normalizer` (see
    `CharSplit`): a character it deletes (`clean_text`) joins its neighbours (PART); a
    one-character word takes the slot of its normalized form, computed here for those the
    normalizer may change (punctuation and the compatibility ideographs; any other ideograph
    stays itself, checked over every code point by the tests)."""
    raw = classes.copy()
    if normalizer.clean_text:
        for low, high in HF_CLEAN_REMOVED:
            raw[low:high + 1] = PART
    raw[list(NORMALIZED_INTO_SPLIT)] = COMPLEX
    changing = [c for low, high in (*HF_PUNCTUATION, *COMPATIBILITY_IDEOGRAPHS)
                for c in range(low, high + 1) if classes[c] == ALONE]
    forms = pl.Series("t", [chr(c) for c in changing], dtype=pl.String).to_frame().select(
        normalizer.expr(pl.col("t"))).to_series().to_list()
    raw_slot = slot.copy()
    for c, form in zip(changing, forms):
        if len(form) == 1 and classes[ord(form)] == ALONE:
            raw_slot[c] = slot[ord(form)]
        else:  # not a one-character word once normalized: the whole text is normalized
            raw[c] = COMPLEX
    return raw, raw_slot


def _strings(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> pl.Series:
    """The byte ranges [start, end) of `data` as a String Series (one gather of the bytes)."""
    lengths = end - start
    out_offsets = np.zeros(len(start) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    # each output byte: its word's start + its place in the word
    at = repeat_runs(start - out_offsets[:-1], lengths) + np.arange(int(out_offsets[-1]),
                                                                     dtype=np.int64)
    return strings_from_parts("word", out_offsets, data[at])

