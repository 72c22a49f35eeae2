"""The GPT-2 byte-level alphabet: every UTF-8 byte is shown as one printable character.

`BYTES_TO_UNICODE[b]` is the character for byte `b` (HF `bytes_char()`, GPT-2 `bytes_to_unicode`):
printable Latin-1 bytes (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves, the 68 others are
mapped in byte order to U+0100, U+0101, ... (so the space is `Ġ` U+0120 and `\\n` is `Ċ` U+010A).

`byte_map_expr` applies the mapping to a Polars string expression without any per-string Python:
the string is cast to binary, hex-encoded, and the 256 two-digit codes are replaced in one
Aho-Corasick pass. Since every two-character hex string is a pattern, a leftmost match always
starts where the previous one ended, so the pass walks the bytes in step."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: byte value -> the character that stands for it."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
            + list(range(0xAE, 0xFF + 1)))
    table = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return dict(sorted(table.items()))


BYTES_TO_UNICODE: dict[int, str] = bytes_to_unicode()
UNICODE_TO_BYTES: dict[str, int] = {c: b for b, c in BYTES_TO_UNICODE.items()}
#: The 256 byte characters sorted by code point (the initial alphabet of a byte-level BPE).
BYTE_ALPHABET: tuple[str, ...] = tuple(sorted(BYTES_TO_UNICODE.values()))

_HEX_CODES = [f"{b:02x}" for b in range(256)]
_HEX_CHARS = [BYTES_TO_UNICODE[b] for b in range(256)]


def byte_map_expr(expr: pl.Expr) -> pl.Expr:
    """Map every UTF-8 byte of each string through `BYTES_TO_UNICODE` (vectorised)."""
    return expr.cast(pl.Binary).bin.encode("hex").str.replace_many(_HEX_CODES, _HEX_CHARS)


def byte_map(text: str) -> str:
    """`byte_map_expr` for one Python string."""
    return "".join(BYTES_TO_UNICODE[b] for b in text.encode("utf-8"))


def byte_map_bytes(data: bytes) -> str:
    """The byte-level characters of raw bytes (a token of a tiktoken vocabulary)."""
    return "".join(BYTES_TO_UNICODE[b] for b in data)


#: `str.translate`'s table from the byte characters to the code points 0-255 of their bytes;
#: a code point below 256 that is not a byte character goes to U+FFFF (no byte), so that a
#: token holding one fails to encode as Latin-1, as any character outside the alphabet does.
_TO_BYTE_POINTS = {ord(c): b for c, b in UNICODE_TO_BYTES.items()} | {
    p: 0xFFFF for p in range(256) if chr(p) not in UNICODE_TO_BYTES}


def token_bytes(token: str) -> bytes:
    """The bytes a token stands for, as HF's ByteLevel decoder reads it: the byte of each
    character when every character is in the alphabet, else the token's own UTF-8 bytes.
    (The characters become the code points of their bytes and those are encoded as
    Latin-1, both in C: a generator over the characters took ~0.1-0.2 s of a 30k
    vocabulary's export.)"""
    try:
        return token.translate(_TO_BYTE_POINTS).encode("latin-1")
    except UnicodeEncodeError:
        return token.encode("utf-8")


def decode_tokens(tokens: Iterable[str]) -> str:
    """Join byte-level tokens and decode the bytes as UTF-8, invalid sequences becoming U+FFFD
    (Rust's `String::from_utf8_lossy`, which replaces maximal invalid subparts as Python does)."""
    return b"".join(token_bytes(t) for t in tokens).decode("utf-8", errors="replace")
