"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import errno
import os
import re


class TokcolumnarError(Exception):
    """Bad input or settings. The CLI prints `tokcolumnar: error: <message>` and exits 2."""

    exit_code = 2


class Terminated(BaseException):
    """Raised by the CLI's SIGTERM handler (like KeyboardInterrupt for SIGINT), so that every
    `finally` removes its temporary files before the process exits with 143."""


_ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                       errno.EIO, errno.EMFILE, errno.ENFILE, errno.EFBIG)
_OS_ERROR_IN_TEXT = re.compile(r"(?:os error|errno) (\d+)", re.IGNORECASE)


def environment_message(exc: BaseException) -> str | None:
    """A one-line description of an error of the environment (no space, no permission, read-only
    file system, I/O error...) hiding in `exc`, or None if it is not one. Polars reports them
    as its own exceptions with "(os error N)" in the text; Python and Arrow as OSError."""
    if isinstance(exc, OSError) and exc.errno:
        where = exc.filename if isinstance(exc.filename, (str, bytes)) else None
        text = os.strerror(exc.errno)
        return f"{text}: {os.fsdecode(where)}" if where else text
    if not isinstance(exc, Exception):
        return None
    text = str(exc)
    m = _OS_ERROR_IN_TEXT.search(text)
    if m:
        return os.strerror(int(m.group(1)))
    for code in _ENVIRONMENT_ERRNOS:  # DuckDB names them only in words
        if os.strerror(code) in text:
            return os.strerror(code)
    return None
