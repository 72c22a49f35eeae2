"""The command's first lines (`tokcolumnar ...`, `python -m tokcolumnar ...`): a Ctrl-C or
SIGTERM that arrives before `cli.main` installs its own handlers (while `cli` and its imports
load, some 50-100 ms on a busy machine) ends the run with its one line and exit code, as any
later interruption does, instead of Python's KeyboardInterrupt traceback. Nothing has been
written yet at that point, so there is nothing to clean up. Only the standard library is
imported before the handlers are set."""

from __future__ import annotations

import os
import signal
from typing import Any, NoReturn


def _before_main(signum: int, frame: Any) -> None:
    """A signal before `cli.main` took over: its line and exit code, at once."""
    if signum == signal.SIGTERM:
        os.write(2, b"tokcolumnar: terminated (outputs left as they were)\n")
        os._exit(143)
    os.write(2, b"tokcolumnar: interrupted (outputs left as they were)\n")
    os._exit(130)


def run() -> NoReturn:
    """Set the early handlers, then run the command line (`cli.run`, which replaces them)."""
    signal.signal(signal.SIGINT, _before_main)
    signal.signal(signal.SIGTERM, _before_main)
    from .cli import run as cli_run

    cli_run()
