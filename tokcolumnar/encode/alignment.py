"""Offsets through a chain of normalizers that are not character-local: SentencePiece's char
map (`Precompiled`), `Replace` with a pattern of several characters (the whitespace handling of
our Unigram tokenizers: `^ +|[ ▁]+$` removed, ` {2,}` to one space), NFC/NFKC inside a
`Sequence`, `Prepend`, `Strip` (docs/encode.md, "Offsets").

HF follows every character with an alignment: each character of the normalized text carries
the span of one original character (its UTF-8 bytes), and every normalizer rewrites the
alignments of the text it rewrites (`NormalizedString` in HF's `normalizer.rs`). Here the same
alignment is an array `orig`: per normalized character of every segment, the index of its
original character within the segment (-1: HF's empty span `(0, 0)`), rewritten step by step
as HF rewrites it:

* `transform` (NFC/NFKC, the char map): the new text as (character, change) pairs, walked over
  the old characters: a change <= 0 takes the alignment of the next old character and consumes
  1 - change of them (a removed character extends nothing: it is consumed by the one before
  it), a change > 0 (an inserted character) takes the alignment of the last one consumed.
  `walk` does it for all texts at once with cumulative sums.
* the char map (HF's `Precompiled::normalize`): HF walks the text by grapheme cluster
  (`text.graphemes`); a cluster of 2+ characters and fewer than 6 bytes is replaced as a whole
  by the replacement of the shortest source that is a prefix of it, every other character by
  its own. Each replaced unit of m characters made n adds the replacement's characters with
  change 0, then the last n - m of them +1 (n > m) or the last one n - m (n < m); an empty
  replacement adds -m to the character before it, and at the very start of a text, where
  there is none, the removal is lost (so every following character is aligned one original
  character to the left: HF's quirk, kept). Our normalizer takes SentencePiece's longest
  matches instead (docs/unigram.md); where the text that gives differs from HF's (`ﾃﾞ`), HF's
  tokens are not ours, and the texts are followed again with SentencePiece's matches (located
  by Polars' `find_many` / `extract_many` with the automaton of only the sources whose
  characters all occur in the batch), aligned by the same rules.
* `Replace`: the replacement's characters all take the alignment of the match's last
  character (HF's `replace`, which aligns inserted characters to the one before the match's
  end); the characters around it keep theirs. Matches are located by replacing them with a
  sentinel character the texts do not hold and counting each match's length.
* `Prepend`: the prefix and the first character all take the first character's alignment;
  `Strip`: the kept characters keep theirs; a character-local step: each new character takes
  its source character's (`CharTable` of lengths).

Every step is array work over the batch (most only over the texts it changes, or for
`Replace` that hold a match): no Python per line, except NFC/NFKC's `composition.changes`,
once per distinct text they change, and the grapheme class of each distinct character."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..buffers import strings_from_parts
from ..errors import TokcolumnarValueError
from ..text.graphemes import grapheme_class, joined
from ..text.normalizers import (
    NFC,
    NFKC,
    Normalizer,
    Precompiled,
    Prepend,
    Replace,
    Sequence,
    Strip,
)
from ..text.regex import escape_regex
from .chars import CharTable, code_points, exclusive_cumsum, normalized_lengths
from .composition import changes as composition_changes

_FOLLOWED = (NFC, NFKC, Precompiled, Replace, Prepend, Strip)


def steps_of(normalizer: Normalizer) -> list[Normalizer]:
    """The normalizers HF applies one after another (Sequences flattened)."""
    if isinstance(normalizer, Sequence):
        return [s for n in normalizer.normalizers for s in steps_of(n)]
    return [normalizer]


def followed(normalizer: Normalizer) -> bool:
    """Whether every step of `normalizer` is one `ChainAligner` follows."""
    return all(s.char_local() or isinstance(s, _FOLLOWED) for s in steps_of(normalizer))


def _apply(step: Normalizer, texts: pl.Series) -> pl.Series:
    return texts.to_frame("t").select(step.expr(pl.col("t"))).to_series()


def _local(lens: np.ndarray) -> np.ndarray:
    """Each character's index within its text."""
    base = exclusive_cumsum(lens)
    return np.arange(int(base[-1]), dtype=np.int64) - np.repeat(base[:-1], lens)


