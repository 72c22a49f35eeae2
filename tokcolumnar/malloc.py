"""The C allocator's settings for a command-line run (glibc only).

glibc serves a large block from its heap once a block of that size has been freed (its mmap
threshold rises with each large free, up to 32 MiB), and memory freed inside the heap goes back
to the system only from the heap's top. A run frees arrays of many MiB between stages (the
counting's tables, the layout before the result tables), so with the sliding threshold the
peak RSS holds memory that is no longer used (~28 MiB of 240 on a 20 MB corpus). A fixed
threshold keeps every large block in its own mapping, returned when freed.

`encode` raises the fixed threshold to `ENCODE_MMAP_THRESHOLD`: its stages allocate and free
temporaries of a few MiB for every batch (the BPE merge loop, every round), and a fresh mapping
per temporary costs a page fault per 4 KiB touched. medium/zh.txt, 30k byte-level BPE: 2.8-2.9
of 7.0-7.3 CPU-s were system time; with 16 MiB 1.2-1.6 of 5.1-5.4, for a peak RSS of 600-680
MiB instead of 560-590; medium/en.txt: 4.4 -> 3.6-3.8 CPU-s, 335-350 -> 365-385 MiB."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
#: Blocks from this size get their own mapping (glibc's initial value, kept fixed).
MMAP_THRESHOLD = 128 * 1024
#: The threshold of an `encode` run (its per-batch temporaries stay in the heap).
ENCODE_MMAP_THRESHOLD = 16 * 1024 * 1024
#: The threshold while words are counted (`counting_heap`): glibc's largest.
COUNT_MMAP_THRESHOLD = 32 * 1024 * 1024

#: Input bytes from which a command-line count keeps freed pages for a while
#: (`keep_freed_pages_for_large_counts`).
LARGE_COUNT_BYTES = 512 * 1000 * 1000
#: Polars' allocator (jemalloc) for such a count: freed pages kept up to a second for reuse.
LARGE_COUNT_MALLOC_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:0"

#: Whether this command-line run counts a large input (`keep_freed_pages_for_large_counts`):
#: counting then trades memory for speed (freed pages kept, two batches counted at once).
large_count = False

#: The threshold `fix_mmap_threshold` set (None: glibc's own sliding threshold is in use).
_fixed_threshold: int | None = None


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes, unless the user set
    `MALLOC_MMAP_THRESHOLD_`; False where there is no glibc `mallopt`."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    if not mallopt(M_MMAP_THRESHOLD, threshold):
        return False
    global _fixed_threshold
    _fixed_threshold = threshold
    return True


@contextlib.contextmanager
def counting_heap() -> Iterator[None]:
    """While counting, blocks up to `COUNT_MMAP_THRESHOLD` come from the heap: the count
    allocates and frees temporaries of a few MiB per batch (decoded text, the NumPy arrays of
    `corpus.counting`), and a fresh mapping each costs a page fault per 4 KiB touched (100 MB
    of English, whitespace: 856k -> 540k minor faults, 2.0 -> 1.3 s of system time). Then the
    fixed threshold is restored and the freed heap given back (`malloc_trim`), so the stages
    after keep the small peak. Nothing happens unless `fix_mmap_threshold` fixed it."""
    if _fixed_threshold is None:
        yield
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(M_MMAP_THRESHOLD, COUNT_MMAP_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, _fixed_threshold)
        libc.malloc_trim(0)


def keep_freed_pages_for_large_counts(argv: list[str]) -> bool:
    """Before Polars loads, for `train` / `count` of at least `LARGE_COUNT_BYTES` of input
    files: let Polars' allocator keep freed pages for a second (`LARGE_COUNT_MALLOC_CONF`)
    instead of returning them at once (`tokcolumnar/__init__`). Counting allocates and frees
    tens of MiB per 4 MiB batch; returned at once, every page is faulted in again: 1 GB of
    English, whitespace 50k, 52 -> 44 CPU-s, peak RSS 605 -> 607 MiB (one run each, loads 6
    and 4; docs/architecture.md, "Counting"). On medium files the kept pages would raise the peak
    instead (medium/en byte-level +115 MiB), hence the size. The inputs are the arguments that
    name existing files, or globs matching files (directories are not walked: an estimate).
    Such a run is a `large_count` (counting two batches at once), also when the user set
    `_RJEM_MALLOC_CONF` (then left as it is); nothing once Polars is loaded. True for a large
    count."""
    import glob

    import tokcolumnar

    if not any(a in ("train", "count") for a in argv[:1]) or "polars" in sys.modules:
        return False
    total = 0
    for arg in argv[1:]:
        if arg.startswith("-"):
            continue
        paths = glob.glob(arg) if glob.has_magic(arg) else [arg]
        for path in paths:
            with contextlib.suppress(OSError):
                if os.path.isfile(path):
                    total += os.path.getsize(path)
    if total < LARGE_COUNT_BYTES:
        return False
    global large_count
    large_count = True  # two batches at once (corpus.counting.fold_chunks)
    if tokcolumnar._USER_MALLOC_CONF:
        return True
    os.environ["_RJEM_MALLOC_CONF"] = LARGE_COUNT_MALLOC_CONF
    return True
