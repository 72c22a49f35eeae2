"""Token offsets: each token's character span (start, end) in the original text, as HF's
`Encoding.offsets` (with `OffsetType::Char`), computed columnar for a whole batch.

HF follows every character through the pipeline with an alignment; here the same spans come
from three tables, each built once per batch with Polars and NumPy:

1. normalization (`NormAlignment`): with a normalizer that treats every character on its own
   (`Normalizer.char_local`: BERT's, lowercase, NFD/NFKD, strip accents), original character i
   becomes k_i normalized characters; normalized position p belongs to the original character
   whose run [sum k_<i, sum k_<=i) holds it (HF aligns inserted and decomposed characters to
   the character they come from). k is looked up per code point in a table kept across
   batches (`CharTable`); the characters are read as code points from the UTF-8 buffer.
   NFC/NFKC alone: `composition.py`; any other chain (SentencePiece's char map, `Replace`,
   ...): `alignment.py`, which gives each normalized character its original one directly;
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
   A Unigram model's tokens are its pieces, an unknown token its whole run of unknown
   characters (`unigram_word_spans`).

Batch checks (each segment's normalized length, the kept characters covered by the pieces)
turn a broken assumption into an error, never a wrong span.

A token's span in its row is then: segment start (text before an added token) + the original
positions of its first and last normalized characters. Added tokens found in the text span
their content; the post-processor's special tokens get (0, 0), as in HF."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..buffers import gather_runs
from ..errors import TokcolumnarValueError
from ..text.normalizers import NFC, NFKC, Normalizer, Prepend
from ..text.normalizers import Sequence as NormalizerSequence
from ..text.pretokenizers import PreTokenizer, WholeSequence
from .alignment import ChainAligner, followed, steps_of
from .chars import CharTable, code_points, exclusive_cumsum, normalized_lengths
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
    if normalizer is not None and not followed(normalizer):
        step = next(s for s in steps_of(normalizer) if not followed(s))
        raise TokcolumnarValueError(
            f"offsets are not available with the {type(step).__name__} normalizer")
    if pre_tokenizer.dropped_chars() is None:
        raise TokcolumnarValueError(
            f"offsets are not available with the pre-tokenizer {type(pre_tokenizer).__name__}")


def offsets_supported(normalizer: Normalizer | None, pre_tokenizer: PreTokenizer) -> bool:
    try:
        check_supported(normalizer, pre_tokenizer)
    except TokcolumnarValueError:
        return False
    return True


def normalizer_table(normalizer: Normalizer) -> CharTable | ChainAligner:
    """What `NormAlignment.build` needs of `normalizer`, kept across batches: a table of
    lengths per character (character-local normalizers), nothing more for NFC/NFKC alone
    (`composition.py`), else the aligner of its steps."""
    if normalizer.char_local() or composing(normalizer):
        return normalized_lengths(normalizer)
    return ChainAligner(normalizer)


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
    def build(cls, normalizer: Normalizer | None, table: CharTable | ChainAligner | None,
              original: pl.Series, normalized: pl.Series) -> NormAlignment:
        """`table`: each character's normalized length (`normalized_lengths`) for a
        character-local normalizer, else its `ChainAligner` (`normalizer_table`)."""
        if normalizer is None or table is None:
            return cls(None, None)
        if isinstance(table, ChainAligner):  # any chain of steps (`alignment.py`)
            orig = table.align(original, normalized)
            if orig is None:
                return cls(None, None)
            return cls(orig, exclusive_cumsum(
                normalized.str.len_chars().fill_null(0).to_numpy().astype(np.int64)))
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


def unigram_word_spans(model: Any, words: pl.Series, offsets: np.ndarray, values: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """`word_spans` for a Unigram model (`models.unigram`), whose tokens are pieces of the
    word: each one spans its piece's characters, one after the other. An unknown token spans
    its whole run of unknown characters and the `<0xXX>` pieces spelling one all span it
    (HF's `Unigram::tokenize`), which the ids alone do not tell when a word holds several
    such runs: a word with one run (consecutive such tokens) gives it what its other tokens
    leave, the others (and words spelling such a piece in their text) are segmented again
    with their spans (`token_spans`)."""
    ids = values.astype(np.int64)
    n_tok = np.diff(offsets)
    length = model.piece_lengths()[ids]
    unsure = model.spans_unsure()[ids]
    if not unsure.any():
        end = np.cumsum(length) - np.repeat(exclusive_cumsum(length)[offsets[:-1]], n_tok)
        return end - length, end
    word_of = np.repeat(np.arange(len(words), dtype=np.int64), n_tok)
    # the runs: consecutive unsure tokens of a word; a word with one run gives its tokens
    # the characters the sure ones leave
    first = unsure & ~np.r_[False, unsure[:-1] & (word_of[1:] == word_of[:-1])]
    runs = np.bincount(word_of[first], minlength=len(words))
    spelled = np.zeros(len(words), dtype=bool)
    has_run = np.flatnonzero(runs > 0)
    spelled[has_run] = words.gather(has_run).str.contains_any(model.unsure_pieces()).to_numpy()
    sure_len = np.bincount(word_of, weights=np.where(unsure, 0, length),
                           minlength=len(words)).astype(np.int64)
    run_len = words.str.len_chars().to_numpy().astype(np.int64) - sure_len
    # a run's tokens count its length once: the first of them, the others 0 (then all of
    # them are given the run's span)
    length = np.where(unsure, np.where(first, run_len[word_of], 0), length)
    end = np.cumsum(length) - np.repeat(exclusive_cumsum(length)[offsets[:-1]], n_tok)
    start = end - length
    in_run = unsure & ~first
    if in_run.any():  # a run's later tokens: the span of its first one
        run_first = np.maximum.accumulate(np.where(first, np.arange(len(ids)), 0))
        start[in_run], end[in_run] = start[run_first[in_run]], end[run_first[in_run]]
    again = np.flatnonzero((runs > 1) | ((runs == 1) & spelled))
    if len(again) and model.spans is not None:  # the spans kept as the words were segmented
        entry, kept_off, kept_ids, kept_start, kept_len = model.spans.find(words.gather(again))
        hit = entry >= 0
        if hit.any():
            w, e = again[hit], entry[hit]
            lens, flat_ids = gather_runs(kept_off, kept_ids, e)
            where = np.repeat(offsets[:-1][w] - exclusive_cumsum(n_tok[w])[:-1], n_tok[w]) \
                + np.arange(int(n_tok[w].sum()), dtype=np.int64)
            if np.array_equal(lens, n_tok[w]) and np.array_equal(flat_ids, ids[where]):
                start[where] = gather_runs(kept_off, kept_start, e)[1]
                end[where] = start[where] + gather_runs(kept_off, kept_len, e)[1]
                again = again[~hit]
    if len(again):
        new_ids, new_offsets, run_start, run_len = model.token_spans(words.gather(again))
        # the positions of those words' tokens among all
        where = np.repeat(offsets[:-1][again] - exclusive_cumsum(n_tok[again])[:-1],
                          n_tok[again]) + np.arange(int(n_tok[again].sum()), dtype=np.int64)
        if not (np.array_equal(np.diff(new_offsets), n_tok[again])
                and np.array_equal(new_ids, ids[where])):
            raise TokcolumnarValueError("offsets: the Unigram model segments a word otherwise "
                                        "than its cached ids")
        start[where], end[where] = run_start, run_start + run_len
    return start, end


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
