"""Decoders: a list of tokens -> text, exactly as HF `tokenizers` (0.23) decoders do.

As in HF, every decoder has `decode_chain(tokens) -> list[str]` (what it hands to the next
decoder of a `Sequence`) and `decode(tokens) = "".join(decode_chain(tokens))`. `Tokenizer.decode`
without a decoder joins the tokens with " " (`decode_tokens(tokens, None)`).

Most decoders are *positional*: their text is the concatenation of one piece per token that
depends only on the token and on whether it is the first and/or the last of its row
(`Decoder.forms`). A column of id lists then decodes without a Python step per row or token
(`decode_rows`): each token's four pieces are built once per vocabulary (`DecodeTable`), and
the rows are NumPy gathers of those bytes through Arrow offsets. Other decoders (`Sequence`,
`ByteFallback`, `Fuse`, `Strip`, `Replace`) decode row by row."""

from __future__ import annotations

import codecs
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..buffers import list_parts, series_from_arrow
from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, component_type
from .bytelevel import decode_tokens as _bytelevel_decode
from .bytelevel import token_bytes
from .regex import check_regex, onig_to_rust, pattern_from_hf


class Decoder:
    hf_type: ClassVar[str] = ""
    registry: ClassVar[dict[str, type[Decoder]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hf_type:
            Decoder.registry[cls.hf_type] = cls

    def decode_chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def decode(self, tokens: list[str]) -> str:
        return "".join(self.decode_chain(list(tokens)))

    #: True when `forms` describes the decoder (see the module's docstring)
    positional: ClassVar[bool] = False

    def forms(self, token: str) -> tuple[bytes, bytes, bytes, bytes]:
        """A positional decoder's piece of `token` (UTF-8, or raw bytes for a byte-level
        decoder) in the middle of a row, first, last, and as the only token."""
        raise NotImplementedError

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type}

    @classmethod
    def fields(cls, d: dict[str, Any]) -> HFObject:
        """`d` with typed field access, named in errors as `decoder <type>`."""
        return HFObject(d, f"decoder {cls.hf_type}")

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        cls.fields(d)
        return cls()


@dataclass
class ByteLevelDecoder(Decoder):
    """HF `decoders.ByteLevel`: tokens -> bytes through the GPT-2 table (a token with a
    character outside the table counts as its own UTF-8 bytes), then UTF-8 with U+FFFD for
    invalid sequences."""

    hf_type: ClassVar[str] = "ByteLevel"
    add_prefix_space: bool = True
    trim_offsets: bool = True
    use_regex: bool = True

    positional: ClassVar[bool] = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [_bytelevel_decode(tokens)]

    def forms(self, token: str) -> tuple[bytes, bytes, bytes, bytes]:
        b = token_bytes(token)  # the row's bytes are decoded as UTF-8 once they are joined
        return b, b, b, b

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "add_prefix_space": self.add_prefix_space,
                "trim_offsets": self.trim_offsets, "use_regex": self.use_regex}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        f = cls.fields(d)
        return cls(f.bool("add_prefix_space", True), f.bool("trim_offsets", True),
                   f.bool("use_regex", True))


@dataclass
class BPEDecoder(Decoder):
    """HF `BPEDecoder`: the end-of-word `suffix` becomes a space (nothing in the last token)."""

    hf_type: ClassVar[str] = "BPEDecoder"
    suffix: str = "</w>"

    positional: ClassVar[bool] = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]

    def forms(self, token: str) -> tuple[bytes, bytes, bytes, bytes]:
        inner = token.replace(self.suffix, " ").encode()
        final = token.replace(self.suffix, "").encode()
        return inner, inner, final, final

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "suffix": self.suffix}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        return cls(cls.fields(d).str("suffix", "</w>"))


