"""Standard output whose encoding cannot hold every character (`PYTHONIOENCODING=ascii`, a
`C` locale without UTF-8, a Windows code page): a command prints all of its result, each
character the encoding lacks as an escape, rather than fail with nothing printed. Text
(`escaping_stdout`): Python's `\\uXXXX` escapes, as Python already writes them on standard
error; JSON (`json_for_stdout`): JSON's own escapes, so that the output stays the same JSON."""

from __future__ import annotations

import codecs
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

#: The characters of Polars' default table borders (`UTF8_FULL_CONDENSED`).
_TABLE_BORDERS = "┌┬┐├┼┤└┴┘─│═╞╪╡┆…"


@contextlib.contextmanager
def escaping_stdout() -> Iterator[None]:
    """Within: what `sys.stdout`'s encoding cannot hold is written as Python's backslash
    escapes (`errors="backslashreplace"`), not refused with UnicodeEncodeError; the stream's
    own setting is restored after (`main` called from a program)."""
    stream = sys.stdout
    errors = getattr(stream, "errors", None)
    if errors != "strict" or not hasattr(stream, "reconfigure"):
        yield  # a stream that already escapes or replaces, or not a text file
        return
    try:
        stream.reconfigure(errors="backslashreplace")
    except (ValueError, OSError):  # (a closed stream)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):
            stream.reconfigure(errors=errors)


def holds(text: str, stream: Any = None) -> bool:
    """Whether the encoding of `stream` (standard output) can write every character of
    `text`."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:  # an encoding Python does not know: as it is
        return True
    return True


def table_borders_fit() -> bool:
    """Whether standard output can write the borders of Polars' default table (else a
    table is drawn with ASCII borders: `ASCII_FULL_CONDENSED`)."""
    return holds(_TABLE_BORDERS)


def escaped_for_stdout(text: str) -> str:
    """`text` with every character standard output's encoding cannot hold as Python's
    backslash escape (what `escaping_stdout` writes), for a table to measure its columns."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, errors="backslashreplace").decode(encoding)
    except LookupError:
        return text


def json_for_stdout(text: str) -> str:
    """JSON text with every character standard output's encoding cannot hold written as a
    JSON escape (`\\u00e9`; a surrogate pair beyond the BMP), which a JSON reader reads back
    as the same character: the same JSON, in characters the stream can write."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, errors=_JSON_ESCAPES).decode(encoding)
    except LookupError:
        return text


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: the characters an encoding lacks as JSON escapes (they are never
    JSON's syntax, which is ASCII: only the contents of strings)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    chunk = error.object[error.start:error.end]
    return json.dumps(chunk, ensure_ascii=True)[1:-1], error.end


_JSON_ESCAPES = "tokcolumnar.json-escapes"
codecs.register_error(_JSON_ESCAPES, _json_escapes)
