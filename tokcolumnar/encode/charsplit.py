"""The BERT pipeline's pre-tokenization on code points, for texts dense in CJK ideographs.

With `BertNormalizer(handle_chinese_chars=True)` and `BertPreTokenizer`, every CJK ideograph
becomes a word of its own (the normalizer pads it with spaces, the pre-tokenizer splits
there), and so does every punctuation character; WordPiece gives such a one-character word
its own token when the vocabulary has it, else the unknown token. On Chinese text these are
most of the words (~5M of medium/zh.txt's 15 MB): materialising each as a string, hashing and
sorting them costs far more than the model. Here the normalized text (without the padding) is
read as UTF-8 bytes with NumPy, each character classed by a per-code-point table (whitespace,
a word of its own, or part of a longer word), and:

* each character that is a word of its own is an *item* whose id comes from a per-code-point
  table built once from the vocabulary (a slot in a small table of the one-character tokens,
  the last slot for the unknown token);
* each run of other characters is an item too, a word materialised as a string and encoded
  as before (distinct words once, the word cache, the model).

Exactness: the padding only puts spaces around each ideograph, which the split removes, so
splitting the unpadded text with the ideographs as words of their own gives the same words in
the same order, provided the normalizer's later steps (NFD, accent stripping, lowercase) keep
an ideograph an ideograph and never make one from another character: checked over every code
point by tests/encode/test_charsplit.py. The whitespace (Unicode White_Space: Rust's
`char::is_whitespace`, the regex crate's `\\s`) and punctuation (`HF_PUNCTUATION`) classes are
HF's. Offsets are not produced here (the path is taken only when they are not requested)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ..models.base import Model, series_from_arrow
from ..models.cache import repeat_runs, run_index
from ..models.wordpiece import RUST_WHITESPACE, WordPieceModel, utf8_parts
from ..text.normalizers import BertNormalizer, Normalizer
from ..text.pretokenizers import HF_PUNCTUATION, BertPreTokenizer, PreTokenizer
from ..text.unicode_tables import HF_CHINESE_CHARS

# the classes of a code point
PART = 0  # part of a word of several characters
SPACE = 1  # splits words, dropped
ALONE = 2  # a word of its own (punctuation; a CJK ideograph when the normalizer pads it)
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
    `classes`: per code point; `slot`: per code point, its token's index in `char_ids`
    (the last index, the unknown token, when the vocabulary lacks it)."""

    classes: np.ndarray
    slot: np.ndarray
    char_ids: np.ndarray
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
        unk = model.vocab.get(model.unk_token)
        singles = [(ord(t), i) for t, i in model.vocab.items() if len(t) == 1]
        if model.max_input_chars_per_word < 1:  # every word is too long: the unknown token
            singles = []
        char_ids = np.array([i for _, i in singles] + [unk if unk is not None else 0],
                            dtype=np.uint32)
        slot = np.full(N_CODE_POINTS, len(singles), dtype=np.int32)
        slot[[c for c, _ in singles]] = np.arange(len(singles), dtype=np.int32)
        return cls(class_table(chinese), slot, char_ids, model, unk is not None)

    def unpadded(self, normalizer: Normalizer | None) -> Normalizer | None:
        """The normalizer to run before `split`: without the CJK padding (the split isolates
        the ideographs itself)."""
        if isinstance(normalizer, BertNormalizer) and normalizer.handle_chinese_chars:
            return normalizer.without_chinese_padding()
        return normalizer

    def worth_it(self, texts: pl.Series) -> bool:
        """Whether this batch is dense enough in CJK ideographs for this path (a cheap
        estimate, from the byte and character counts: see `MIN_BYTES_PER_CHAR`)."""
        n_chars = int(texts.str.len_chars().sum() or 0)
        return n_chars > 0 and int(texts.str.len_bytes().sum() or 0) >= (
            MIN_BYTES_PER_CHAR * n_chars)

    def split(self, texts: pl.Series) -> CharItems:
        """The items of every segment of `texts` (normalized without the padding; a null
        segment, an added token's, has none)."""
        data, offsets = utf8_parts(texts)
        n_seg = len(offsets) - 1
        # the first byte of every character, and its code point
        starts = np.flatnonzero((data & 0xC0) != 0x80)
        lead = data[starts].astype(np.int32)
        code = lead.copy()
        multi = np.flatnonzero(lead >= 0x80)
        if len(multi):
            at = starts[multi]
            b0 = lead[multi]
            width = 2 + (b0 >= 0xE0) + (b0 >= 0xF0)
            # each continuation byte adds 6 bits; bytes past the character's end are masked
            # off by its width (the data is valid UTF-8)
            cont = [np.where(width > k, data[np.minimum(at + k, len(data) - 1)].astype(np.int32)
                             & 0x3F, 0) for k in (1, 2, 3)]
            value = np.where(width == 2, b0 & 0x1F, np.where(width == 3, b0 & 0x0F, b0 & 0x07))
            for k in (1, 2, 3):
                value = np.where(width > k, (value << 6) | cont[k - 1], value)
            code[multi] = value
        cls_ = self.classes[code]
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
        # items per segment: from the running count at each segment's first character
        before = np.zeros(n_chars + 1, dtype=np.int64)
        np.cumsum(is_item, out=before[1:])
        per_seg = np.diff(before[seg_char]).astype(np.int64)
        item_seg = run_index(per_seg)
        is_word = part[items]
        # each word's bytes: from its first character to the next non-PART character or
        # its segment's end
        next_part = np.zeros(n_chars, dtype=bool)
        next_part[:-1] = part[1:]
        word_end = np.flatnonzero(part & (~next_part | first[1:]))
        char_byte = np.append(starts, len(data))
        byte_start = char_byte[items[is_word]]
        byte_end = char_byte[word_end + 1]
        words = _strings(data, byte_start, byte_end)
        alone = items[~is_word]
        alone_slot = self.slot[code[alone]].astype(np.int64)
        if not self.unk_known and (alone_slot == len(self.char_ids) - 1).any():
            self.model.unk_id()  # raises: the vocabulary has no unknown token
        assert len(item_seg) == len(items) and n_seg == len(per_seg)
        return CharItems(words, is_word, alone_slot, item_seg, per_seg)

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


def _strings(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> pl.Series:
    """The byte ranges [start, end) of `data` as a String Series (one gather of the bytes)."""
    import pyarrow as pa  # deferred: only encoding needs the Arrow buffers

    lengths = end - start
    out_offsets = np.zeros(len(start) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    # each output byte: its word's start + its place in the word
    at = repeat_runs(start - out_offsets[:-1], lengths) + np.arange(int(out_offsets[-1]),
                                                                     dtype=np.int64)
    chars = data[at]
    return series_from_arrow("word", pa.LargeStringArray.from_buffers(
        len(start), pa.py_buffer(out_offsets), pa.py_buffer(chars)))

