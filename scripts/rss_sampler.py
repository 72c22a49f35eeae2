"""The resident memory of this process, sampled every 2 ms on a thread and kept per named stage:
the sampler `measure_merge_memory.py` and `measure_unigram_memory.py` share (each names its
stages by wrapping the functions that run them)."""

from __future__ import annotations

import threading
import time


def rss_bytes() -> int:
    """This process's resident memory now (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class StageSampler:
    """The largest RSS of each stage, in the order the stages first ran: `stage` names what runs
    now (set by the caller's wrappers); `stop` ends the sampling."""

    def __init__(self) -> None:
        self.stage = "start"
        self.peaks: dict[str, int] = {}
        self.done = False
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done:
            rss, stage = rss_bytes(), self.stage
            if rss > self.peaks.get(stage, 0):
                self.peaks[stage] = rss
            time.sleep(0.002)

    def stop(self) -> None:
        self.done = True
        self.thread.join()
