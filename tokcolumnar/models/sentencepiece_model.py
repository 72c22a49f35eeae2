"""SentencePiece's `.model` file (`ModelProto`, `sentencepiece_model.proto`): a small hand-written
protobuf writer and reader for the fields a Unigram model needs, so that
`sentencepiece.SentencePieceProcessor` loads what we train and we load what `spm_train` writes.

Only proto2 wire types 0 (varint), 1 (64-bit), 2 (length-delimited) and 5 (32-bit) exist in
these messages; a reader skips any field it does not know (as protobuf does), so files with
newer fields still load. Scores are float32 (`fixed32`), as SentencePiece stores them."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import TokcolumnarValueError

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2  # TrainerSpec.ModelType


@dataclass
class Piece:
    piece: str
    score: float = 0.0
    type: int = NORMAL


@dataclass
class NormalizerSpec:
    name: str = "identity"
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


@dataclass
class SentencePieceModel:
    """The fields of a ModelProto that we write and read. `trainer` holds TrainerSpec's
    scalar fields by number (the ones we set: model_type 3, vocab_size 4, byte_fallback 35,
    unk/bos/eos/pad ids 40-43); others read from a file are kept as raw bytes in `extra` and
    written back unchanged."""

    pieces: list[Piece]
    normalizer: NormalizerSpec = field(default_factory=NormalizerSpec)
    model_type: int = UNIGRAM
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    trainer_extra: bytes = b""  # TrainerSpec fields we do not interpret, as read
    denormalizer: bytes | None = None  # ModelProto field 5, as read

    def to_bytes(self) -> bytes:
        out = bytearray()
        for p in self.pieces:
            body = _string(1, p.piece) + _fixed32(2, p.score)
            if p.type != NORMAL:
                body += _varint_field(3, p.type)
            out += _message(1, body)
        trainer = (_varint_field(3, self.model_type) + _varint_field(4, len(self.pieces))
                   + _varint_field(35, int(self.byte_fallback))
                   + _varint_field(40, self.unk_id) + _varint_field(41, self.bos_id)
                   + _varint_field(42, self.eos_id) + _varint_field(43, self.pad_id)
                   + self.trainer_extra)
        out += _message(2, trainer)
        n = self.normalizer
        out += _message(3, _string(1, n.name) + _bytes(2, n.precompiled_charsmap)
                        + _varint_field(3, int(n.add_dummy_prefix))
                        + _varint_field(4, int(n.remove_extra_whitespaces))
                        + _varint_field(5, int(n.escape_whitespaces)))
        if self.denormalizer is not None:
            out += _bytes(5, self.denormalizer)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> SentencePieceModel:
        pieces: list[Piece] = []
        model = cls(pieces=pieces)
        for number, wire, value in _fields(data):
            if number == 1 and wire == 2:
                pieces.append(_piece(value))
            elif number == 2 and wire == 2:
                _trainer(model, value)
            elif number == 3 and wire == 2:
                model.normalizer = _normalizer(value)
            elif number == 5 and wire == 2:
                model.denormalizer = value
        if not pieces:
            raise TokcolumnarValueError("not a SentencePiece model: no pieces")
        return model


# --- writing -----------------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int32/int64 negatives: ten bytes, two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint_field(number: int, n: int) -> bytes:
    return _key(number, 0) + _varint(n)


def _fixed32(number: int, x: float) -> bytes:
    return _key(number, 5) + struct.pack("<f", x)


def _bytes(number: int, b: bytes) -> bytes:
    return _key(number, 2) + _varint(len(b)) + b


def _string(number: int, s: str) -> bytes:
    return _bytes(number, s.encode("utf-8"))


def _message(number: int, body: bytes) -> bytes:
    return _bytes(number, body)


# --- reading -----------------------------------------------------------------------------------

def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise TokcolumnarValueError("not a SentencePiece model: a truncated varint")
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def _fields(data: bytes):
    """(number, wire type, value) of each field: an int for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise TokcolumnarValueError(f"not a SentencePiece model: wire type {wire}")
        if i > len(data):
            raise TokcolumnarValueError("not a SentencePiece model: a truncated field")
        yield number, wire, value


def _signed(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _piece(data: bytes) -> Piece:
    p = Piece("")
    for number, wire, value in _fields(data):
        if number == 1 and wire == 2:
            p.piece = value.decode("utf-8")
        elif number == 2 and wire == 5:
            p.score = struct.unpack("<f", value)[0]
        elif number == 3 and wire == 0:
            p.type = value
    return p


def _trainer(model: SentencePieceModel, data: bytes) -> None:
    extra = bytearray()
    known = {3: "model_type", 35: "byte_fallback", 40: "unk_id", 41: "bos_id", 42: "eos_id",
             43: "pad_id"}
    for number, wire, value in _fields(data):
        if wire == 0 and number in known:
            name = known[number]
            setattr(model, name, bool(value) if name == "byte_fallback" else _signed(value))
        elif number == 4 and wire == 0:
            pass  # vocab_size: written again from the pieces
        else:
            extra += _key(number, wire)
            if wire == 0:
                extra += _varint(value)
            elif wire == 2:
                extra += _varint(len(value)) + value
            else:
                extra += value
    model.trainer_extra = bytes(extra)


def _normalizer(data: bytes) -> NormalizerSpec:
    n = NormalizerSpec(name="")
    for number, wire, value in _fields(data):
        if number == 1 and wire == 2:
            n.name = value.decode("utf-8")
        elif number == 2 and wire == 2:
            n.precompiled_charsmap = value
        elif number == 3 and wire == 0:
            n.add_dummy_prefix = bool(value)
        elif number == 4 and wire == 0:
            n.remove_extra_whitespaces = bool(value)
        elif number == 5 and wire == 0:
            n.escape_whitespaces = bool(value)
    return n


def unigram_model(pieces: list[str], scores: list[float], normalizer: NormalizerSpec,
                  meta: tuple[str, ...] = ("<unk>", "<s>", "</s>"),
                  byte_fallback: bool = False) -> SentencePieceModel:
    """The model `spm_train --model_type=unigram` would write for these trained pieces: the
    meta pieces first (`<unk>` UNKNOWN, the others CONTROL, score 0), with `byte_fallback`
    the 256 BYTE pieces `<0x00>` … `<0xFF>` (score 0), then the pieces."""
    head = [Piece(m, 0.0, UNKNOWN if i == 0 else CONTROL) for i, m in enumerate(meta)]
    if byte_fallback:
        head += [Piece(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
    return SentencePieceModel(head + [Piece(p, float(s)) for p, s in zip(pieces, scores)],
                              normalizer=normalizer, byte_fallback=byte_fallback)
