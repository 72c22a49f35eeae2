"""One child process measured: wall seconds, CPU seconds (user + system) and peak RSS, from
`wait4` (the benchmark scripts share this; each run is a fresh process timed spawn to exit).

The child's stderr goes to a temporary file, not a pipe: a long run that writes progress lines
cannot fill a pipe nobody reads while we wait.

Before the first child, the tokcolumnar package is byte-compiled (`compileall`), as `pip
install` does: an editable install run with PYTHONDONTWRITEBYTECODE=1 (set on some machines,
this one included) would otherwise compile every module from source in every child, ~0.1 s
that no installed package pays and HF's compiled extension never does."""

from __future__ import annotations

import compileall
import functools
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple


class Measurement(NamedTuple):
    """What one child cost. `wall`, `cpu` in seconds, `rss_mib` its peak resident set."""

    wall: float
    cpu: float
    rss_mib: float
    returncode: int = 0
    stderr: str = ""

    @property
    def failure(self) -> str | None:
        """How the child failed, in words (None when it exited 0): a signal by name — SIGKILL
        is what the kernel's OOM killer sends — or the exit status and stderr's last line."""
        if self.returncode == 0:
            return None
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            oom = " (the OOM killer's signal)" if name == "SIGKILL" else ""
            return f"killed by {name}{oom}"
        last = self.stderr.strip().splitlines()[-1] if self.stderr.strip() else ""
        return f"exit {self.returncode}: {last}" if last else f"exit {self.returncode}"


@functools.cache
def byte_compile_package() -> None:
    """Write the package's .pyc files once per benchmark process (see the module's docstring);
    Python reads existing .pyc files even when PYTHONDONTWRITEBYTECODE forbids writing them.
    The package is found, not imported: `import tokcolumnar` sets the allocator's default
    settings in this process's environment (`_RJEM_MALLOC_CONF`), which every child would
    inherit and take for the user's, so that a child `train` or `encode` would not choose
    its own (a 1 GB count: 17 -> 25 s, 39 -> 55 CPU-s)."""
    spec = importlib.util.find_spec("tokcolumnar")
    assert spec is not None and spec.submodule_search_locations, "tokcolumnar is not installed"
    compileall.compile_dir(list(spec.submodule_search_locations)[0], quiet=1)


def run(cmd: list[str], env: dict[str, str] | None = None, check: bool = True) -> Measurement:
    """Run `cmd` (stdout discarded) and measure it. With `check`, a failure ends the script
    with the command and its stderr; without, the failure is in the result."""
    byte_compile_package()
    with tempfile.TemporaryFile() as err_file:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err_file.seek(0)
        err = err_file.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if check and code != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{err}")
    return Measurement(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code, err)
