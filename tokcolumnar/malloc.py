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

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

from .sizes import default_limit, parse_size

M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Blocks from this size get their own mapping (glibc's initial value, kept fixed).
MMAP_THRESHOLD = 128 * 1024
#: The threshold of an `encode` run (its per-batch temporaries stay in the heap).
ENCODE_MMAP_THRESHOLD = 16 * 1024 * 1024
#: Free memory kept at the heap's top in an `encode` run (the next batch reuses it).
ENCODE_TRIM_THRESHOLD = 128 * 1024 * 1024
#: The threshold while words are counted (`counting_heap`): glibc's largest.
COUNT_MMAP_THRESHOLD = 32 * 1024 * 1024

#: The merge loop's thresholds (`merging_heap`): blocks up to 1 MiB from the heap, and up to
#: 32 MiB free at its top kept for the next pass.
MERGE_MMAP_THRESHOLD = 1024 * 1024
MERGE_TRIM_THRESHOLD = 32 * 1024 * 1024
#: The Unigram trainer's thresholds (`unigram_heap`): blocks up to 24 MiB from the heap, and
#: up to 128 MiB free at its top kept for the next pass.
UNIGRAM_MMAP_THRESHOLD = 24 * 1024 * 1024
UNIGRAM_TRIM_THRESHOLD = 128 * 1024 * 1024
#: glibc's initial trim threshold (what a fixed mmap threshold leaves it at).
TRIM_THRESHOLD = 128 * 1024

#: Input bytes from which a command-line count keeps freed pages for a while
#: (`is_large_count`).
LARGE_COUNT_BYTES = 512 * 1000 * 1000
#: The least --memory-limit (or default limit) under which a large count keeps Polars' freed
#: pages: they must not take a small limit's room. 600 MB of English, `--preset gpt2
#: --memory-limit 300MB`, `count` alone (2026-11-29, 2 cores shared with tests): peak RSS 423
#: MiB keeping them, 294 not (65 -> 80 s), 245 with no large count at all (99 s): ~130 MiB
#: kept, beside ~190 MB of the count's own work, the running table (a fifth of the limit) and
#: its fold (twice that) — within 1 GB. (glibc's heap, `counting_heap`, stays: ~50 MiB.)
LARGE_COUNT_MIN_LIMIT = 10**9
#: Polars' allocator (jemalloc) for such a count: freed pages kept up to a second for reuse.
LARGE_COUNT_MALLOC_CONF = "dirty_decay_ms:1000,muzzy_decay_ms:0"

#: Whether this command-line run counts a large input (`is_large_count`):
#: counting then trades memory for speed (freed pages kept, temporaries reused from the heap).
large_count = False

#: The threshold `fix_mmap_threshold` set (None: glibc's own sliding threshold is in use).
_fixed_threshold: int | None = None


#: Polars' allocator (jemalloc) settings of every run unless the user set their own
#: (`tokcolumnar/__init__` sets them before Polars can load): freed pages returned at once.
DEFAULT_JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"
#: Whether the user set `_RJEM_MALLOC_CONF` (theirs is never changed); read when tokcolumnar
#: loads, before the default is set.
USER_JEMALLOC_CONF = "_RJEM_MALLOC_CONF" in os.environ

#: Polars' jemalloc settings of an `encode` run (freed dirty pages kept 0.5 s for reuse).
ENCODE_JEMALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:0"


def command_of(argv: list[str]) -> str | None:
    """The command of a command line: the first argument that is not an option (the top-level
    parser has no option taking a value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def is_large_count(argv: list[str]) -> bool:
    """Whether a command line is a `train` / `count` of at least `LARGE_COUNT_BYTES` of input
    files (the arguments after the command that name existing files, or globs matching files;
    directories are not walked: an estimate)."""
    import glob

    command = command_of(argv)
    if command not in ("train", "count"):
        return False
    total = 0
    for arg in argv[argv.index(command) + 1:]:
        if arg.startswith("-"):
            continue
        paths = glob.glob(arg) if glob.has_magic(arg) else [arg]
        for path in paths:
            with contextlib.suppress(OSError):
                if os.path.isfile(path):
                    total += os.path.getsize(path)
    return total >= LARGE_COUNT_BYTES


def command_limit(argv: list[str]) -> int:
    """The memory limit of a command line: its `--memory-limit` (the last one given, as
    argparse reads it), else the default; 0 for a value that is not a size (the command
    refuses it)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--memory-limit" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--memory-limit="):
            value = arg.split("=", 1)[1]
    if value is None:
        return default_limit()
    try:
        return parse_size(value)
    except ValueError:
        return 0