def _wordpiece_cleanup(text: str) -> str:
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                 (" n't", "n't"), (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"),
                 (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


@dataclass
class WordPieceDecoder(Decoder):
    """HF `decoders.WordPiece`: tokens after the first start a new word (" ") unless they carry
    `prefix`, which is removed; `cleanup` removes tokenization artefacts token by token."""

    hf_type: ClassVar[str] = "WordPiece"
    prefix: str = "##"
    cleanup: bool = True

    positional: ClassVar[bool] = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [self._piece(t, i == 0) for i, t in enumerate(tokens)]

    def _piece(self, token: str, first: bool) -> str:
        if not first:
            token = (token.replace(self.prefix, "", 1) if token.startswith(self.prefix)
                     else " " + token)
        return _wordpiece_cleanup(token) if self.cleanup else token

    def forms(self, token: str) -> tuple[bytes, bytes, bytes, bytes]:
        later, first = self._piece(token, False).encode(), self._piece(token, True).encode()
        return later, first, later, first

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "prefix": self.prefix, "cleanup": self.cleanup}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        f = cls.fields(d)
        return cls(f.str("prefix", "##"), f.bool("cleanup", True))


@dataclass
class MetaspaceDecoder(Decoder):
    """HF `decoders.Metaspace`: `replacement` -> " ", except that in the first token every
    replacement is dropped (unless `prepend_scheme` is "never")."""

    hf_type: ClassVar[str] = "Metaspace"
    replacement: str = "▁"
    prepend_scheme: str = "always"
    split: bool = True

    positional: ClassVar[bool] = True

    def decode_chain(self, tokens: list[str]) -> list[str]:
        r = self.replacement
        drop_first = self.prepend_scheme != "never"
        return [t.replace(r, "" if i == 0 and drop_first else " ") for i, t in enumerate(tokens)]

    def forms(self, token: str) -> tuple[bytes, bytes, bytes, bytes]:
        later = token.replace(self.replacement, " ").encode()
        first = (token.replace(self.replacement, "").encode()
                 if self.prepend_scheme != "never" else later)
        return later, first, later, first

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "replacement": self.replacement,
                "prepend_scheme": self.prepend_scheme, "split": self.split}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        f = cls.fields(d)
        scheme = f.str("prepend_scheme", None, nullable=True)
        if scheme is None:
            scheme = "always" if f.bool("add_prefix_space", True) else "never"
        return cls(f.str("replacement", "▁"), scheme.lower(), f.bool("split", True))


@dataclass
class ByteFallbackDecoder(Decoder):
    """HF `ByteFallback`: runs of `<0xAB>` tokens become the string of their bytes, or one
    U+FFFD per byte when they are not valid UTF-8."""

    hf_type: ClassVar[str] = "ByteFallback"

    @staticmethod
    def _byte(token: str) -> int | None:
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            digits = token[3:5]
            if all(c in "0123456789abcdefABCDEF" for c in digits):
                return int(digits, 16)
        return None

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run = bytearray()

        def flush() -> None:
            if run:
                try:
                    out.append(run.decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend("\ufffd" for _ in run)
                run.clear()

        for t in tokens:
            b = self._byte(t)
            if b is None:
                flush()
                out.append(t)
            else:
                run.append(b)
        flush()
        return out


@dataclass
class FuseDecoder(Decoder):
    """HF `Fuse`: all tokens as one."""

    hf_type: ClassVar[str] = "Fuse"

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


@dataclass
class StripDecoder(Decoder):
    """HF `decoders.Strip`: remove up to `start` leading and `stop` trailing `content` chars."""

    hf_type: ClassVar[str] = "Strip"
    content: str = " "
    start: int = 0
    stop: int = 0

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for t in tokens:
            a = 0
            while a < min(self.start, len(t)) and t[a] == self.content:
                a += 1
            b = len(t)
            while len(t) - b < min(self.stop, len(t) - a) and t[b - 1] == self.content:
                b -= 1
            out.append(t[a:b])
        return out

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "content": self.content, "start": self.start,
                "stop": self.stop}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        f = cls.fields(d)
        content = f.str("content")
        if len(content) != 1:
            raise f.error(f"'content' must be one character, got {content!r}")
        return cls(content, f.int("start", 0), f.int("stop", 0))