def walk(old: np.ndarray, old_lens: np.ndarray, change: np.ndarray, new_lens: np.ndarray,
         initial: np.ndarray | int = 0) -> np.ndarray:
    """HF's `NormalizedString::transform` over every text at once: `old` the alignment of the
    old characters (flat), `change` the change of each new character (flat), `initial` the
    old characters dropped before the first one (HF's `initial_offset`)."""
    seg = np.repeat(np.arange(len(new_lens), dtype=np.int64), new_lens)
    consume = np.where(change <= 0, 1 - change, 0)
    done = exclusive_cumsum(consume)
    first = np.broadcast_to(np.asarray(initial, dtype=np.int64), new_lens.shape)
    # the old character each new one reaches: those consumed before it in its text
    k = done[:-1] - done[exclusive_cumsum(new_lens)[:-1]][seg] + first[seg]
    at = np.where(change > 0, k - 1, k)
    if len(at) and (at >= old_lens[seg]).any():
        raise TokcolumnarValueError("offsets: a normalizer step consumed more characters than "
                                    "its text has")
    return np.where(at < 0, -1, old[exclusive_cumsum(old_lens)[:-1][seg] + np.maximum(at, 0)])


@dataclass
class _State:
    """The texts after the steps so far, their lengths in characters, and `orig` (None: each
    character is still its own original one)."""

    texts: pl.Series
    lens: np.ndarray
    orig: np.ndarray | None

    def alignment(self) -> np.ndarray:
        return _local(self.lens) if self.orig is None else self.orig

    def then(self, texts: pl.Series, changed: np.ndarray, sub_orig: np.ndarray,
             sub_lens: np.ndarray) -> _State:
        """The state after a step that rewrote the texts of `changed` (their new alignment
        `sub_orig` and lengths `sub_lens`) and left the others as they were."""
        old = self.alignment()
        lens = self.lens.copy()
        lens[changed] = sub_lens
        seg = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        out = np.empty(int(lens.sum()), dtype=np.int64)
        mine = changed[seg]
        out[mine] = sub_orig
        keep = np.flatnonzero(~mine)
        out[keep] = old[exclusive_cumsum(self.lens)[:-1][seg[keep]]
                        + keep - exclusive_cumsum(lens)[:-1][seg[keep]]]
        return _State(texts, lens, out)

    def of(self, changed: np.ndarray) -> np.ndarray:
        """The alignment of the characters of the texts of `changed`."""
        return self.alignment()[np.repeat(changed, self.lens)]


class _CharMap:
    """A char map's sources and replacements as code points: its single-character sources by
    code point, its longer ones in a table, and a filter keeping for a batch only the sources
    whose characters all occur in it (the automaton of 225,276 sources costs ~0.45 s to
    build; of those a batch can hold, milliseconds)."""

    def __init__(self, step: Precompiled) -> None:
        self.sources, self.targets = step._sources, step._targets
        cps, lens = code_points(pl.Series(self.sources, dtype=pl.String))
        self.cps = cps.astype(np.int64)
        self.starts = exclusive_cumsum(lens)[:-1]
        self.source_lens = lens.astype(np.int64)
        target_cps, target_lens = code_points(pl.Series(self.targets, dtype=pl.String))
        self.target_cps = target_cps.astype(np.int64)
        self.target_lens = target_lens.astype(np.int64)
        self.target_starts = exclusive_cumsum(self.target_lens)[:-1]
        self.single = np.full(0x110000, -1, dtype=np.int64)  # code point -> its source
        one = np.flatnonzero(self.source_lens == 1)
        self.single[self.cps[self.starts[one]]] = one
        longer = np.flatnonzero(self.source_lens > 1)
        self.longer = pl.DataFrame({"s": [self.sources[j] for j in longer.tolist()],
                                    "src": longer})

    def possible(self, cps: np.ndarray) -> np.ndarray:
        """The indices (longest source first, as the normalizer orders them) of the sources
        made only of characters in `cps`."""
        present = np.zeros(0x110000, dtype=bool)
        present[cps] = True
        if not len(self.starts):
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.logical_and.reduceat(present[self.cps], self.starts))

    def lookup(self, strings: pl.Series) -> np.ndarray:
        """The source index of each string (-1: not a source of 2+ characters)."""
        found = strings.to_frame("s").join(self.longer, on="s", how="left",
                                           maintain_order="left")["src"]
        return found.fill_null(-1).to_numpy().astype(np.int64)