def jemalloc_conf(argv: list[str], large: bool = False) -> str | None:
    """The Polars allocator settings a command line asks for: `ENCODE_JEMALLOC_CONF` for
    `encode`, `LARGE_COUNT_MALLOC_CONF` for a large count (`large`), None for the package's
    default (`tokcolumnar/__init__`: freed pages returned at once)."""
    if command_of(argv) == "encode":
        return ENCODE_JEMALLOC_CONF
    return LARGE_COUNT_MALLOC_CONF if large else None


def configure_for_command(argv: list[str]) -> None:
    """Before Polars loads, the settings a command line's work wants: whether it is a
    `large_count` and Polars' allocator settings (`jemalloc_conf`; the user's own
    `_RJEM_MALLOC_CONF` is left as it is). Nothing once Polars is loaded (it has read them).

    A large count keeps Polars' freed pages for a second instead of returning them at once:
    counting allocates and frees tens of MiB per 4 MiB batch, and returned at once, every page
    is faulted in again: 1 GB of English, whitespace 50k, 52 -> 44 CPU-s, peak RSS 605 -> 607
    MiB (one run each, loads 6 and 4; docs/architecture.md, "Counting"). On medium files the
    kept pages would raise the peak instead (medium/en byte-level +115 MiB), hence the size."""
    global large_count
    if "polars" in sys.modules:
        return
    large_count = is_large_count(argv)  # corpus.counting.fold_chunks: counting_heap
    # Polars' freed pages are kept only where the limit has room for them
    conf = jemalloc_conf(argv, large_count and command_limit(argv) >= LARGE_COUNT_MIN_LIMIT)
    if conf is not None and not USER_JEMALLOC_CONF:
        os.environ["_RJEM_MALLOC_CONF"] = conf  # read when Polars loads


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
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not mallopt(M_MMAP_THRESHOLD, threshold):
        return False
    global _fixed_threshold
    _fixed_threshold = threshold
    return True


def counting_heap() -> contextlib.AbstractContextManager[None]:
    """While counting, blocks up to `COUNT_MMAP_THRESHOLD` come from the heap: the count
    allocates and frees temporaries of a few MiB per batch (decoded text, the NumPy arrays of
    `corpus.counting`), and a fresh mapping each costs a page fault per 4 KiB touched (100 MB
    of English, whitespace: 856k -> 540k minor faults, 2.0 -> 1.3 s of system time). Then the
    fixed threshold is restored and the freed heap given back (`malloc_trim`), so the stages
    after keep the small peak. Nothing happens unless `fix_mmap_threshold` fixed it."""
    return _heap_thresholds(COUNT_MMAP_THRESHOLD)


def merging_heap() -> contextlib.AbstractContextManager[None]:
    """While the merge loop runs, blocks up to `MERGE_MMAP_THRESHOLD` come from the heap and
    up to `MERGE_TRIM_THRESHOLD` of free memory stays at its top: a pass allocates and frees
    NumPy temporaries of up to a few MiB (the first passes of a byte-level corpus touch
    hundreds of thousands of positions), and a fresh mapping, or heap trimmed and grown
    again, costs a page fault per 4 KiB touched. medium/ru.txt, 30k byte-level BPE, the loop
    alone: 230k -> 75k minor faults, 0.53 -> 0.22 s of system time (one thread: the loop's
    wall time), its peak RSS 197 -> 200 MiB (blocks up to 4 MiB from the heap: 0.12 s but
    223 MiB; larger blocks keep their own mapping, returned when freed). Whole `train` runs
    with this branch's other changes, medians of 2 against the code before: peak RSS within
    2 MiB on medium/en whitespace and medium/ru whitespace, byte-level and bert (single runs
    varied by up to +9 MiB). Then
    the fixed thresholds are restored and the freed heap given back (`malloc_trim`). Nothing
    happens unless `fix_mmap_threshold` fixed the mmap threshold (the user's
    `MALLOC_TRIM_THRESHOLD_` is left as it is)."""
    return _heap_thresholds(MERGE_MMAP_THRESHOLD, MERGE_TRIM_THRESHOLD)


