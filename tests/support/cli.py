"""The command line as the tests run it: `python -m tokcolumnar` in a subprocess (this checkout's
package first on PYTHONPATH), the one-line error it must give for bad input (`tokcolumnar:
error: ...`, exit code 2, no traceback, no usage), and snapshots of output directories."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support import markers

ROOT = Path(__file__).resolve().parents[2]
DUCKDB_COMMANDS = ("sql", "crosscheck")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI run: ours, with this checkout first on PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def _check_marked(args: tuple[str, ...]) -> None:
    engine = [b for a, b in zip(args, args[1:]) if a == "--engine"]
    if (args and args[0] in DUCKDB_COMMANDS) or "duckdb" in engine:
        markers.require("duckdb", f"runs `tokcolumnar {' '.join(args[:1])}` with DuckDB")


def command(*args: str) -> list[str]:
    """The argv of `python -m tokcolumnar ARGS`."""
    _check_marked(args)
    return [sys.executable, "-m", "tokcolumnar", *args]


def run_cli(*args: str, cwd: Path | None = None, umask: int | None = None,
            user: str | None = None, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 300
            ) -> subprocess.CompletedProcess:
    """Run `python -m tokcolumnar ARGS` (text output captured). `user` runs it as another user
    (root ignores permission bits), `umask` with that umask, `env` adds variables."""
    cmd = command(*args)
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          preexec_fn=pre, env=cli_env(env), input=input)


def error_line(stderr: str) -> str:
    """The single `tokcolumnar: error: ...` line of a failed run's stderr (asserted to be the
    only line, with no traceback and no usage text)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tokcolumnar: error: "), stderr
    assert "Traceback" not in stderr and "usage:" not in stderr, stderr
    return lines[0]


def assert_clean_error(proc: subprocess.CompletedProcess, needle: str = "") -> str:
    """A clean refusal: exit code 2 and one error line containing `needle`; the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    line = error_line(proc.stderr)
    assert needle in line, line
    return line


def run_measured(args: list[str], stdin_data: bytes | None = None, stdin_file: str | None = None,
                 timeout: float = 120) -> tuple[int, str, float, float]:
    """Run `python -m tokcolumnar ARGS`: (exit code, stderr, peak RSS in MiB of this child
    alone, seconds)."""
    cmd = command(*args)
    with tempfile.TemporaryFile() as err:
        stdin = open(stdin_file, "rb") if stdin_file else (  # noqa: SIM115
            subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=err,
                                env=cli_env())
        if stdin_data is not None:
            def feed() -> None:
                try:
                    proc.stdin.write(stdin_data)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            threading.Thread(target=feed, daemon=True).start()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if stdin_file:
            stdin.close()
        err.seek(0)
        return proc.returncode, err.read().decode(), usage.ru_maxrss / 1024, seconds


def snapshot(d: Path) -> dict[str, bytes]:
    """The files directly in `d` with their bytes."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def tree(d: Path) -> dict[str, bytes | None]:
    """Every path under `d` with its bytes (None for directories)."""
    return {str(p.relative_to(d)): (None if p.is_dir() else p.read_bytes())
            for p in sorted(d.rglob("*"))}


def no_temporaries(d: Path) -> bool:
    """No temporary output (`.NAME.tc-PID-XXXXXXXX.tmp|old`) is left under `d`."""
    return not [p for p in d.rglob(".*") if ".tc-" in p.name]
