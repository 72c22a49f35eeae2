"""The merge loop's large arrays kept in files of the work directory, for a `--memory-limit`
below what the loop needs in memory (docs/large-corpora.md, "Past the memory limit").

While `on_disk(directory, budget)` is active, `empty` and `kept` place every array of at least
`MIN_BYTES` in a file of `directory`, mapped shared into the process: the layout, the pair
occurrences grouped at the start of the loop, the queue's position slices and the pair table
(the callers that hold them use these two functions; outside the context they are `np.empty`
and the identity). A mapped file's pages are the kernel's page cache, written back to the disk
and reclaimed under memory pressure; what a mapped page adds to the process's resident memory is
dropped by a watcher thread whenever that passes `budget` (`madvise(MADV_DONTNEED)`: on a shared
file mapping the data stays in the file, and the next read of the page faults it back in from
the cache or the disk). The merges are the same: only where the arrays live changes.

Each file is unlinked as soon as it is mapped: its space returns when its array is freed, and
nothing is left behind by any exit, SIGKILL included. Its blocks are reserved when it is made
(`posix_fallocate`), so a full disk is an `OSError` there, never a SIGBUS in a later write.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d, on_disk(d, budget=1 << 30):
...     a = empty(1 << 20, np.int32)
...     a[:] = 7
...     int(a.sum()), is_mapped(a)
(7340032, True)
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .memory import resident_and_file_bytes

#: Smaller arrays stay in memory: a file and a mapping each cost a page and a system call or two.
MIN_BYTES = 1 << 16
#: Reading or writing a whole mapped array (a checkpoint, `workdir`) goes this many bytes at a
#: time, the pages dropped after each (`drop_pages`).
IO_CHUNK = 64 << 20
#: How often the watcher reads the resident memory (a read of /proc costs ~20 microseconds).
WATCH_EVERY = 0.02


class MappedArrays:
    """The files of one run's on-disk arrays, and the watcher that keeps their pages out of
    the resident memory past `budget` bytes."""

    def __init__(self, directory: str | Path, budget: int) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.budget = budget
        self.maps: list[weakref.ref[mmap.mmap]] = []
        self.mapped_bytes = 0  # all arrays ever placed (for the run's report)
        self.trims = 0  # times the pages were dropped (the tests check that they were)
        start = resident_and_file_bytes()
        self._libraries = start[1] if start is not None else 0  # files mapped before: code
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tokcolumnar-ondisk",
                                        daemon=True)
        self._thread.start()

    def empty(self, n: int, dtype: np.dtype | type) -> np.ndarray:
        """An uninitialised 1-d array of `n` values in a new file of the directory."""
        dtype = np.dtype(dtype)
        nbytes = n * dtype.itemsize
        fd, path = tempfile.mkstemp(dir=self.directory, prefix="loop-", suffix=".bin")
        try:
            os.unlink(path)
            os.posix_fallocate(fd, 0, nbytes)  # a full disk fails here, not as a SIGBUS later
            mapped = mmap.mmap(fd, nbytes)  # shared, read-write
        finally:
            os.close(fd)
        with self._lock:
            self.maps = [r for r in self.maps if r() is not None]
            self.maps.append(weakref.ref(mapped))
        self.mapped_bytes += nbytes
        return np.frombuffer(mapped, dtype=dtype, count=n)

    def trim(self) -> None:
        """Drop every mapped page from the resident memory (the data stays in the files)."""
        with self._lock:
            maps = [m for m in (r() for r in self.maps) if m is not None]
        for m in maps:
            with contextlib.suppress(ValueError, OSError):  # freed meanwhile
                m.madvise(mmap.MADV_DONTNEED)
        self.trims += 1

    def trim_if_over(self) -> None:
        """`trim` when the resident memory is over the budget and enough of it is mapped
        pages (when the process's own memory alone is over the budget, dropping a few mapped
        pages again and again would only slow the loop: a trim waits for a share of them)."""
        now = resident_and_file_bytes()
        if (now is not None and now[0] > self.budget
                and now[1] - self._libraries > max(self.budget // 20, MIN_BYTES)):
            self.trim()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_EVERY):
            self.trim_if_over()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


_active: MappedArrays | None = None


@contextlib.contextmanager
def on_disk(directory: str | Path, budget: int) -> Iterator[MappedArrays]:
    """Place the arrays `empty` and `kept` make in files of `directory`, keeping the process's
    resident memory under `budget` bytes (as far as mapped pages make it)."""
    global _active
    store = MappedArrays(directory, budget)
    previous, _active = _active, store
    try:
        yield store
    finally:
        _active = previous
        store.close()


def drop_pages() -> None:
    """When a loop keeps its state on disk and the resident memory is over its budget, drop
    the mapped pages now: called between the slices of a long pass over mapped arrays (the
    watcher's thread may not get to run while one NumPy call faults pages in: 5 GB of text
    under `--memory-limit 4GB` held 2.5 GB of mapped pages at once)."""
    if _active is not None:
        _active.trim_if_over()


def current() -> MappedArrays | None:
    """The store of the run whose loop keeps its state on disk now (`on_disk`), else None."""
    return _active


def _store_for(nbytes: int) -> MappedArrays | None:
    """The store an array of `nbytes` goes to: the active one (`on_disk`) for a large array,
    else None (memory)."""
    store = _active
    return None if store is None or nbytes < MIN_BYTES or nbytes == 0 else store


def empty(n: int, dtype: np.dtype | type) -> np.ndarray:
    """`np.empty(n, dtype)`, in a file when `on_disk` is active and the array is large."""
    store = _store_for(n * np.dtype(dtype).itemsize)
    return np.empty(n, dtype=dtype) if store is None else store.empty(n, dtype)


def full(n: int, value: int, dtype: np.dtype | type) -> np.ndarray:
    """`np.full(n, value, dtype)`, in a file when `on_disk` is active and the array is large."""
    out = empty(n, dtype)
    out.fill(value)
    return out


def zeros(n: int, dtype: np.dtype | type) -> np.ndarray:
    """`np.zeros(n, dtype)` (a large one: pages the system maps as they are first written),
    in a file when `on_disk` is active and the array is large (a new file reads as zeros)."""
    store = _store_for(n * np.dtype(dtype).itemsize)
    return np.zeros(n, dtype=dtype) if store is None else store.empty(n, dtype)


def kept(a: np.ndarray) -> np.ndarray:
    """`a` itself, or, when `on_disk` is active and `a` is large, a copy of it in a file (a 1-d
    array; the caller drops `a`)."""
    store = _store_for(a.nbytes)
    if store is None or is_mapped(a):
        return a
    out = store.empty(a.size, a.dtype)
    out[...] = a.reshape(-1)
    return out.reshape(a.shape)


def shrunk(a: np.ndarray, size: int) -> np.ndarray:
    """The first `size` values of the 1-d array `a` (the caller drops `a` and every other view
    of its memory). In memory, when `a` owns its memory, or is a view from the start of a
    contiguous array that does (of another dtype too), that memory is shrunk in place
    (`ndarray.resize`: glibc's realloc, a large block's mapping cut with mremap, no copy
    beside it; a copy was the peak of the loop's first sweep); otherwise a copy (`empty`).

    >>> import numpy as np
    >>> shrunk(np.arange(6, dtype=np.int32)[:5], 3).tolist()
    [0, 1, 2]
    """
    owner = a if a.flags.owndata else a.base
    if (isinstance(owner, np.ndarray) and owner.flags.owndata and owner.ndim == 1
            and a.ndim == 1 and a.flags.c_contiguous and not is_mapped(owner)
            and a.ctypes.data == owner.ctypes.data):
        owner.resize(-(-size * a.itemsize // owner.itemsize), refcheck=False)
        return owner.view(a.dtype)[:size]
    out = empty(size, a.dtype)
    out[...] = a[:size]
    return out


def is_mapped(a: np.ndarray) -> bool:
    """Whether `a`'s memory is a file mapping made here (tests and reports)."""
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)
