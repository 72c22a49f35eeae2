"""Where the corpus reader may cut a long line without changing the words: the rule (a regex
on the line's bytes) of each kind of cut a pre-tokenizer names (`PreTokenizer.line_cut`,
`text.pretokenizers.LINE_CUT_KINDS`), and why each is exact. Here, with the readers, so that
text/ does not depend on how the corpus is read."""

from __future__ import annotations

from dataclasses import dataclass

from ..text import pretokenizers as kinds
from ..text.pretokenizers import PreTokenizer


@dataclass(frozen=True)
class LineCut:
    """Where a pre-tokenizer lets the corpus reader cut a long line: at the end of each match
    of `pattern` (a regex on the line's UTF-8 bytes that looks at no more than 4 bytes on each
    side of the cut, and cuts between characters). A cut there gives the same words, under
    every normalizer, as the uncut line. `rule` says it in words for error messages."""

    pattern: bytes
    rule: str


# Why these cuts are exact. Normalizers run first; every one of them (NFC, NFKC, NFD, NFKD,
# BERT's, lowercase) handles a line cut before or after an ASCII space, tab or CR exactly as the
# whole line: such a character is a starter that composes with nothing and decomposes to itself
# (or, for BERT, to a space), so normalization never looks across it, and it is neither cased
# nor case-ignorable, so lowercase's final-sigma rule never looks across it either.
#
# Pre-tokenizers that drop whitespace (Whitespace, WhitespaceSplit, Bert; subword-nmt's split,
# which keeps tabs inside words, only at a space or CR): no word contains the character, so the
# words of `a<ws>` and `b` are those of `a<ws>b`.
AFTER_WHITESPACE = LineCut(rb"[ \t\r]", "after an ASCII space, tab or carriage return")
AFTER_SPACE_OR_CR = LineCut(rb"[ \r]", "after an ASCII space or carriage return")
# CJK text has no spaces; Whitespace, Bert and ByteLevel may also cut after the CJK punctuation
# 、。！，；？ (U+3001, U+3002, U+FF01, U+FF0C, U+FF1B, U+FF1F) followed by a CJK ideograph
# (U+4E00..U+9FFF) or a hiragana / katakana letter (U+3041..U+3096, U+30A1..U+30FA). The mark is
# punctuation (its own Bert piece; a `[^\w\s]` / GPT-2 `[^\s\p{L}\p{N}]` run that a letter
# ends) under every normalizer (NFKC makes the fullwidth ones ASCII ! , ; ?), neither cased nor
# case-ignorable, and so is the letter after it (so lowercase's final sigma does not look
# across the cut); the letter is a starter that composes with nothing before it, stays a
# letter, and BERT's normalizer only puts spaces around an ideograph. (The list is short on
# purpose: the marks that end most CJK clauses.)
_CJK_PUNCT = rb"(?:\xe3\x80[\x81\x82]|\xef\xbc[\x81\x8c\x9b\x9f])"
_CJK_LETTER = (rb"(?:[\xe5-\xe9]|\xe4[\xb8-\xbf]|\xe3\x81[\x81-\xbf]|\xe3\x82[\x80-\x96\xa1-\xbf]"
               rb"|\xe3\x83[\x80-\xba])")
_CJK_RULE = "after CJK punctuation (、。！，；？) followed by a CJK ideograph or kana"
AFTER_WHITESPACE_OR_CJK = LineCut(rb"[ \t\r]|" + _CJK_PUNCT + rb"(?=" + _CJK_LETTER + rb")",
                                  f"{AFTER_WHITESPACE.rule}, or {_CJK_RULE}")
# ByteLevel (GPT-2 regex): cut before a space that follows a printable ASCII character `x`. All
# normalizers keep `x` a non-space character (at most lowercased), and no GPT-2 piece holds a
# non-space character followed by a space (` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` take a
# space only in front, `\s+` holds only spaces, contractions none), so a piece ends at `x` both
# ways; the regex has no look-behind, so the piece after starts alike; the `\s+(?!\S)` marker
# is never placed before `x`; and `add_prefix_space` adds nothing to a piece starting with a
# space. (A space after a non-ASCII character is not a safe cut: BERT's normalizer puts spaces
# around CJK characters and drops control characters, which can join two whitespace runs.)
BEFORE_SPACE_AFTER_ASCII = LineCut(rb"[\x21-\x7e](?= )",
                                   "before an ASCII space that follows a printable ASCII "
                                   "character")
# ... and after CJK punctuation as above (not with add_prefix_space, which would put a space
# before the letter that starts the piece after the cut).
BYTE_LEVEL_CUT = LineCut(BEFORE_SPACE_AFTER_ASCII.pattern + rb"|" + _CJK_PUNCT + rb"(?="
                         + _CJK_LETTER + rb")", f"{BEFORE_SPACE_AFTER_ASCII.rule}, or {_CJK_RULE}")
# Metaspace (split): every space becomes the replacement, and every piece starts at a
# replacement, so cutting before any space (but at the start) cuts between two pieces; the
# piece after starts with the replacement, so nothing is prepended to it.
BEFORE_SPACE = LineCut(rb"(?s:.)(?= )", "before an ASCII space")


# each kind's rule
RULES: dict[str, LineCut] = {
    kinds.AFTER_WHITESPACE: AFTER_WHITESPACE, kinds.AFTER_SPACE_OR_CR: AFTER_SPACE_OR_CR,
    kinds.AFTER_WHITESPACE_OR_CJK: AFTER_WHITESPACE_OR_CJK,
    kinds.BEFORE_SPACE_AFTER_ASCII: BEFORE_SPACE_AFTER_ASCII,
    kinds.BYTE_LEVEL_CUT: BYTE_LEVEL_CUT, kinds.BEFORE_SPACE: BEFORE_SPACE,
}


def line_cut(pretokenizer: PreTokenizer | None) -> LineCut | None:
    """The rule where the reader may cut a long line for `pretokenizer`; None: only at line
    ends (or no pre-tokenizer)."""
    kind = pretokenizer.line_cut() if pretokenizer is not None else None
    return RULES[kind] if kind is not None else None
