"""SentencePiece-style BPE as files (`--preset llama2`, docs/llama2.md): the tokenizer.json parts
of Llama 2's published tokenizer (meta-llama/Llama-2-7b-hf, as transformers' `LlamaConverter`
writes it) and SentencePiece's own `tokenizer.model` (model_type BPE), for a vocabulary trained
as HF's `BpeTrainer` trains it.

**Why the merges in tokenizer.json are not the trainer's.** SentencePiece's BPE *encoder* does
not read merges: it repeatedly joins the adjacent pair whose concatenation is a piece with the
highest score (leftmost on ties). HF's BPE joins the listed pair of lowest rank. They agree when
tokenizer.json lists *every* pair of pieces `(a, b)` whose concatenation is a piece, ranked by
that piece's score — what `LlamaConverter` does, and what Llama 2's file holds (61,249 merges
for 32,000 pieces). The trainer's merge list alone would not do: a piece `abc` learned as
`a + bc` is also `ab + c` when `ab` is a piece, and SentencePiece joins `ab` and `c`.
So the pieces get the score `-(their index among the normal pieces)`: vocabulary order is
score order (the characters first, then each merge's token in the order the trainer made it),
and tokenizer.json lists, piece after piece in id order, each split `(a, b)` of the piece into
two normal pieces, ordered by (id of a, id of b) as transformers' `SentencePieceExtractor`
orders the splits of one piece. Special tokens and byte pieces are never halves (SentencePiece
keeps CONTROL and BYTE pieces out of its merge lookup)."""

from __future__ import annotations

from collections.abc import Sequence

from .llm_presets import LLAMA2_SPECIAL
from .models.sentencepiece_model import (
    BPE,
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    NormalizerSpec,
    Piece,
    SentencePieceModel,
)
from .text.decoders import (
    ByteFallbackDecoder,
    Decoder,
    FuseDecoder,
    ReplaceDecoder,
    SequenceDecoder,
    StripDecoder,
)
from .text.normalizers import Normalizer, Prepend, Replace
from .text.normalizers import Sequence as NormalizerSequence

#: the vocabulary kinds that are not normal pieces (`training.symbols`)
NOT_PIECES = ("special", "byte")


def llama2_normalizer() -> Normalizer:
    """Llama 2's normalizers: `▁` before every text, spaces as `▁`."""
    return NormalizerSequence([Prepend("▁"), Replace(" ", "▁")])


def llama2_decoder() -> Decoder:
    """Llama 2's decoders: `▁` as spaces, byte pieces as their text, one string, the dummy
    prefix's space removed."""
    return SequenceDecoder([ReplaceDecoder("▁", " "), ByteFallbackDecoder(), FuseDecoder(),
                            StripDecoder(" ", 1, 0)])


def sentencepiece_merges(tokens: Sequence[str], kinds: Sequence[str]) -> list[tuple[str, str]]:
    """tokenizer.json's merges for pieces ranked by id (see the module docstring): for each
    normal piece in id order, every split into two normal pieces, by (left id, right id)."""
    ids = {t: i for i, (t, k) in enumerate(zip(tokens, kinds)) if k not in NOT_PIECES}
    out: list[tuple[str, str]] = []
    for t, k in zip(tokens, kinds):
        if k in NOT_PIECES or len(t) < 2:
            continue
        splits = [(ids[t[:i]], ids[t[i:]], t[:i], t[i:]) for i in range(1, len(t))
                  if t[:i] in ids and t[i:] in ids]
        out.extend((a, b) for _, _, a, b in sorted(splits))
    return out


def piece_scores(kinds: Sequence[str]) -> list[float]:
    """Each token's SentencePiece score: 0 for special tokens and byte pieces (as
    SentencePiece's meta and BYTE pieces), `-k` for the k-th normal piece."""
    out, k = [], 0
    for kind in kinds:
        if kind in NOT_PIECES:
            out.append(0.0)
        else:
            out.append(-float(k))
            k += 1
    return out


def bpe_sentencepiece_file(tokens: Sequence[str], kinds: Sequence[str]) -> bytes:
    """`tokenizer.model`: a SentencePiece BPE ModelProto of the vocabulary in id order —
    `<unk>` UNKNOWN, the other special tokens CONTROL, the byte pieces BYTE, the rest NORMAL
    with `piece_scores` — with Llama 2's normalizer spec (no rule, the dummy prefix, spaces
    as `▁`, extra spaces kept) and `byte_fallback`."""
    pieces = []
    for t, k, s in zip(tokens, kinds, piece_scores(kinds)):
        kind = {"special": UNKNOWN if t == LLAMA2_SPECIAL[0] else CONTROL,
                "byte": BYTE}.get(k, NORMAL)
        pieces.append(Piece(t, s, kind))
    spec = NormalizerSpec(name="identity", add_dummy_prefix=True,
                          remove_extra_whitespaces=False, escape_whitespaces=True)
    model = SentencePieceModel(pieces, normalizer=spec, model_type=BPE,
                               byte_fallback=any(k == "byte" for k in kinds))
    return model.to_bytes()
