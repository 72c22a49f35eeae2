"""Progress lines on stderr while counting, merging and encoding; silent when stderr is not
a terminal (pipelines, CI) unless forced."""

from __future__ import annotations

import os
import sys
import time


class Progress:
    """A tiny progress reporter: `update(done)` redraws at most ten times a second."""

    def __init__(self, label: str, total: int | None = None, enabled: bool | None = None):
        if enabled is None:
            enabled = sys.stderr.isatty() and not os.environ.get("TOKCOLUMNAR_QUIET")
        self.enabled = enabled
        self.label = label
        self.total = total
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        total = f"/{self.total:,}" if self.total else ""
        sys.stderr.write(f"\r{self.label}: {done:,}{total}  [{now - self.start:.1f}s]   ")
        sys.stderr.flush()

    def close(self, done: int | None = None) -> None:
        if not self.enabled:
            return
        if done is not None:
            self.update(done, force=True)
        sys.stderr.write("\n")
        sys.stderr.flush()
