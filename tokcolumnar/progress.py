"""Progress lines on stderr while counting, merging and encoding; silent when stderr is not
a terminal (pipelines, CI) unless forced."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator


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


class StageTimer:
    """Wall time per stage of a run (`run.json`'s `timings_s`): `with timer.stage("count"):`
    adds the time of the block to that stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
