"""User-facing errors: one clear line, exit code 2, never a traceback.

`TokcolumnarError` is what the CLI prints (`tokcolumnar: error: <message>`, exit 2). Bad values
and bad types are raised as its subclasses `TokcolumnarValueError` (also a `ValueError`) and
`TokcolumnarTypeError` (also a `TypeError`), so that Python callers can catch the built-in
exception they expect while the CLI still sees one `TokcolumnarError`, with the same message.
Notes that do not stop a run (a side file that cannot be written exactly) are
`TokcolumnarWarning`s: Python shows them as warnings, the CLI as one `tokcolumnar: note:` line
(none with --quiet)."""

from __future__ import annotations

import warnings


class TokcolumnarError(Exception):
    """Bad input or settings. The CLI prints `tokcolumnar: error: <message>` and exits 2."""

    exit_code = 2


class TokcolumnarValueError(TokcolumnarError, ValueError):
    """A bad value: an option out of range or contradicting a preset, an unknown token id, a
    `tokenizer.json` or `run.json` that is not valid."""


class TokcolumnarTypeError(TokcolumnarError, TypeError):
    """A value of the wrong type given to the Python API (`vocab_size="500"`,
    `encode(123)`)."""


class TokcolumnarWarning(UserWarning):
    """Something the user should know about a run that still succeeded."""


def warn(message: str) -> None:
    """Emit a `TokcolumnarWarning` (the CLI prints it as one `tokcolumnar: note:` line)."""
    warnings.warn(message, TokcolumnarWarning, stacklevel=3)
