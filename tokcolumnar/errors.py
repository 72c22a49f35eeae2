"""User-facing errors: one clear line, exit code 2, never a traceback.

`TokcolumnarError` is what the CLI prints (`tokcolumnar: error: <message>`, exit 2). Bad values
and bad types are raised as its subclasses `TokcolumnarValueError` (also a `ValueError`) and
`TokcolumnarTypeError` (also a `TypeError`), so that Python callers can catch the built-in
exception they expect while the CLI still sees one `TokcolumnarError`, with the same message.
Notes that do not stop a run (a side file that cannot be written exactly) are
`TokcolumnarWarning`s: Python shows them as warnings, the CLI as one `tokcolumnar: note:` line
(none with --quiet)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import warnings
from collections.abc import Iterator


class TokcolumnarError(Exception):
    """Bad input or settings. The CLI prints `tokcolumnar: error: <message>` and exits 2."""

    exit_code = 2


class TokcolumnarValueError(TokcolumnarError, ValueError):
    """A bad value: an option out of range or contradicting a preset, an unknown token id, a
    `tokenizer.json` or `run.json` that is not valid."""


class TokcolumnarTypeError(TokcolumnarError, TypeError):
    """A value of the wrong type given to the Python API (`vocab_size="500"`,
    `encode(123)`)."""


class TokcolumnarEnvironmentError(TokcolumnarError):
    """The environment failed a write (no space, no permission, read-only file system...): the
    message names the path being written. Unlike refused input, it leaves a run's work
    directory for `--resume` when that holds saved state (`training.pipeline`)."""


class TokcolumnarWarning(UserWarning):
    """Something the user should know about a run that still succeeded."""


def warn(message: str) -> None:
    """Emit a `TokcolumnarWarning` (the CLI prints it as one `tokcolumnar: note:` line)."""
    warnings.warn(message, TokcolumnarWarning, stacklevel=3)


class Terminated(BaseException):
    """Raised by the CLI's SIGTERM handler (like KeyboardInterrupt for SIGINT), so that every
    `finally` removes its temporary files before the process exits with 143."""


#: The interrupt the CLI's signal handler raised (KeyboardInterrupt or Terminated), if any.
_raised_interrupt: type[BaseException] | None = None


def interrupt_raised(kind: type[BaseException] | None) -> None:
    """Record that the CLI's signal handler raised an interrupt of `kind` (None: forget it, a
    new `main` in the same process)."""
    global _raised_interrupt
    _raised_interrupt = kind


def lost_interrupt() -> BaseException | None:
    """A new interrupt of the kind the CLI's signal handler raised, None when it raised none.
    For an error that took its place: DuckDB's Python client looks for signals while a query
    runs, and when our handler raises there, DuckDB ends the query and raises
    `RuntimeError: Query interrupted` (or its `InterruptException`) instead, the interrupt
    lost (it ran once: the handler ignores the signals from then on)."""
    return None if _raised_interrupt is None else _raised_interrupt()


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """Raise the interrupt the CLI's handler raised in place of any error within that took
    its place (`lost_interrupt`): an interrupted run ends as interrupted (exit 130 / 143, a
    work directory kept for --resume), whatever failed once it was."""
    try:
        yield
    except Exception:
        interrupt = lost_interrupt()
        if interrupt is not None:
            raise interrupt from None
        raise


_ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS,
                       errno.EIO, errno.EMFILE, errno.ENFILE, errno.EFBIG)
_OS_ERROR_IN_TEXT = re.compile(r"(?:os error|errno) (\d+)", re.IGNORECASE)


def environment_reason(exc: BaseException) -> str | None:
    """What `environment_message` says about `exc`, without the file name (the caller names
    the path it was writing: a user's output, not our temporary beside it)."""
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)
    return environment_message(exc)


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
def word_too_long(size: str, max_word_chars: int) -> str:
    """The message for a pre-token over --max-word-chars (`size`: its length in characters,
    e.g. "12,345" or "more than 1,000,000"), the same from every place that finds one."""
    return (f"a pre-token of {size} characters exceeds --max-word-chars {max_word_chars:,} "
            "(a huge line without separators?); split the input, choose another pre-tokenizer, "
            "or raise the limit")
