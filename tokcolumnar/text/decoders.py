"""Decoders: a list of tokens -> text, exactly as HF `tokenizers` (0.23) decoders do.

As in HF, every decoder has `decode_chain(tokens) -> list[str]` (what it hands to the next
decoder of a `Sequence`) and `decode(tokens) = "".join(decode_chain(tokens))`. `Tokenizer.decode`
without a decoder joins the tokens with " " (`decode_tokens(tokens, None)`). Decoders work on one
list of tokens at a time (plain Python: there is no column to vectorise over)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import TokcolumnarValueError
from ..hfjson import HFObject, component_type
from .bytelevel import decode_tokens as _bytelevel_decode
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

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [_bytelevel_decode(tokens)]

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

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]

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

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, t in enumerate(tokens):
            if i != 0:
                t = t.replace(self.prefix, "", 1) if t.startswith(self.prefix) else " " + t
            if self.cleanup:
                t = _wordpiece_cleanup(t)
            out.append(t)
        return out

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

    def decode_chain(self, tokens: list[str]) -> list[str]:
        r = self.replacement
        drop_first = self.prepend_scheme != "never"
        return [t.replace(r, "" if i == 0 and drop_first else " ") for i, t in enumerate(tokens)]

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
