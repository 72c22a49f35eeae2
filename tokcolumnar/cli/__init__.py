"""Command line: `tokcolumnar train|count|encode|sql|crosscheck` (`parser` has the arguments,
`commands` the jobs).

Bad input and a failing environment (no space, no permission) end with one `tokcolumnar: error:
...` line and exit code 2; Ctrl-C exits 130 and SIGTERM 143, after every temporary file is
removed. `main` installs its signal handlers before the heavy libraries load (this module and
`tokcolumnar/__init__` import none; `parser` and `commands`, which import Polars, load after),
so an interruption during start-up is handled like any other."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any, NoReturn

from ..corpus import sources
from ..errors import (
    Terminated,
    TokcolumnarError,
    TokcolumnarWarning,
    environment_message,
    interrupt_raised,
    interrupts_kept,
)
from ..malloc import configure_for_command, fix_mmap_threshold
from ..stdout import escaping_stdout


def _on_signal(signum: int, frame: Any) -> None:
    """First SIGINT/SIGTERM: raise, so that every `finally` removes its temporary files; a
    second signal cannot interrupt that cleanup."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    interrupt = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
    interrupt_raised(interrupt)  # (a library may lose it: `errors.lost_interrupt`)
    raise interrupt()


@contextmanager
def notes_to_stderr(quiet: bool) -> Iterator[None]:
    """Print each `TokcolumnarWarning` raised while running a command as one
    `tokcolumnar: note: ...` line on stderr (nothing with --quiet); other warnings as usual."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", TokcolumnarWarning)
        shown = warnings.showwarning

        def show(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None,
                 line: Any = None) -> None:
            if not issubclass(category, TokcolumnarWarning):
                shown(message, category, filename, lineno, file, line)
            elif not quiet:
                print(f"tokcolumnar: note: {message}", file=sys.stderr)

        warnings.showwarning = show
        yield


_interrupt_reported = False


def _on_unraisable(hook: Any) -> None:
    """An interrupt raised where Python cannot propagate it — inside a finalizer, e.g. while a
    generator is being closed — would be printed as "Exception ignored" and lost. Raise it again
    a moment later instead, from a SIGALRM, once the finalizer has returned (if that lands in a
    finalizer too, this runs again) — unless `main` is already reporting an interrupt."""
    if isinstance(hook.exc_value, (KeyboardInterrupt, Terminated)):
        if not _interrupt_reported:
            pending = type(hook.exc_value)

            def redeliver(signum: int, frame: Any) -> None:
                if not _interrupt_reported:
                    raise pending()

            signal.signal(signal.SIGALRM, redeliver)
            signal.setitimer(signal.ITIMER_REAL, 0.001)
        return
    sys.__unraisablehook__(hook)


def _report_interrupt(message: str) -> None:
    """Stop any pending re-delivery (a SIGALRM after exit would kill the process) and say it."""
    global _interrupt_reported
    _interrupt_reported = True
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    print(message, file=sys.stderr)


#: The BLAS threads of a command-line run: one. tokcolumnar makes no BLAS call (its NumPy
#: work is integer and element-wise), and OpenBLAS, loaded with NumPy, otherwise starts a
#: thread per core that spins for a while on start-up: ~0.08 CPU-s of every command on two
#: cores, and a core taken from Polars for as long. A setting of the user's wins; `import
#: tokcolumnar` in a program leaves it alone (that program's NumPy may need its threads).
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def main(argv: list[str] | None = None) -> int:
    for name, value in BLAS_THREADS.items():  # read when NumPy loads, below
        os.environ.setdefault(name, value)
    interrupt_raised(None)  # (none yet: an earlier `main` in this process may have had one)
    watching = False
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    sys.unraisablehook = _on_unraisable
    try:  # (an interrupt from here on is reported as one, start-up included)
        watching = _watch_signals()
        fix_mmap_threshold()  # freed arrays go back to the system (tokcolumnar.malloc)
        # the settings the command's work wants, before Polars loads (tokcolumnar.malloc)
        configure_for_command(sys.argv[1:] if argv is None else argv)
        return _run(argv)
    except KeyboardInterrupt:
        _report_interrupt("tokcolumnar: interrupted (outputs left as they were)")
        return 130
    except Terminated:
        _report_interrupt("tokcolumnar: terminated (outputs left as they were)")
        return 143
    finally:
        if watching:
            sources.wake_reads_on(None)
            signal.set_wakeup_fd(-1)


#: The pipe a signal writes its number to (`signal.set_wakeup_fd`): (read end, write end).
_signal_pipe: tuple[int, int] | None = None


def _watch_signals() -> bool:
    """Make the pipe reads of the run give up when a signal arrives (`sources.wake_reads_on`):
    the handler raises the interrupt in the main thread only once it runs Python, and a main
    thread waiting in Arrow for a pipe nobody writes to (a JSONL or CSV input on standard
    input, read in Arrow's threads) never would. False, and nothing changed, when the program
    that called `main` watches signals with a descriptor of its own (asyncio does)."""
    global _signal_pipe
    if _signal_pipe is None:
        _signal_pipe = os.pipe()
        for fd in _signal_pipe:
            os.set_blocking(fd, False)  # (Python writes to it from a signal handler)
    read_end, write_end = _signal_pipe
    with contextlib.suppress(OSError):
        while os.read(read_end, 512):  # signals of an earlier `main` in this process
            pass
    theirs = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    if theirs != -1:
        signal.set_wakeup_fd(theirs)
        return False
    sources.wake_reads_on(read_end)
    return True


#: Whether the cyclic garbage collector is paused for the program's start-up (`run`).
_collector_paused = False


def run() -> NoReturn:
    """The program (`tokcolumnar ...`, `python -m tokcolumnar ...`): `main` with the garbage
    collector paused while the libraries load (`_libraries_loaded`), then the end of the
    process without the interpreter's teardown (`exit_quickly`)."""
    global _collector_paused
    gc.disable()
    _collector_paused = True
    exit_quickly(main())


def _libraries_loaded() -> None:
    """Resume the collector `run` paused, with what exists now frozen out of its passes
    (`gc.freeze`): the modules, classes and functions of Polars, NumPy and ours live until the
    process ends, and collecting them finds nothing. Loading them with the collector on cost
    ~0.03-0.06 s of a small run (a full collection traverses every object loaded so far), and
    each later full collection would traverse them again. `main` called from Python leaves its
    caller's collector alone."""
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        gc.enable()


def _take_back_sigint() -> None:
    """Make `_on_signal` SIGINT's handler again once Polars is loaded. Importing Polars
    installs a SIGINT handler of its own in front of Python's (a native one, invisible to
    `signal.getsignal`), which makes every Polars query running at a Ctrl-C, in any thread,
    abort by unwinding a Rust panic through its engine and raise KeyboardInterrupt there.
    The command's work needs none of that: the main thread's KeyboardInterrupt already stops
    it at the next batch, whose queries each end within a second, and its cleanup waits for
    the threads' current batches. Unwinding mid-query is what a command must not risk: once
    in CI, a Ctrl-C during `encode` ended in a segmentation fault (exit -11, not reproduced in
    200 runs since) instead of exit 130, and this handler is the one native code that acts
    on SIGINT and not on SIGTERM (which never failed). It also sets SA_RESTART, so a Ctrl-C
    would not interrupt a blocking system call (pola-rs/polars#21739). Nothing changes once
    the first interrupt has been handled (the signal is then ignored)."""
    if signal.getsignal(signal.SIGINT) is _on_signal:
        signal.signal(signal.SIGINT, _on_signal)


def exit_quickly(code: int) -> NoReturn:
    """End the process as a normal exit would, less the teardown of the interpreter's objects
    and modules: 0.07 s after `import polars` alone, 0.1-0.2 s after a command (measured
    from `main`'s return to the parent's `wait4`), a fixed cost of every run that does no
    work. What a normal exit does first is done here too, in its order: threads that are not
    daemons are waited for, `atexit` handlers run (temporary directories' finalizers, Ray's
    shutdown), then the standard streams are flushed. Every output is complete and in place
    before `main` returns (`outputs`), so nothing is lost with the objects (CPython's own
    `multiprocessing` ends its children this way)."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # (what Py_FinalizeEx calls)
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader gone (`| head`), a closed stream
                pass
        os._exit(code)


def _run(argv: list[str] | None) -> int:
    # loaded here, after the signal handlers: they import Polars and the rest
    parser = import_module(".parser", __name__)
    commands = import_module(".commands", __name__)
    _take_back_sigint()
    _libraries_loaded()
    args = parser.build_parser().parse_args(argv)
    quiet_before = os.environ.get("TOKCOLUMNAR_QUIET")
    if getattr(args, "quiet", False):
        os.environ["TOKCOLUMNAR_QUIET"] = "1"  # for this command only (restored below)
    try:
        # (an error in place of the interrupt our handler raised is the interrupt; what
        # standard output's encoding cannot hold is printed as escapes: `tokcolumnar.stdout`)
        with interrupts_kept(), escaping_stdout(), notes_to_stderr(getattr(args, "quiet", False)):
            return commands.COMMANDS[args.command_name](args)
    except TokcolumnarError as e:
        print(f"tokcolumnar: error: {e}", file=sys.stderr)
        return e.exit_code
    except MemoryError:
        print("tokcolumnar: error: out of memory", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, and keep Python from reporting
        # the pipe again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the environment, or a bug: one line either way
        env = environment_message(e)
        if env is not None:
            print(f"tokcolumnar: error: {env}", file=sys.stderr)
            return 2
        if os.environ.get("TOKCOLUMNAR_DEBUG"):
            raise
        print(f"tokcolumnar: internal error: {type(e).__name__}: {e} "
              "(set TOKCOLUMNAR_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1
    finally:
        # `main([..., "--quiet"])` called from Python leaves the process's progress as it was
        if quiet_before is None:
            os.environ.pop("TOKCOLUMNAR_QUIET", None)
        else:
            os.environ["TOKCOLUMNAR_QUIET"] = quiet_before


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
