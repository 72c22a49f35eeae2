"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations


class TokcolumnarError(Exception):
    """Bad input or settings. The CLI prints `tokcolumnar: error: <message>` and exits 2."""

    exit_code = 2
