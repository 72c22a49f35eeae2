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
MiB instead of 560-590; medium/en.txt: 4.4 -> 3.6-3.8 CPU-s, 335-350 -> 365-385 MiB.

Fixing the mmap threshold also fixes glibc's trim threshold at its initial 128 KiB: whenever
more than that is free at the top of the heap it goes back to the system, so the next batch's
temporaries fault their pages in again. `encode` raises it to `ENCODE_TRIM_THRESHOLD`: one
thread encoding medium/zh.txt (30k byte-level BPE) took 305k minor page faults and 0.82 s of
system time with 128 KiB, 63k and 0.18 s with 128 MiB.

Polars' own allocator (jemalloc) returns freed pages at once in every run (`tokcolumnar/
__init__`); `encode` on the command line keeps them for 0.5 s instead, Polars' own default
(`ENCODE_JEMALLOC_CONF`, read when Polars loads): the reader's and the pre-tokenizer's
per-batch strings otherwise fault their pages in again for every batch (medium/zh.txt, kept
2 s: 247k -> 137k minor faults, 0.90 -> 0.46 s of system time, peak RSS +34 MiB; 0.5 s faults
as little, with a peak RSS ~50 MiB below 2 s's on zh/bert). Both settings together raise the
peak RSS of the medium files' runs by 15-50 MiB (zh, 30k byte-level BPE) to 130-300 MiB
(WordPiece; peaks of 520-670 MiB)."""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
#: Blocks from this size get their own mapping (glibc's initial value, kept fixed).
MMAP_THRESHOLD = 128 * 1024
#: The threshold of an `encode` run (its per-batch temporaries stay in the heap).
ENCODE_MMAP_THRESHOLD = 16 * 1024 * 1024
#: Free memory kept at the heap's top in an `encode` run (the next batch reuses it).
ENCODE_TRIM_THRESHOLD = 128 * 1024 * 1024


#: Polars' jemalloc settings of an `encode` run (freed dirty pages kept 0.5 s for reuse).
ENCODE_JEMALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:0"


def jemalloc_conf(argv: list[str]) -> str | None:
    """The Polars allocator settings a command line asks for (`ENCODE_JEMALLOC_CONF` for
    `encode`), None for the package's default; the command is the first argument that is
    not an option (the top-level parser has no option taking a value)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return ENCODE_JEMALLOC_CONF if command == "encode" else None


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD, trim_threshold: int | None = None
                       ) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes, unless the user set
    `MALLOC_MMAP_THRESHOLD_`, and its trim threshold at `trim_threshold` (when given) unless
    the user set `MALLOC_TRIM_THRESHOLD_`; False where there is no glibc `mallopt`."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    if trim_threshold is not None and "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        mallopt(M_TRIM_THRESHOLD, trim_threshold)
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
