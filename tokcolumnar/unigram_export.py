"""A trained Unigram model as files: the parts of the `Tokenizer` (and so `tokenizer.json`)
that encodes as SentencePiece encodes with the same pieces (`Tokenizer.from_unigram` assembles
them: this module does not import the tokenizer, which loads `.model` files through it), and
SentencePiece's own `tokenizer.model`.

The tokenizer: SentencePiece's whitespace handling (`remove_extra_whitespaces`: spaces at both
ends dropped, runs of spaces collapsed; only U+0020) as `Replace` normalizers, `Metaspace`
(the dummy `▁` in front, spaces as `▁`, a word before each `▁`: SentencePiece's
pieces never hold `▁` past their first character, so its Viterbi over a sentence is the
concatenation of the words' Viterbis), the `Unigram` model with the meta pieces first
(`<unk>` the unknown piece, `<s>` and `</s>` special tokens, score 0) and the `Metaspace`
decoder. docs/unigram.md."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import TokcolumnarValueError
from .models.sentencepiece_model import (
    BYTE,
    CONTROL,
    UNIGRAM,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    NormalizerSpec,
    SentencePieceModel,
    unigram_model,
)
from .models.unigram import UnigramModel
from .text.charsmap import nmt_nfkc_bytes
from .text.decoders import ByteFallbackDecoder, MetaspaceDecoder, SequenceDecoder
from .text.normalizers import Normalizer, Precompiled, Replace
from .text.normalizers import Sequence as NormalizerSequence
from .text.pretokenizers import Metaspace, PreTokenizer

META = ("<unk>", "<s>", "</s>")


def byte_pieces() -> list[str]:
    """SentencePiece's byte pieces `<0x00>` … `<0xFF>` (`ByteToPiece`)."""
    return [f"<0x{b:02X}>" for b in range(256)]


@dataclass
class UnigramParts:
    """A Unigram tokenizer's components; `special`: the special tokens, ids 0, 1, ..."""

    model: UnigramModel
    normalizer: Normalizer
    pre_tokenizer: PreTokenizer
    decoder: object
    special: list[str]


def unigram_parts(pieces: Sequence[str], scores: Sequence[float],
                  meta: Sequence[str] = META, before: Normalizer | None = None,
                  byte_fallback: bool = False) -> UnigramParts:
    """The tokenizer of trained pieces (meta pieces not included) and their scores; `before`:
    the run's normalizer (`--normalizer`), applied before the whitespace handling. With
    `byte_fallback`, the 256 byte pieces follow the meta pieces (score 0, as SentencePiece's
    BYTE pieces) and an unknown character is spelled in its UTF-8 bytes."""
    head = list(meta) + (byte_pieces() if byte_fallback else [])
    vocab = [(m, 0.0) for m in head] + [(p, float(s)) for p, s in zip(pieces, scores)]
    model = UnigramModel(vocab, unk_id=0, byte_fallback=byte_fallback)
    # SentencePiece strips the spaces in front and every space or `▁` at the end and collapses
    # runs of spaces; Metaspace puts the `▁` in front (not before a text that starts with a
    # `▁` of its own, where SentencePiece does: the one case that differs)
    parts: list[Normalizer] = [Replace("^ +|[ ▁]+$", "", regex=True),
                               Replace(" {2,}", " ", regex=True)]
    normalizer = NormalizerSequence(([before] if before is not None else []) + parts)
    decoder = (SequenceDecoder([ByteFallbackDecoder(), MetaspaceDecoder()]) if byte_fallback
               else MetaspaceDecoder())
    return UnigramParts(model, normalizer, Metaspace(), decoder, list(meta))


def normalizer_spec(normalizer: str | None) -> NormalizerSpec:
    """tokenizer.model's NormalizerSpec for `--normalizer`: `nmt_nfkc` with its char map
    (what spm_train writes by default), else `identity` (SentencePiece then applies no rule;
    the other --normalizer names have no SentencePiece equivalent)."""
    if normalizer == "nmt_nfkc":
        return NormalizerSpec(name="nmt_nfkc", precompiled_charsmap=nmt_nfkc_bytes())
    return NormalizerSpec(name="identity")


def sentencepiece_file(pieces: Sequence[str], scores: Sequence[float],
                       normalizer: NormalizerSpec | None = None,
                       byte_fallback: bool = False) -> bytes:
    """`tokenizer.model`: the ModelProto spm_train would write for these pieces."""
    model: SentencePieceModel = unigram_model(list(pieces), list(scores),
                                              normalizer or NormalizerSpec(name="identity"),
                                              byte_fallback=byte_fallback)
    return model.to_bytes()


def sentencepiece_parts(data: bytes) -> UnigramParts:
    """The tokenizer of a SentencePiece Unigram `.model` (ours or spm_train's) that encodes as
    `SentencePieceProcessor`: NORMAL pieces with their scores, UNKNOWN / CONTROL pieces as
    special tokens, BYTE pieces for byte fallback, the normalization rule's compiled char map
    (`nmt_nfkc` ...) as a `Precompiled` normalizer. Refused: other model types, user-defined
    pieces, a named rule without its char map."""
    model = SentencePieceModel.from_bytes(data)
    if model.model_type != UNIGRAM:
        raise TokcolumnarValueError("SentencePiece model: only Unigram and BPE models "
                                    "(model_type 1, 2) can be read, this one has model_type "
                                    f"{model.model_type}")
    spec = model.normalizer
    if not spec.precompiled_charsmap and spec.name not in ("identity", ""):
        raise TokcolumnarValueError(
            f"SentencePiece model: its normalization rule {spec.name!r} has no compiled char "
            "map in the file")
    before = Precompiled(spec.precompiled_charsmap) if spec.precompiled_charsmap else None
    if not (spec.add_dummy_prefix and spec.remove_extra_whitespaces
            and spec.escape_whitespaces):
        raise TokcolumnarValueError("SentencePiece model: only the default whitespace handling "
                                    "(add_dummy_prefix, remove_extra_whitespaces, "
                                    "escape_whitespaces) is supported")
    types = [p.type for p in model.pieces]
    if USER_DEFINED in types or UNUSED in types:
        raise TokcolumnarValueError("SentencePiece model: user-defined and unused pieces are "
                                    "not supported")
    special = [p.piece for p in model.pieces if p.type in (UNKNOWN, CONTROL)]
    n_special = len(special)
    head = model.pieces[:n_special]
    if [p.type in (UNKNOWN, CONTROL) for p in model.pieces[:n_special]] != [True] * n_special \
            or not head or head[0].type != UNKNOWN:
        raise TokcolumnarValueError("SentencePiece model: the unknown piece must come first, "
                                    "then the control pieces")
    byte_fallback = BYTE in types
    rest = model.pieces[n_special + (256 if byte_fallback else 0):]
    if byte_fallback and [p.piece for p in model.pieces[n_special:n_special + 256]] \
            != byte_pieces():
        raise TokcolumnarValueError("SentencePiece model: the 256 byte pieces must follow the "
                                    "meta pieces in order")
    return unigram_parts([p.piece for p in rest], [p.score for p in rest], special, before,
                         byte_fallback=byte_fallback)
