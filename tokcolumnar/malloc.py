"""The C allocator's settings for a command-line run (glibc only).

glibc serves a large block from its heap once a block of that size has been freed (its mmap
threshold rises with each large free, up to 32 MiB), and memory freed inside the heap goes back
to the system only from the heap's top. A run frees arrays of many MiB between stages (the
counting's tables, the layout before the result tables), so with the sliding threshold the
peak RSS holds memory that is no longer used (~28 MiB of 240 on a 20 MB corpus). A fixed
threshold keeps every large block in its own mapping, returned when freed."""

from __future__ import annotations

import ctypes
import os
import sys

M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
#: Blocks from this size get their own mapping (glibc's initial value, kept fixed).
MMAP_THRESHOLD = 128 * 1024


def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD`, unless the user set
    `MALLOC_MMAP_THRESHOLD_`; False where there is no glibc `mallopt`."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