@dataclass
class ReplaceDecoder(Decoder):
    """HF `decoders.Replace`: in each token, `pattern` (literal, or an HF regex) -> `content`."""

    hf_type: ClassVar[str] = "Replace"
    pattern: str = "▁"
    content: str = " "
    regex: bool = False

    def __post_init__(self) -> None:
        self._rust = check_regex(onig_to_rust(self.pattern)) if self.regex else None

    def decode_chain(self, tokens: list[str]) -> list[str]:
        if self._rust is None:
            return [t.replace(self.pattern, self.content) for t in tokens]
        import polars as pl

        return pl.Series(tokens, dtype=pl.String).str.replace_all(
            self._rust, self.content.replace("$", "$$")).to_list()

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type,
                "pattern": {"Regex" if self.regex else "String": self.pattern},
                "content": self.content}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        f = cls.fields(d)
        pattern, is_regex = pattern_from_hf(f.raw("pattern"))
        return cls(pattern, f.str("content"), is_regex)


@dataclass
class SequenceDecoder(Decoder):
    hf_type: ClassVar[str] = "Sequence"
    decoders: list[Decoder] = field(default_factory=list)

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for d in self.decoders:
            tokens = d.decode_chain(tokens)
        return tokens

    def to_hf(self) -> dict[str, Any]:
        return {"type": self.hf_type, "decoders": [d.to_hf() for d in self.decoders]}

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> Decoder:
        parts = cls.fields(d).list("decoders")
        return cls([x for x in (decoder_from_hf(e) for e in parts) if x is not None])


def decoder_from_hf(d: Any) -> Decoder | None:
    """Build a decoder from its `tokenizer.json` object (None stays None); a decoder of an
    unsupported type or with a mistyped field is refused."""
    if d is None:
        return None
    _, kind = component_type(d, "decoder")
    cls = Decoder.registry.get(kind)
    if cls is None:
        raise TokcolumnarValueError(f"unsupported decoder in tokenizer.json: {kind!r}")
    return cls.from_hf_dict(d)


def decode_tokens(tokens: list[str], decoder: Decoder | None) -> str:
    """HF `Tokenizer.decode` once ids are tokens: the decoder, or the tokens joined by " "."""
    return " ".join(tokens) if decoder is None else decoder.decode(tokens)


# -- columnar decoding ------------------------------------------------------------------------
#: a token's position in its row, the index of its piece in `Decoder.forms`
MIDDLE, FIRST, LAST, ONLY = 0, 1, 2, 3


def joined_forms(token: str) -> tuple[bytes, bytes, bytes, bytes]:
    """No decoder: HF joins the tokens with " "."""
    later = (" " + token).encode()
    return later, token.encode(), later, token.encode()


