"""Token offsets: each token's character span (start, end) in the original text, as HF's
`Encoding.offsets` (with `OffsetType::Char`), computed columnar for a whole batch.

HF follows every character through the pipeline with an alignment; here the same spans come
from three tables, each built once per batch with Polars and NumPy:

1. normalization (`NormAlignment`): with a normalizer that treats every character on its own
   (`Normalizer.char_local`: BERT's, lowercase, NFD/NFKD, strip accents), original character i
   becomes k_i normalized characters; normalized position p belongs to the original character
   whose run [sum k_<i, sum k_<=i) holds it (HF aligns inserted and decomposed characters to
   the character they come from). k is looked up per code point in a table kept across
   batches (`CharTable`); the characters are read as code points from the UTF-8 buffer;
2. pre-tokenization (`piece_starts`): the pieces are substrings of the normalized text, in
   order; a pre-tokenizer that drops characters drops exactly one class of them
   (`PreTokenizer.dropped_chars`, e.g. whitespace), so piece j starts at the position of the
   (sum of the lengths of pieces < j)-th kept character of its text. ByteLevel's
   `add_prefix_space` and Metaspace's prepended replacement put one character before the
   text: HF aligns it to the first one;
3. the model (`word_spans`): per distinct word, each token's span in bytes of the word as HF's
   `Word` counts its symbols: the token's string without the continuing-subword prefix /
   end-of-word suffix (with ByteLevel, one model character per byte), summed along the word;
   an unknown token counts the character it replaces (BPE) or the whole word (WordPiece); a
   character BPE drops (no unknown token) counts nothing, which shifts the spans after it as
   in HF. Byte spans become characters: from the one holding the first byte to the one
   holding the last (so the tokens of one multi-byte character share its span, as in HF).

Batch checks (each segment's normalized length, the kept characters covered by the pieces)
turn a broken assumption into an error, never a wrong span.

A token's span in its row is then: segment start (text before an added token) + the original
positions of its first and last normalized characters. Added tokens found in the text span
their content; the post-processor's special tokens get (0, 0), as in HF."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..errors import TokcolumnarValueError
from ..text.normalizers import NFC, NFKC, Normalizer, Prepend
from ..text.normalizers import Sequence as NormalizerSequence
from ..text.pretokenizers import PreTokenizer, WholeSequence
from .composition import composed_counts

_CHAR = r"(?s)."  # one character (a code point), as HF's char offsets count them


def composing(normalizer: Normalizer | None) -> bool:
    """NFC and NFKC: followed through their compositions (`composition.py`)."""
    return isinstance(normalizer, (NFC, NFKC))


class PrefixedText(WholeSequence):
    """For offsets only: a whole-sequence pre-tokenizer after a `Prepend` normalizer, seen as
    one character put before every non-empty text (`offsets_view`)."""

    def prefix_expr(self, col: pl.Expr) -> pl.Expr | None:
        return col.str.len_bytes() > 0


def offsets_view(normalizer: Normalizer | None, pre_tokenizer: PreTokenizer
                 ) -> tuple[Normalizer | None, PreTokenizer]:
    """The pipeline as this module follows it. Llama 2's `Prepend("▁")` + `Replace(" ", "▁")`
    with no pre-tokenizer is not character-local, but it is the same as the character-local
    rest of the normalizers followed by one character put before the text: HF aligns the
    prepended character to the text's first one, as it does Metaspace's (a `Prepend` first,
    of one character the rest leaves alone, before character-local steps and no
    pre-tokenizer); any other pipeline as it is."""
    steps = (normalizer.normalizers if isinstance(normalizer, NormalizerSequence)
             else [normalizer])
    if type(pre_tokenizer) is not WholeSequence or not steps or \
            not isinstance(steps[0], Prepend) or len(steps[0].prepend) != 1:
        return normalizer, pre_tokenizer
    rest = steps[1:]
    if not all(n.char_local() for n in rest):
        return normalizer, pre_tokenizer
    after = NormalizerSequence(rest) if rest else None
    if after is not None and after.apply([steps[0].prepend]) != [steps[0].prepend]:
        return normalizer, pre_tokenizer
    return after, PrefixedText()


def check_supported(normalizer: Normalizer | None, pre_tokenizer: PreTokenizer) -> None:
    """Refuse, naming the component, a tokenizer whose offsets this module cannot follow."""
    normalizer, pre_tokenizer = offsets_view(normalizer, pre_tokenizer)
    if normalizer is not None and not normalizer.char_local() and not composing(normalizer):
        raise TokcolumnarValueError(
            f"offsets are not available with the {type(normalizer).__name__} normalizer (only "
            "with normalizers that treat each character on its own: BERT's, lowercase, NFD, "
            "NFKD, strip accents; and with NFC, NFKC)")
    if pre_tokenizer.dropped_chars() is None:
        raise TokcolumnarValueError(
            f"offsets are not available with the pre-tokenizer {type(pre_tokenizer).__name__}")


# the bits of a UTF-8 lead byte that belong to its code point, by the byte's top 5 bits
_LEAD_BITS = np.array([0x7F] * 16 + [0] * 8 + [0x1F] * 4 + [0x0F] * 2 + [0x07, 0],
                      dtype=np.int32)


def code_points(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every character of `texts` as its code point (flat, in order) and each text's number
    of characters (a null has none), read from the UTF-8 bytes with NumPy: no string per
    character."""
    import pyarrow as pa  # deferred: training loads the tokenizer (and this module), never encodes

    arr = texts.cast(pl.String).to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data_buf = arr.buffers()[2]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, dtype=np.uint8))[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    if not len(data) or int(data.max()) < 0x80:  # ASCII: one character per byte
        return data.astype(np.int32), np.diff(offsets)
    # a character starts at every byte that is not a continuation byte (10xxxxxx)
    lead = (data & 0xC0) != 0x80
    starts = np.flatnonzero(lead)
    first = data[starts]
    cp = first.astype(np.int32) & _LEAD_BITS[first >> 3]
    size = np.diff(starts, append=len(data))
    for k in (1, 2, 3):  # the continuation bytes add 6 bits each
        more = np.flatnonzero(size > k)
        cp[more] = (cp[more] << 6) | (data[starts[more] + k] & 0x3F)
    lead_before = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(lead, out=lead_before[1:])
    return cp, lead_before[offsets[1:]] - lead_before[offsets[:-1]]


class CharTable:
    """A value per code point, computed on first sight of the character and kept (for the
    normalized length of a character, or whether the pre-tokenizer keeps it): a batch costs
    one array lookup per character, whatever its size."""

    def __init__(self, compute: Callable[[pl.Series], np.ndarray]):
        self.compute = compute
        self.values = np.full(0x110000, -1, dtype=np.int16)
        self.lock = threading.Lock()

    def lookup(self, cps: np.ndarray) -> np.ndarray:
        out = self.values[cps]
        if (out < 0).any():
            new = np.unique(cps[out < 0])
            chars = pl.Series([chr(c) for c in new], dtype=pl.String)
            with self.lock:
                self.values[new] = self.compute(chars)
            out = self.values[cps]
        return out


def offsets_supported(normalizer: Normalizer | None, pre_tokenizer: PreTokenizer) -> bool:
    try:
        check_supported(normalizer, pre_tokenizer)
    except TokcolumnarValueError:
        return False
    return True


def exclusive_cumsum(counts: np.ndarray) -> np.ndarray:
    """Start of each run of `counts` (len n + 1; the last is the total)."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def normalized_lengths(normalizer: Normalizer) -> CharTable:
    """The table of how many characters `normalizer` makes of each character alone."""
    return CharTable(lambda chars: chars.to_frame("c").select(
        normalizer.expr(pl.col("c")).str.len_chars()).to_series().to_numpy())


def kept_chars(pre_tokenizer: PreTokenizer) -> CharTable:
    """The table of whether `pre_tokenizer` keeps each character (1) or drops it (0)."""
    dropped = pre_tokenizer.dropped_chars() or "[^\\s\\S]"
    return CharTable(lambda chars: (~chars.str.contains(f"^(?:{dropped})$")).to_numpy())


@dataclass
class NormAlignment:
    """Normalized position -> original character, per segment: `orig[base[s] + p]` is the
    original character (index in segment s) of normalized position p; None: identity."""

    orig: np.ndarray | None
    base: np.ndarray | None

    @classmethod
    def build(cls, normalizer: Normalizer | None, table: CharTable | None, original: pl.Series,
              normalized: pl.Series) -> NormAlignment:
        """`table`: each character's normalized length (`normalized_lengths`)."""
        if normalizer is None or table is None:
            return cls(None, None)
        cps, per_seg = code_points(original)
        seg_char_base = exclusive_cumsum(per_seg)
        if composing(normalizer):  # NFC, NFKC: per text the normalizer changes
            k = composed_lengths(original, normalized, seg_char_base,
                                 isinstance(normalizer, NFKC))
        else:  # how many characters each original character becomes (per code point)
            k = table.lookup(cps).astype(np.int64)
        seg_of_char = np.repeat(np.arange(len(per_seg), dtype=np.int64), per_seg)
        seg_norm_len = np.bincount(seg_of_char, weights=k, minlength=len(per_seg)).astype(
            np.int64)
        want = normalized.str.len_chars().fill_null(0).to_numpy().astype(np.int64)
        if not np.array_equal(seg_norm_len, want):
            bad = int(np.flatnonzero(seg_norm_len != want)[0])
            raise TokcolumnarValueError(
                f"offsets: the normalizer {type(normalizer).__name__} does not treat the "
                f"characters of {original[bad]!r} one by one")
        if (k == 1).all():  # every character normalised to one: positions hold
            return cls(None, None)
        # each normalized character's original character, as an index within its segment
        local = np.arange(len(cps), dtype=np.int64) - seg_char_base[seg_of_char]
        return cls(np.repeat(local, k), exclusive_cumsum(want))

    def original(self, seg: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """The original character (within its segment) of normalized position `pos` of
        segment `seg` (both per token)."""
        if self.orig is None or self.base is None:
            return pos
        return self.orig[self.base[seg] + pos]


def composed_lengths(original: pl.Series, normalized: pl.Series, seg_char_base: np.ndarray,
                     compat: bool) -> np.ndarray:
    """Per original character, how many normalized characters NFC (`compat`: NFKC) aligns to
    it: 1 in the texts it leaves alone, `composition.composed_counts` (once per distinct
    text) in the others."""
    k = np.ones(int(seg_char_base[-1]), dtype=np.int64)
    changed = np.flatnonzero((original != normalized).fill_null(False).to_numpy())
    done: dict[str, np.ndarray] = {}
    for s in changed.tolist():
        text = original[s]
        if text not in done:
            done[text] = composed_counts(text, compat)
        k[seg_char_base[s]:seg_char_base[s + 1]] = done[text]
    return k


def piece_starts(pre_tokenizer: PreTokenizer, kept_table: CharTable, normalized: pl.Series,
                 pieces: pl.Series, seg_of_piece: np.ndarray, per_seg: np.ndarray
                 ) -> np.ndarray:
    """Each piece's start in its segment's normalized text (in characters; -1: the character
    the pre-tokenizer put before the text). `kept_table`: `kept_chars(pre_tokenizer)`."""
    lengths = (pieces.to_frame("p").select(pre_tokenizer.piece_text_expr(pl.col("p"))
                                           .str.len_chars())
               .to_series().to_numpy().astype(np.int64))
    piece_base = exclusive_cumsum(per_seg)
    # characters of the pieces before each one, within its segment
    before = exclusive_cumsum(lengths)[:-1] - exclusive_cumsum(lengths)[piece_base[:-1]][
        seg_of_piece]
    text = normalized.fill_null("")
    prefix = pre_tokenizer.prefix_expr(pl.col("t"))
    shift = (np.zeros(len(text), dtype=np.int64) if prefix is None else
             text.to_frame("t").select(prefix).to_series().to_numpy().astype(np.int64))
    if not pre_tokenizer.dropped_chars():
        return before - shift[seg_of_piece]
    # the kept characters of each text, in order: piece j starts at the kept character that
    # follows the pieces before it
    cps, n_chars = code_points(text)
    kept_pos = np.flatnonzero(kept_table.lookup(cps) > 0)
    seg_char_base = exclusive_cumsum(n_chars)
    seg_kept_base = exclusive_cumsum(np.bincount(
        np.repeat(np.arange(len(text)), n_chars)[kept_pos], minlength=len(text)))
    covered = np.bincount(seg_of_piece, weights=lengths, minlength=len(text)).astype(np.int64)
    if not np.array_equal(covered, np.diff(seg_kept_base)):
        bad = int(np.flatnonzero(covered != np.diff(seg_kept_base))[0])
        raise TokcolumnarValueError(f"offsets: the pieces of {text[bad]!r} do not cover its "
                                    "characters (an unsupported pre-tokenizer)")
    at = seg_kept_base[seg_of_piece] + before
    return kept_pos[at] - seg_char_base[seg_of_piece] - shift[seg_of_piece]


@dataclass
class TokenTable:
    """Per token id, what the spans need: its length in bytes of the word (in model characters
    with ByteLevel, one per byte) and whether it carries the continuing-subword prefix /
    end-of-word suffix (not counted where HF does not count them)."""

    n_bytes: np.ndarray
    has_prefix: np.ndarray
    has_suffix: np.ndarray
    prefix_len: int
    suffix_len: int
    eow_id: int | None
    unk_id: int | None
    wordpiece: bool
    #: BPE's fuse_unk: an unknown token covers a run of unknown characters (`known` says
    #: which characters the vocabulary has)
    fuse_unk: bool = False
    known: frozenset[str] = frozenset()

    @classmethod
    def build(cls, model: Any, id_to_token: list[str], maps_bytes: bool) -> TokenTable:
        prefix = getattr(model, "continuing_subword_prefix", None) or ""
        suffix = getattr(model, "end_of_word_suffix", None) or ""
        tokens = pl.Series(id_to_token, dtype=pl.String)
        eow = getattr(model, "end_of_word_token", None)
        unk = getattr(model, "unk_token", None)
        none = np.zeros(len(tokens), dtype=bool)
        size = (tokens.str.len_chars() if maps_bytes else tokens.str.len_bytes()
                ).to_numpy().astype(np.int64)
        if getattr(model, "byte_fallback", False):
            # a byte piece is one byte of the word (HF's byte-fallback symbols have length 1)
            size[model.fallback_ids()] = 1
        fuse = bool(getattr(model, "fuse_unk", False))
        return cls(size,
                   tokens.str.starts_with(prefix).to_numpy() if prefix else none,
                   tokens.str.ends_with(suffix).to_numpy() if suffix else none,
                   len(prefix) if maps_bytes else len(prefix.encode()),
                   len(suffix) if maps_bytes else len(suffix.encode()),
                   model.vocab.get(eow) if eow else None, model.vocab.get(unk) if unk else None,
                   type(model).__name__ == "WordPieceModel", fuse,
                   frozenset(t for t in model.vocab if len(t) == 1) if fuse else frozenset())


def _char_bytes(raw: bytes, at: int) -> int:
    """The UTF-8 length of the character starting at byte `at` of `raw`."""
    lead = raw[at] if at < len(raw) else 0
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def word_spans(table: TokenTable, words: pl.Series, offsets: np.ndarray, values: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Each token's (start, end) in its word, in characters of `words` (the pieces' texts),
    for the runs `values[offsets[i]:offsets[i+1]]` of the distinct words.

    As in HF, a token's span is counted in bytes of the word, summing its symbols' lengths:
    a character the model does not know and drops (BPE without an unknown token) is not
    counted (the spans after it are shifted, as HF's are); an unknown token counts the
    character it stands for (BPE) or the whole word (WordPiece). Byte spans then become
    characters: from the one holding the first byte to the one holding the last."""
    n_tok = np.diff(offsets)
    ids = values.astype(np.int64)
    word_of = np.repeat(np.arange(len(words), dtype=np.int64), n_tok)
    pos = np.arange(len(ids), dtype=np.int64) - offsets[word_of]
    first = pos == 0
    last = pos == n_tok[word_of] - 1
    # each token's length: its string, less the prefix on a non-first token and the suffix
    # on the last one (HF's symbols count the word's own bytes)
    units = table.n_bytes[ids].copy()
    units -= np.where(~first & table.has_prefix[ids], table.prefix_len, 0)
    units -= np.where(last & table.has_suffix[ids], table.suffix_len, 0)
    if table.eow_id is not None:
        units[ids == table.eow_id] = 0
    byte_len = words.str.len_bytes().to_numpy().astype(np.int64)
    if table.unk_id is not None:
        # an unknown token: the whole word (WordPiece) or the character at its place (BPE)
        for w in np.unique(word_of[ids == table.unk_id]):
            lo, hi = int(offsets[w]), int(offsets[w + 1])
            if table.wordpiece:
                units[lo:hi] = byte_len[w]
                continue
            raw = words[int(w)].encode()
            at = 0
            for k in range(lo, hi):
                if ids[k] == table.unk_id:
                    units[k] = _char_bytes(raw, at)
                    while table.fuse_unk and at + units[k] < len(raw):  # the run it fused
                        n = _char_bytes(raw, at + int(units[k]))
                        nxt = raw[at + int(units[k]):at + int(units[k]) + n].decode()
                        if nxt in table.known:
                            break
                        units[k] += n
                at += int(units[k])
    end = np.cumsum(units) - np.repeat(exclusive_cumsum(units)[offsets[:-1]], n_tok)
    start = end - units
    # byte positions -> characters of the word: the character holding the first byte, and
    # the one holding the last byte (+1)
    chars = words.str.extract_all(_CHAR)
    n_chars = chars.list.len().to_numpy().astype(np.int64)
    char_bytes = chars.explode().drop_nulls().str.len_bytes().to_numpy().astype(np.int64)
    char_byte_start = exclusive_cumsum(char_bytes)[:-1]
    word_char_base = exclusive_cumsum(n_chars)
    word_byte_base = exclusive_cumsum(byte_len)
    base = word_byte_base[word_of]
    cbase = word_char_base[word_of]
    c_start = np.searchsorted(char_byte_start, base + start, side="right") - 1 - cbase
    c_last = np.searchsorted(char_byte_start, base + np.maximum(end - 1, start), side="right")
    c_last = c_last - 1 - cbase
    return c_start, np.where(end > start, c_last + 1, c_start)


def trim_offsets(ids: np.ndarray, pos: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray, leading: np.ndarray, trailing: np.ndarray,
                 add_prefix_space: bool) -> tuple[np.ndarray, np.ndarray]:
    """HF's ByteLevel `process_offsets` (trim_offsets): a token's leading and trailing spaces
    are left out of its span, but not the one space `add_prefix_space` put before the first
    token (`pos`: the token's index in its sequence)."""
    lead = leading[ids].astype(np.int64)
    trail = trailing[ids].astype(np.int64)
    if add_prefix_space:
        keep = ((pos == 0) | (starts == 0)) & (lead == 1)
        lead = np.where(keep, 0, lead)
    new_start = np.where(lead > 0, np.minimum(starts + lead, ends), starts)
    new_end = np.where((trail > 0) & (ends >= trail), np.maximum(ends - trail, new_start),
                       ends)
    return new_start, new_end