def _unit_changes(unit_m: np.ndarray, unit_n: np.ndarray, unit_text: np.ndarray, n_texts: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The changes of the new characters of replacement units (each: m old characters made n
    new ones; a character left alone is a unit of 1 -> 1), as HF's `replace` in
    precompiled.rs records them, and the texts' new lengths."""
    unit_new = exclusive_cumsum(unit_n)
    of = np.repeat(np.arange(len(unit_n), dtype=np.int64), unit_n)
    within = np.arange(int(unit_new[-1]), dtype=np.int64) - unit_new[:-1][of]
    um, un = unit_m[of], unit_n[of]
    change = np.where(un > um, (within >= um).astype(np.int64),
                      np.where(within == un - 1, un - um, 0))
    new_lens = np.bincount(unit_text, weights=unit_n, minlength=n_texts).astype(np.int64)
    # an empty replacement: the character before it (in its text) consumes the source; at
    # the start of a text there is none and HF loses the removal
    gone = np.flatnonzero(unit_n == 0)
    before = unit_new[gone] - 1
    has = before >= exclusive_cumsum(new_lens)[:-1][unit_text[gone]]
    np.add.at(change, before[has], -unit_m[gone[has]])
    return change, new_lens


def strings_of(cps: np.ndarray, lens: np.ndarray) -> pl.Series:
    """Texts from their code points (flat) and lengths: UTF-8 by CPython's codecs over the
    whole buffer, cut by NumPy."""
    data = np.frombuffer(cps.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8"),
                         dtype=np.uint8)
    size = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    text = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    return strings_from_parts("t", exclusive_cumsum(
        np.bincount(text, weights=size, minlength=len(lens)).astype(np.int64)), data)


# noncharacters: never in a tokenizer's vocabulary, practically never in text
_SENTINELS = [chr(c) for c in range(0xFDD0, 0xFDF0)]


class ChainAligner:
    """Normalized character -> original character through the steps of one normalizer (see
    the module docstring); built once per tokenizer, its tables kept across batches."""

    def __init__(self, normalizer: Normalizer) -> None:
        self.steps = steps_of(normalizer)
        self.tables: dict[int, CharTable] = {
            i: normalized_lengths(s) for i, s in enumerate(self.steps) if s.char_local()}
        self.charmaps: dict[int, _CharMap] = {}
        self.graphemes = CharTable(lambda chars: np.array(
            [grapheme_class(c) for c in chars.to_list()], dtype=np.int16))
        self.lock = threading.Lock()

    def align(self, original: pl.Series, normalized: pl.Series) -> np.ndarray | None:
        """Per character of `normalized` (flat over the texts), its original character's
        index in its text of `original` (-1: HF's empty span); None: every character is its
        own.

        The steps are followed as HF runs them (the char map by grapheme cluster). Where that
        does not give our normalizer's text — the char map's multi-character sources, which
        our normalizer takes as SentencePiece does (docs/unigram.md) — HF's tokens are not
        ours: those texts are followed again with SentencePiece's matches."""
        texts = original.fill_null("").cast(pl.String)
        want = normalized.fill_null("").cast(pl.String)
        state = self._run(texts, hf=True)
        differ = (state.texts != want).to_numpy()
        if differ.any():
            ours = self._run(texts.filter(differ), hf=False)
            if not (ours.texts == want.filter(differ)).all():
                bad = int(np.flatnonzero(differ)[np.flatnonzero(
                    (ours.texts != want.filter(differ)).to_numpy())[0]])
                raise TokcolumnarValueError(f"offsets: the normalizer's steps do not give its "
                                            f"text for {original[bad]!r}")
            state = state.then(want, differ, ours.alignment(), ours.lens)
        return state.orig

    def _run(self, texts: pl.Series, hf: bool) -> _State:
        _, lens = code_points(texts)
        state = _State(texts, lens.astype(np.int64), None)
        for i, step in enumerate(self.steps):
            if step.char_local():
                state = self._char_local(i, step, state)
            elif isinstance(step, Precompiled):
                state = (self._precompiled_hf if hf else self._precompiled)(i, step, state)
            elif isinstance(step, Replace):
                state = self._replace(step, state)
            elif isinstance(step, (NFC, NFKC)):
                state = self._composed(step, state)
            elif isinstance(step, Prepend):
                state = self._prepend(step, state)
            elif isinstance(step, Strip):
                state = self._strip(step, state)
            else:
                raise TokcolumnarValueError(f"offsets are not available with the "
                                            f"{type(step).__name__} normalizer")
        return state

    def _char_local(self, i: int, step: Normalizer, state: _State) -> _State:
        new = _apply(step, state.texts)
        cps, _ = code_points(state.texts)
        k = self.tables[i].lookup(cps).astype(np.int64)
        lens = new.str.len_chars().to_numpy().astype(np.int64)
        seg = np.repeat(np.arange(len(lens), dtype=np.int64), state.lens)
        if not np.array_equal(np.bincount(seg, weights=k, minlength=len(lens)), lens):
            raise TokcolumnarValueError(f"offsets: the normalizer {type(step).__name__} does "
                                        "not treat the characters one by one")
        if (k == 1).all():
            return _State(new, lens, state.orig)
        return _State(new, lens, np.repeat(state.alignment(), k))

    def _charmap(self, i: int, step: Precompiled) -> _CharMap:
        with self.lock:
            if i not in self.charmaps:
                self.charmaps[i] = _CharMap(step)
            return self.charmaps[i]

    def _precompiled_hf(self, i: int, step: Precompiled, state: _State) -> _State:
        """The char map as HF's `Precompiled` applies it: by grapheme cluster, a cluster of
        2+ characters and fewer than 6 bytes replaced as a whole by the replacement of the
        *shortest* source that is a prefix of it (spm_precompiled's `transform`), every other
        character by its own replacement."""
        cmap = self._charmap(i, step)
        cps, lens = code_points(state.texts)
        cps = cps.astype(np.int64)
        if not len(cps):
            return state
        single = cmap.single[cps]
        total = len(cps)
        text = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        last = np.zeros(total, dtype=bool)
        last[exclusive_cumsum(lens)[1:][lens > 0] - 1] = True
        cls = self.graphemes.lookup(cps)
        join = np.zeros(total, dtype=bool)  # no break after this character
        join[:-1] = joined(cls[:-1], cls[1:]) & ~last[:-1]
        if not (single >= 0).any() and not join.any():
            return state
        # the clusters, and the ones HF replaces as a whole
        first = np.r_[True, ~join[:-1]]
        starts = np.flatnonzero(first)
        n_chars = np.diff(np.r_[starts, total])
        size = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
        n_bytes = np.add.reduceat(size, starts)
        whole = np.flatnonzero((n_chars >= 2) & (n_bytes < 6))
        src = np.full(len(whole), -1, dtype=np.int64)  # the shortest source of each prefix
        if len(whole):
            local = _local(lens)
            for k in range(1, int(n_chars[whole].max()) + 1):
                todo = np.flatnonzero((src < 0) & (n_chars[whole] >= k))
                if not len(todo):
                    break
                at = starts[whole[todo]]
                if k == 1:
                    src[todo] = single[at]
                else:
                    src[todo] = cmap.lookup(state.texts.gather(text[at]).str.slice(
                        local[at], k))
        replaced = whole[src >= 0]
        # units: a cluster replaced as a whole, else each character on its own
        unit = np.ones(total, dtype=bool)
        cluster_of = np.cumsum(first) - 1
        inside = np.zeros(len(starts), dtype=bool)
        inside[replaced] = True
        unit[inside[cluster_of] & ~first] = False
        unit_pos = np.flatnonzero(unit)
        unit_src = single[unit_pos]
        unit_m = np.ones(len(unit_pos), dtype=np.int64)
        j = np.searchsorted(unit_pos, starts[replaced])
        unit_src[j] = src[src >= 0]
        unit_m[j] = n_chars[replaced]
        unit_n = np.where(unit_src >= 0, cmap.target_lens[np.maximum(unit_src, 0)], 1)
        change, new_lens = _unit_changes(unit_m, unit_n, text[unit_pos], len(lens))
        # the new text: each unit's replacement, or its character
        of = np.repeat(np.arange(len(unit_pos), dtype=np.int64), unit_n)
        within = np.arange(len(of), dtype=np.int64) - exclusive_cumsum(unit_n)[:-1][of]
        s = unit_src[of]
        new_cps = np.where(s >= 0, cmap.target_cps[cmap.target_starts[np.maximum(s, 0)]
                                                   + within], cps[unit_pos[of]])
        orig = walk(state.alignment(), state.lens, change, new_lens)
        return _State(strings_of(new_cps, new_lens), new_lens, orig)

    def _precompiled(self, i: int, step: Precompiled, state: _State) -> _State:
        """The char map as our normalizer applies it (SentencePiece's longest match), each
        match aligned by HF's rules."""
        cmap = self._charmap(i, step)
        cps, _ = code_points(state.texts)
        idx = cmap.possible(cps)
        if not len(idx):
            return state
        sources = [cmap.sources[j] for j in idx.tolist()]
        targets = [cmap.targets[j] for j in idx.tolist()]
        new = state.texts.str.replace_many(sources, targets, leftmost=True)
        changed = (state.texts != new).to_numpy()
        if not changed.any():
            return _State(new, state.lens, state.orig)
        sub = state.texts.filter(changed)
        # each match: its first byte, its source (so m and n); leftmost-first as replace_many
        at = sub.str.find_many(sources, leftmost=True)
        per_text = at.list.len().to_numpy().astype(np.int64)
        first_byte = at.explode().drop_nulls().to_numpy().astype(np.int64)
        which = (sub.str.extract_many(sources, leftmost=True).explode().drop_nulls()
                 .replace_strict(sources, np.arange(len(sources)), return_dtype=pl.Int64)
                 .to_numpy())
        m, n = cmap.source_lens[idx[which]], cmap.target_lens[idx[which]]
        sub_cps, sub_lens = code_points(sub)
        sub_lens = sub_lens.astype(np.int64)
        # bytes -> characters: the first byte of every character, flat over the texts
        char_bytes = exclusive_cumsum(1 + (sub_cps >= 0x80) + (sub_cps >= 0x800)
                                      + (sub_cps >= 0x10000))
        char_base = exclusive_cumsum(sub_lens)
        text_of_match = np.repeat(np.arange(len(sub), dtype=np.int64), per_text)
        start = np.searchsorted(char_bytes, char_bytes[char_base[text_of_match]] + first_byte)
        # units: each match, and each character outside the matches (m = n = 1)
        total = int(char_base[-1])
        depth = np.zeros(total + 1, dtype=np.int64)
        np.add.at(depth, start, 1)
        np.add.at(depth, start + m, -1)
        inside = np.cumsum(depth)[:-1] > 0
        is_start = np.zeros(total, dtype=bool)
        is_start[start] = True
        unit_pos = np.flatnonzero(~inside | is_start)
        unit_m = np.ones(len(unit_pos), dtype=np.int64)
        unit_n = np.ones(len(unit_pos), dtype=np.int64)
        j = np.searchsorted(unit_pos, start)
        unit_m[j], unit_n[j] = m, n
        unit_text = np.repeat(np.arange(len(sub), dtype=np.int64), sub_lens)[unit_pos]
        change, new_lens = _unit_changes(unit_m, unit_n, unit_text, len(sub))
        if not np.array_equal(new_lens, new.filter(changed).str.len_chars().to_numpy()):
            raise TokcolumnarValueError("offsets: the char map's matches do not give its text")
        sub_orig = walk(state.of(changed), sub_lens, change, new_lens)
        return state.then(new, changed, sub_orig, new_lens)

    def _replace(self, step: Replace, state: _State) -> _State:
        pattern = step._rust if step.regex else escape_regex(step.pattern)
        holds = state.texts.str.contains(pattern).to_numpy()
        if not holds.any():
            return state
        new = _apply(step, state.texts)
        sub = state.texts.filter(holds)
        sub_cps, sub_lens = code_points(sub)
        sub_lens = sub_lens.astype(np.int64)
        present = set(np.unique(sub_cps).tolist()) | {ord(c) for c in step.content}
        sentinel = next((s for s in _SENTINELS if ord(s) not in present), None)
        if sentinel is None:
            raise TokcolumnarValueError("offsets: the texts hold every sentinel character "
                                        "(U+FDD0..U+FDEF)")
        marked = sub.str.replace_all(pattern, sentinel)
        match_lens = (sub.str.extract_all(pattern).explode().drop_nulls().str.len_chars()
                      .to_numpy().astype(np.int64))
        cps, lens = code_points(marked)
        lens = lens.astype(np.int64)
        is_match = cps == ord(sentinel)
        if int(is_match.sum()) != len(match_lens):
            raise TokcolumnarValueError("offsets: the Replace pattern's matches could not be "
                                        "located")
        # each marked character's old position: its own plus the extra length of the
        # matches before it in its text
        extra = np.zeros(len(cps), dtype=np.int64)
        extra[is_match] = match_lens - 1
        before = exclusive_cumsum(extra)
        text = np.repeat(np.arange(len(sub), dtype=np.int64), lens)
        old_pos = _local(lens) + before[:-1] - before[exclusive_cumsum(lens)[:-1]][text]
        # a match's characters: the alignment of its last character (HF: of the character
        # before the match's end; none at the text's start: the empty span)
        at = np.where(is_match, old_pos + extra, old_pos)
        old = state.of(holds)
        value = np.where(at < 0, -1, old[exclusive_cumsum(sub_lens)[:-1][text]
                                          + np.maximum(at, 0)])
        per = np.where(is_match, len(step.content), 1)
        new_lens = np.bincount(text, weights=per, minlength=len(sub)).astype(np.int64)
        if not np.array_equal(new_lens, new.filter(holds).str.len_chars().to_numpy()):
            raise TokcolumnarValueError("offsets: the Replace pattern's matches do not give its "
                                        "text")
        return state.then(new, holds, np.repeat(value, per), new_lens)

    def _composed(self, step: NFC | NFKC, state: _State) -> _State:
        new = _apply(step, state.texts)
        changed = (state.texts != new).to_numpy()
        if not changed.any():
            return _State(new, state.lens, state.orig)
        sub = state.texts.filter(changed).to_list()
        compat = isinstance(step, NFKC)
        done: dict[str, np.ndarray] = {}
        parts = []
        for text in sub:  # once per distinct text the step changes
            if text not in done:
                done[text] = np.array([c for _, c in composition_changes(text, compat)],
                                      dtype=np.int64)
            parts.append(done[text])
        change = np.concatenate(parts)
        new_lens = np.array([len(p) for p in parts], dtype=np.int64)
        if not np.array_equal(new_lens, new.filter(changed).str.len_chars().to_numpy()):
            raise TokcolumnarValueError(f"offsets: {type(step).__name__} of a text differs "
                                        "from its alignment's")
        sub_orig = walk(state.of(changed), state.lens[changed], change, new_lens)
        return state.then(new, changed, sub_orig, new_lens)

    def _prepend(self, step: Prepend, state: _State) -> _State:
        new = _apply(step, state.texts)
        if not step.prepend or not state.lens.any():
            return _State(new, state.lens, state.orig)
        # the prefix and the first character: all the first character's alignment
        per = np.ones(int(state.lens.sum()), dtype=np.int64)
        per[exclusive_cumsum(state.lens)[:-1][state.lens > 0]] += len(step.prepend)
        lens = state.lens + np.where(state.lens > 0, len(step.prepend), 0)
        return _State(new, lens, np.repeat(state.alignment(), per))

    def _strip(self, step: Strip, state: _State) -> _State:
        new = _apply(step, state.texts)
        lens = new.str.len_chars().to_numpy().astype(np.int64)
        if np.array_equal(lens, state.lens):
            return _State(new, lens, state.orig)
        lead = (state.lens - state.texts.str.strip_chars_start().str.len_chars().to_numpy()
                if step.left else np.zeros(len(lens), dtype=np.int64))
        seg = np.repeat(np.arange(len(lens), dtype=np.int64), state.lens)
        local = _local(state.lens)
        keep = (local >= lead[seg]) & (local < (lead + lens)[seg])
        return _State(new, lens, state.alignment()[keep])