@dataclass
class DecodeTable:
    """Every token's pieces in the four positions: the piece of token `i` in position `p` is
    `pieces[p * n_tokens + i]` (a Binary Series)."""

    n_tokens: int
    pieces: pl.Series
    may_be_invalid: bool  # byte-level pieces: a row's bytes can be invalid UTF-8

    @classmethod
    def build(cls, tokens: list[str], decoder: Decoder | None) -> DecodeTable | None:
        """The table of a positional decoder (or none); None for the others."""
        if decoder is not None and not decoder.positional:
            return None
        forms = joined_forms if decoder is None else decoder.forms
        by_token = [forms(t) for t in tokens]  # once per vocabulary, not per row
        pieces = [f[p] for p in (MIDDLE, FIRST, LAST, ONLY) for f in by_token]
        return cls(len(tokens), pl.Series("pieces", pieces, dtype=pl.Binary),
                   isinstance(decoder, ByteLevelDecoder))

    def decode(self, offsets: np.ndarray, ids: np.ndarray, valid: np.ndarray | None
               ) -> pl.Series:
        """The text of each row of ids (`ids[offsets[r]:offsets[r+1]]`, every id < n_tokens);
        rows where `valid` is False are null."""
        import pyarrow as pa  # deferred: training builds tokenizers, never decodes

        n_rows = len(offsets) - 1
        lengths = np.diff(offsets)
        # each token's position: first and/or last of its row (empty rows have neither)
        position = np.full(len(ids), MIDDLE, dtype=np.int64)
        starts, ends = offsets[:-1][lengths > 0], offsets[1:][lengths > 0] - 1
        position[starts] += FIRST
        position[ends] += LAST
        # one gather of every token's piece, by Polars (a memcpy per piece, ~5x NumPy's
        # gather of single bytes); as a large_binary Arrow array its data buffer is the rows'
        # bytes one after the other, and a row's bytes end where its last piece ends
        gathered = self.pieces.gather(position * self.n_tokens + ids).to_arrow()
        piece_offsets = np.frombuffer(gathered.buffers()[1], dtype=np.int64)
        row_offsets = piece_offsets[gathered.offset + offsets]
        data_buffer = gathered.buffers()[2]
        data = (np.zeros(0, dtype=np.uint8) if data_buffer is None else
                np.frombuffer(data_buffer, dtype=np.uint8)[row_offsets[0]:row_offsets[-1]])
        row_offsets = row_offsets - row_offsets[0]
        keep = np.ones(n_rows, dtype=bool) if valid is None else valid.copy()
        broken = utf8_broken_rows(data, row_offsets) if self.may_be_invalid else []
        keep[broken] = False  # invalid UTF-8 never enters a string column
        validity = None if keep.all() else pa.py_buffer(np.packbits(keep, bitorder="little"))
        strings = pa.LargeStringArray.from_buffers(
            n_rows, pa.py_buffer(row_offsets), pa.py_buffer(data), validity)
        texts = series_from_arrow("text", strings)
        if len(broken):
            # rows whose bytes are not UTF-8 (a multi-byte character cut between tokens) alone
            # decode in Python, U+FFFD replacing invalid parts as HF's from_utf8_lossy does
            texts = texts.scatter(broken, [
                bytes(data[row_offsets[r]:row_offsets[r + 1]]).decode("utf-8", errors="replace")
                for r in broken])
        return texts


_invalid_utf8 = threading.local()  # where `_record_invalid` notes what it finds, per thread


def _record_invalid(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: note where the invalid sequence starts and skip it."""
    assert isinstance(error, UnicodeDecodeError)
    _invalid_utf8.starts.append(error.start)
    return "", error.end


codecs.register_error("tokcolumnar.record_invalid", _record_invalid)


def utf8_broken_rows(data: np.ndarray, row_offsets: np.ndarray) -> np.ndarray:
    """The rows (`data[row_offsets[r]:row_offsets[r+1]]`) that may not be valid UTF-8: those
    holding a position where one decode of all the bytes finds an invalid sequence, and those
    whose first byte, or the byte after their last, continues a character. Every other row is
    whole characters, decoded without error: valid. (A few valid rows may be listed too.)"""
    total = len(data)
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    _invalid_utf8.starts = []
    data.tobytes().decode("utf-8", errors="tokcolumnar.record_invalid")  # one C pass
    starts, ends = row_offsets[:-1], row_offsets[1:]
    continuation = (data & 0xC0) == 0x80
    continuation = np.append(continuation, False)  # the "byte" after the last: none
    suspect = (ends > starts) & (continuation[np.minimum(starts, total)] | continuation[ends])
    if _invalid_utf8.starts:
        rows = np.searchsorted(row_offsets, np.asarray(_invalid_utf8.starts), side="right") - 1
        suspect[rows] = True
    return np.flatnonzero(suspect)


def decode_rows(ids: pl.Series, table: DecodeTable, skip: np.ndarray | None) -> pl.Series:
    """The texts of a list[int] Series of ids (null rows stay null), ids of `skip` (a bool
    mask over ids: special tokens when they are skipped) left out; every id < n_tokens."""
    offsets, flat = list_parts(ids)
    if skip is not None and skip.any():
        kept = ~skip[flat]
        flat = flat[kept]
        counts = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(kept, out=counts[1:])
        offsets = counts[offsets]
    valid = None if not ids.null_count() else ids.is_not_null().to_numpy()
    return table.decode(offsets, flat.astype(np.int64), valid).alias(ids.name)