@contextlib.contextmanager
def unigram_heap() -> Iterator[None]:
    """While a Unigram model trains (`training.unigram_pipeline`), blocks up to
    `UNIGRAM_MMAP_THRESHOLD` come from the heap and up to `UNIGRAM_TRIM_THRESHOLD` of free
    memory stays at its top: every EM iteration allocates and frees NumPy arrays of 1-30 MiB
    (a lattice's nodes in fold order, the accumulators), and a fresh mapping each costs a
    page fault per 4 KiB touched. 5 MB of medium/en, 16k pieces, whole `train` runs: 1.41M ->
    0.28M minor faults, 3.6 -> 1.5 s of system time, peak RSS 758 -> 629 MiB (the freed
    blocks are reused instead of mapped anew). 24 MiB, not glibc's largest (32): a fold's or
    sum chain's batch temporaries (`unigram_lattice.BATCH_NODES`: 16 MiB of doubles at most)
    still come from the heap, but the lattices' node columns of a large corpus (26-30 MiB
    each on medium/en.txt at 32k), kept through every EM round, get mappings of their own
    instead of pinning the heap's freed blocks below them: whole medium/en.txt, 32k, peak RSS
    944 -> 874 MiB, 25.1 -> 22.5 CPU-s (2026-11-28). Then the fixed thresholds are restored
    and the freed heap given back (`malloc_trim`).

    From then on, every thread allocates from one arena (`one_arena`): the trainer's side thread
    (`training.passes.side_thread`: the backward fold, half the sum chains) in an arena of its
    own kept the free memory of its batches (up to the trim threshold at that arena's top)
    where the main thread's pruning could not reuse it: whole medium/zh.txt, 32k, peak RSS
    1,251-1,309 MiB against 1,254-1,277 with one thread."""
    one_arena()
    with _heap_thresholds(UNIGRAM_MMAP_THRESHOLD, UNIGRAM_TRIM_THRESHOLD):
        yield


def one_arena() -> None:
    """Threads that allocate for the first time from now on share the main arena
    (`M_ARENA_MAX` 1) for the rest of the process (glibc's `mallopt` cannot set its default
    back), unless the user set `MALLOC_ARENA_MAX`. Nothing unless `fix_mmap_threshold` fixed
    the mmap threshold (a command-line run on glibc)."""
    if _fixed_threshold is not None and "MALLOC_ARENA_MAX" not in os.environ:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)


def release_free_heap() -> None:
    """Give the heap's free pages back to the system (`malloc_trim`: those between blocks in
    use too, not only at the top), when `fix_mmap_threshold` fixed the thresholds (a
    command-line run on glibc). The Unigram trainer calls it once its lattices are built and
    after each pruning round: the build's and the rounds' freed temporaries otherwise stay in
    the process's RSS through every later EM round."""
    if _fixed_threshold is None:
        return
    ctypes.CDLL(None).malloc_trim(0)


@contextlib.contextmanager
def _heap_thresholds(mmap_threshold: int, trim_threshold: int | None = None
                     ) -> Iterator[None]:
    """For the block: glibc's mmap threshold at `mmap_threshold` and, when given and the user
    did not set `MALLOC_TRIM_THRESHOLD_`, its trim threshold at `trim_threshold`; then the
    fixed mmap threshold and glibc's initial trim threshold restored, and the freed heap
    given back (`malloc_trim`). Nothing unless `fix_mmap_threshold` fixed the mmap threshold
    (`counting_heap`, `merging_heap`)."""
    if _fixed_threshold is None:
        yield
        return
    libc = ctypes.CDLL(None)
    trim = trim_threshold is not None and "MALLOC_TRIM_THRESHOLD_" not in os.environ
    libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    if trim:
        libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, _fixed_threshold)
        if trim:
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        libc.malloc_trim(0)
