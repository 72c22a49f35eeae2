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
from dataclasses import dataclass

from .errors import TokcolumnarValueError
from .llm_presets import LLAMA2_SPECIAL
from .models.bpe import BPEModel
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
from .text.normalizers import Normalizer, Precompiled, Prepend, Replace
from .text.normalizers import Sequence as NormalizerSequence
from .text.pretokenizers import PreTokenizer, WholeSequence

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


def sentencepiece_merges(tokens: Sequence[str], kinds: Sequence[str],
                         scores: Sequence[float] | None = None) -> list[tuple[str, str]]:
    """tokenizer.json's merges for pieces ranked by id (see the module docstring), or with
    `scores` by (score desc, id): for each normal piece in that order, every split into two
    normal pieces, by (left id, right id)."""
    ids = {t: i for i, (t, k) in enumerate(zip(tokens, kinds)) if k not in NOT_PIECES}
    order = (range(len(tokens)) if scores is None
             else sorted(range(len(tokens)), key=lambda i: (-scores[i], i)))
    out: list[tuple[str, str]] = []
    for t, k in ((tokens[i], kinds[i]) for i in order):
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


@dataclass
class BPEParts:
    """A SentencePiece BPE model's tokenizer components; `special`: (token, id) of its
    UNKNOWN and CONTROL pieces."""

    model: BPEModel
    normalizer: Normalizer
    pre_tokenizer: PreTokenizer
    decoder: Decoder
    special: list[tuple[str, int]]


def sentencepiece_bpe_parts(model: SentencePieceModel) -> BPEParts:
    """The tokenizer of a SentencePiece BPE `.model` (ours or spm_train's) that encodes as
    `SentencePieceProcessor`: the pieces as the vocabulary, every split of a NORMAL piece into
    two NORMAL pieces as merges ranked by the piece's score (`sentencepiece_merges`), BYTE
    pieces for byte fallback, the normalizer spec as normalizers — the char map, the extra
    whitespace removal (as for Unigram, `unigram_export`), `Prepend("▁")` for the dummy
    prefix, spaces as `▁` — and no pre-tokenizer (Llama 2's form). Refused: user-defined and
    unused pieces, unescaped whitespace, byte fallback without the 256 byte pieces."""
    kinds = {NORMAL: "piece", UNKNOWN: "special", CONTROL: "special", BYTE: "byte"}
    if any(p.type not in kinds for p in model.pieces):
        raise TokcolumnarValueError("SentencePiece model: user-defined and unused pieces are "
                                    "not supported")
    spec = model.normalizer
    if not spec.escape_whitespaces:
        raise TokcolumnarValueError("SentencePiece model: only escaped whitespace "
                                    "(escape_whitespaces) is supported")
    if not spec.precompiled_charsmap and spec.name not in ("identity", ""):
        raise TokcolumnarValueError(
            f"SentencePiece model: its normalization rule {spec.name!r} has no compiled char "
            "map in the file")
    tokens = [p.piece for p in model.pieces]
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise TokcolumnarValueError("SentencePiece model: a piece is listed twice")
    unk = [p.piece for p in model.pieces if p.type == UNKNOWN]
    byte_fallback = model.byte_fallback and any(p.type == BYTE for p in model.pieces)
    steps: list[Normalizer] = []
    if spec.precompiled_charsmap:
        steps.append(Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:
        steps += [Replace("^ +|[ ▁]+$", "", regex=True), Replace(" {2,}", " ", regex=True)]
    if spec.add_dummy_prefix:
        steps.append(Prepend("▁"))
    steps.append(Replace(" ", "▁"))
    merges = sentencepiece_merges(tokens, [kinds[p.type] for p in model.pieces],
                                  [p.score for p in model.pieces])
    bpe = BPEModel(vocab, merges, unk_token=unk[0] if unk else None, fuse_unk=True,
                   byte_fallback=byte_fallback)
    if byte_fallback:
        missing = [b for b in range(256) if f"<0x{b:02X}>" not in vocab]
        if missing:
            raise TokcolumnarValueError(f"SentencePiece model: byte fallback without the byte "
                                        f"piece <0x{missing[0]:02X}>")
    decoder = (llama2_decoder() if spec.add_dummy_prefix else SequenceDecoder(
        [ReplaceDecoder("▁", " "), ByteFallbackDecoder(), FuseDecoder()]))
    special = [(p.piece, i) for i, p in enumerate(model.pieces) if p.type in (UNKNOWN, CONTROL)]
    return BPEParts(bpe, NormalizerSequence(steps), WholeSequence(), decoder, special)
