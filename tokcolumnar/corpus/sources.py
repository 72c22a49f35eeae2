"""Inputs: files, directories (walked recursively), globs, named pipes (FIFOs, `<(cmd)`),
`-` (standard input) and URIs resolved into an ordered list of `Source`s, each with its format
(from `--format` or the file extension) and compression (from the last extension), and opened
as binary streams for the readers.

A URI (`file:///abs/dir/*.txt`, `s3://bucket/key`, `gs://...`, `hdfs://host:port/path`) is
read through the Arrow filesystem `pyarrow.fs.FileSystem.from_uri` makes of it: a file, a
directory (walked recursively) or a glob whose `*` / `**` stand in path components (URIs have
no `?` or `[` patterns: `?` starts a URI's query). A `Source` of a URI holds the URI string
only (picklable: a Ray or Spark worker makes the filesystem again, once per URI root and process)
and its path inside the filesystem; everything that touches a file (`open_binary`,
`open_seekable`, `parquet_file`, `file_stat`, `file_digests`) goes through the helpers here,
which serve local paths and URIs alike.

A local file keeps the size and modification time its listing found (`Source.listed`: one
`stat` per file, from the directory walk's `os.scandir` entries), so that planning, progress
and fingerprints do not stat it again. Within a run (`run_scope`, entered by the training
pipeline), the inputs are listed once and each file's digests read once, however many steps
ask for them: a folder of 10,000 files costs one walk, not three."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import operator
import os
import re
import select
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePath, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ..errors import TokcolumnarError

STDIN = "-"
FORMATS = ("text", "parquet", "jsonl", "csv")
_COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bz2"}
_EXT_FORMAT = {".txt": "text", ".text": "text", ".parquet": "parquet", ".pq": "parquet",
               ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
               ".tsv": "csv"}
_FILE_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


@dataclass(frozen=True)
class Source:
    """One input with its detected format and compression. `kind`: "file" (a regular file),
    "pipe" (a named pipe: read once, front to back) or "stdin" (`-`). A part of a regular
    file (a unit of a distributed count, `corpus.units`): `byte_range` (start, end) of an
    uncompressed text or JSONL file, cut at line starts; `row_groups` of a Parquet file.
    A file read through an Arrow filesystem (kind "file") has its `uri`, and `path` is its
    path inside that filesystem (`filesystem_of`). `listed`: a local regular file's (size,
    mtime in ns) when it was listed (`file_stat` answers from it), None when not known."""

    path: PurePath
    fmt: str
    compression: str | None
    kind: str = "file"
    byte_range: tuple[int, int] | None = None
    row_groups: tuple[int, ...] | None = None
    uri: str | None = None
    listed: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """How messages name the input."""
        return "standard input" if self.kind == "stdin" else self.uri or str(self.path)


def expand_inputs(inputs: Iterable[str | os.PathLike], fmt: str | None = None) -> list[Source]:
    """Resolve files, named pipes, `-`, directories (recursively, regular files only) and globs
    into an ordered list of sources. A missing path, an unreadable one, and a device or socket
    are refused with a message saying which. Within a `run_scope`, the same inputs are listed
    once (a copy of the first listing is returned)."""
    inputs = list(inputs)
    memo = _RUN.get()
    key = (tuple((type(x).__name__, os.fspath(x)) for x in inputs), fmt)
    if memo is not None and key in memo.listings:
        return list(memo.listings[key])
    sources = _expand(inputs, fmt)
    if memo is not None:
        memo.listings[key] = tuple(sources)
    return sources


def _expand(inputs: list[str | os.PathLike], fmt: str | None) -> list[Source]:
    sources: list[Source] = []
    for item in inputs:
        s = str(item)
        if isinstance(item, str) and s == STDIN:
            if any(x.kind == "stdin" for x in sources):
                raise TokcolumnarError("standard input (-) is given more than once")
            sources.append(_detect(Path(STDIN), fmt, "stdin"))
            continue
        if isinstance(item, str) and is_uri(s):
            sources.extend(_expand_uri(s, fmt))
            continue
        p = Path(s)
        st = _stat(p, s)
        if st is None:
            if any(ch in s for ch in "*?["):
                matched = sorted(((Path(x), _regular_stat(x))
                                  for x in glob.glob(s, recursive=True)), key=lambda m: m[0])
                found = [(f, fst) for f, fst in matched if fst is not None]
                if not found:
                    raise TokcolumnarError(f"no files match {s}")
                sources.extend(_readable(f, fmt, "file", fst) for f, fst in found)
            elif p.is_symlink():
                raise TokcolumnarError(f"input not found: {s} (a broken symbolic link)")
            else:
                raise TokcolumnarError(f"input not found: {s}")
        elif stat.S_ISDIR(st.st_mode):
            if not os.access(p, os.R_OK | os.X_OK):
                raise TokcolumnarError(f"cannot read directory {s}: permission denied")
            found_stats = walk_files(p)
            if not found_stats:
                raise TokcolumnarError(f"directory {s} contains no files")
            sources.extend(_readable(f, fmt, "file", fst) for f, fst in found_stats)
        elif stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            regular = stat.S_ISREG(st.st_mode)
            sources.append(_readable(p, fmt, "file" if regular else "pipe",
                                     st if regular else None))
        else:
            what = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a file")
            raise TokcolumnarError(f"input {s} is {what}, not a file or a pipe (to read it "
                                   f"anyway, pipe it into standard input: cat {s} | ... -)")
    if not sources:
        raise TokcolumnarError("no input files given")
    return sources


def walk_files(top: Path) -> list[tuple[Path, os.stat_result]]:
    """The regular files under directory `top` with their `stat` (symbolic links followed),
    as `sorted(q for q in top.rglob("*") if q.is_file() and not q.name.startswith("."))`
    finds them, in that order: every level walked (hidden directories too, symbolic links to
    directories not), a directory that cannot be read skipped, files named `.*` left out,
    sorted by path components. One `os.scandir` per directory and one `stat` per file (a
    `DirEntry` knows which entries are directories without one): pathlib's walk costs
    ~20 us per file, ~0.2 s per listing of a folder of 10,000 files."""
    found: list[tuple[Path, os.stat_result]] = []

    def walk(directory: Path) -> None:
        try:
            with os.scandir(directory) as it:
                # each directory's entries by name, its subdirectories walked in their place:
                # path order (component by component, as Path sorts) without sorting paths
                entries = sorted(it, key=_entry_name)
        except PermissionError:
            return  # as rglob: an unreadable directory is skipped
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                walk(directory / entry.name)
            elif not entry.name.startswith("."):
                try:
                    st = entry.stat()  # follows a symbolic link, as `is_file` does
                except OSError:
                    continue  # a broken link: not a file
                if stat.S_ISREG(st.st_mode):
                    found.append((directory / entry.name, st))

    walk(top)
    return found


_entry_name = operator.attrgetter("name")


def _stat(p: Path, s: str) -> os.stat_result | None:
    """The `stat` of `p` (symbolic links followed), None when it does not exist."""
    try:
        return p.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise TokcolumnarError(f"cannot access input {s}: permission denied") from None
    except OSError as e:
        raise TokcolumnarError(f"cannot access input {s}: {e.strerror or e}") from None


def _regular_stat(path: str) -> os.stat_result | None:
    """The `stat` of a regular file (symbolic links followed), None for anything else (what
    `Path.is_file` says)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _readable(path: Path, fmt: str | None, kind: str, st: os.stat_result | None = None
              ) -> Source:
    """The source of a local file (`st`: its stat when listed, kept as `Source.listed`)."""
    if not os.access(path, os.R_OK):
        raise TokcolumnarError(f"cannot read input {path}: permission denied")
    return _detect(path, fmt, kind, listed=None if st is None else (st.st_size, st.st_mtime_ns))


#: `scheme://` at the start of an input: a URI (a Windows drive `C:\\` has no `//`).
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(s: str) -> bool:
    """Whether an input names a URI (`file://`, `s3://`, ...) rather than a local path."""
    return _URI.match(s) is not None


def filesystem_of(uri: str) -> tuple[Any, str]:
    """The Arrow filesystem of a URI and the path inside it. One filesystem serves every URI
    of a root (`scheme://authority/?query`) in a process: making one may cost a request (an
    S3 bucket's region, GCS credentials), and a corpus may be thousands of files. The path
    is the root's path joined with the URI's (decoded); the first URI of a root checks that
    this is the path Arrow gives, else that root's URIs are each opened by Arrow."""
    split = urlsplit(uri)
    root = f"{split.scheme}://{split.netloc}/" + (f"?{split.query}" if split.query else "")
    try:
        shared = _root_filesystem(root, uri)
    except Exception:  # noqa: BLE001 - the URI's own error, said below
        shared = None
    try:
        if shared is None:
            return _from_uri(uri)
        fs, root_path = shared
        return fs, _join(root_path, split.path)
    except Exception as e:  # noqa: BLE001 - ArrowInvalid, OSError (no libhdfs, no network)
        raise TokcolumnarError(f"cannot open {uri}: {_first_line(e)}") from None


def _root_filesystem(root: str, first_uri: str) -> tuple[Any, str] | None:
    """The filesystem of `root` and its path, None when `first_uri`'s path from it is not
    the one Arrow gives (then each URI is opened alone)."""
    cached = _ROOTS.get(root)
    if cached is not None:
        return cached or None
    try:
        fs, root_path = _from_uri(root)
    except Exception:  # noqa: BLE001 - no filesystem for the root: each URI alone
        _ROOTS[root] = ()
        return None
    _, path = _from_uri(first_uri)
    same = path == _join(root_path, urlsplit(first_uri).path)
    _ROOTS[root] = (fs, root_path) if same else ()
    return (fs, root_path) if same else None


#: Per root URI: its filesystem and path, or () when its URIs are opened one by one.
_ROOTS: dict[str, tuple[Any, ...]] = {}


@lru_cache(maxsize=256)
def _from_uri(uri: str) -> tuple[Any, str]:
    from pyarrow import fs as pafs

    return pafs.FileSystem.from_uri(uri)


def _join(root_path: str, uri_path: str) -> str:
    """A URI's path inside the filesystem of its root (whose path is `root_path`: "/" for
    a local or HDFS root, the bucket for S3 / GCS)."""
    relative = unquote(uri_path).lstrip("/")
    if not root_path or root_path.endswith("/"):
        return root_path + relative
    return f"{root_path}/{relative}" if relative else root_path


def _expand_uri(uri: str, fmt: str | None) -> list[Source]:
    """The files a URI names: itself, the files under it (a directory, recursively, hidden
    ones left out) or those its `*` / `**` components match, in path order. A query
    (`?region=...`) stays on every file's URI."""
    from pyarrow import fs as pafs

    head, mark, query = uri.partition("?")
    parts = head.split("/")
    # the glob starts at the first component with a `*`; the URI up to it is the base
    first = next((i for i, part in enumerate(parts) if "*" in part and i >= 3), None)
    base = head if first is None else "/".join(parts[:first])
    fs, base_path = filesystem_of(base + mark + query)
    try:
        info = fs.get_file_info(base_path)
        if first is None and info.type == pafs.FileType.File:
            return [_detect(PurePosixPath(base_path), fmt, "file", uri)]
        if info.type != pafs.FileType.Directory:
            raise TokcolumnarError(f"input not found: {uri}" if first is None
                                   else f"no files match {uri}")
        listing = fs.get_file_info(pafs.FileSelector(base_path, recursive=True))
    except TokcolumnarError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError, ArrowException
        raise TokcolumnarError(f"cannot read {uri}: {_first_line(e)}") from None
    pattern = None if first is None else _glob_regex("/".join(parts[first:]))
    prefix = base_path.rstrip("/") + "/"
    found: list[tuple[str, str]] = []
    for entry in listing:
        if entry.type != pafs.FileType.File or not entry.path.startswith(prefix):
            continue
        relative = entry.path[len(prefix):]
        if pattern is None and relative.rsplit("/", 1)[-1].startswith("."):
            continue  # a directory's hidden files, as for a local directory
        if pattern is not None and not pattern.fullmatch(relative):
            continue
        found.append((relative, entry.path))
    if not found:
        raise TokcolumnarError(f"directory {uri} contains no files" if first is None
                               else f"no files match {uri}")
    return [_detect(PurePosixPath(path), fmt, "file",
                    base.rstrip("/") + "/" + quote(relative) + mark + query)
            for relative, path in sorted(found)]


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob of path components as a regex, as `glob.glob(recursive=True)` reads it: `**`
    (a whole component) any number of components, `*` any characters but `/`; neither
    matches a name starting with `.` (hidden) unless the pattern's component does."""
    visible = r"(?!\.)[^/]*"  # a component not starting with "."
    parts = pattern.split("/")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(f"{visible}(?:/{visible})*" if last else f"(?:{visible}/)*")
            continue
        piece = "[^/]*".join(re.escape(x) for x in part.split("*"))
        if part.startswith("*"):
            piece = r"(?!\.)" + piece
        out.append(piece if last else piece + "/")
    return re.compile("".join(out))


def _detect(path: PurePath, fmt: str | None, kind: str = "file", uri: str | None = None,
            listed: tuple[int, int] | None = None) -> Source:
    suffixes = _suffixes(path.name) if kind != "stdin" else []
    compression = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    if fmt is None:
        fmt = _EXT_FORMAT.get(suffixes[-1], "text") if suffixes else "text"
    if fmt not in FORMATS:
        raise TokcolumnarError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    return Source(path, fmt, compression, kind, uri=uri, listed=listed)


def _suffixes(name: str) -> list[str]:
    """The last two of `PurePath(name).suffixes`, lower-cased (what `_detect` looks at), from
    the name alone: a name ending in "." has none, leading dots start none."""
    if name.endswith("."):
        return []
    return ["." + s for s in name.lstrip(".").lower().rsplit(".", 2)[1:]]


def open_binary(src: Source, arrow: bool = False) -> Any:
    """A binary stream of the decompressed input: plain Python files for text and gzip (so the
    text path never imports pyarrow), Arrow streams for zstd / bz2 and the Arrow readers (an
    OS file for a regular file; a pipe or standard input through a Python file, which Arrow
    reads front to back without seeking). A URI's file is an Arrow stream of its filesystem
    (decompressed by Arrow), its byte range a seekable Arrow file."""
    try:
        if src.byte_range is not None:
            part = io.BufferedReader(_ByteRange(src, *src.byte_range))
            if not arrow:
                return part
            import pyarrow as pa

            return pa.PythonFile(part, "r")
        if src.uri is not None:
            import pyarrow as pa

            fs, path = filesystem_of(src.uri)
            # compression=None: the filesystem would otherwise guess it from the extension;
            # counted: an Arrow input stream has no position to read (progress follows it)
            raw = _Counted(fs.open_input_stream(path, compression=None))
            _last_opened[:] = [src.uri, raw]
            if src.compression:
                return pa.CompressedInputStream(pa.PythonFile(raw, "r"), src.compression)
            return pa.PythonFile(raw, "r") if arrow else raw
        if not arrow and src.compression in (None, "gzip"):
            if src.kind == "file":
                if src.compression == "gzip":
                    import gzip

                    return gzip.open(src.path, "rb")
                return open(src.path, "rb")  # noqa: SIM115 - closed by the caller
            stream = open_pipe(src)
            if src.compression == "gzip":
                import gzip

                unzipped = gzip.GzipFile(fileobj=stream, mode="rb")
                unzipped.myfileobj = stream  # (closed with it, as `gzip.open`'s own file)
                return unzipped
            return stream
        import pyarrow as pa

        if src.kind == "file":
            raw = pa.OSFile(str(src.path))
        else:
            raw = pa.PythonFile(open_pipe(src), "r")
        return pa.CompressedInputStream(raw, src.compression) if src.compression else raw
    except TokcolumnarError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError or ArrowException
        raise TokcolumnarError(f"cannot open {src.label}: {_first_line(e)}") from None


#: How long a read of a pipe waits for data before it looks whether the run is stopping.
PIPE_WAIT_SECONDS = 0.2


class ReadStopped(Exception):
    """A read of a pipe or standard input given up while it waited for data: the run is
    stopping (the reader's consumer stopped drawing: `stop_reads_on`; or a signal arrived:
    `wake_reads_on`)."""


#: The events that stop the pipe reads opened in this context (`stop_reads_on`).
_READ_STOPS: ContextVar[tuple[threading.Event, ...]] = ContextVar("tokcolumnar_read_stops",
                                                                   default=())
#: A descriptor that becomes readable when the process receives a signal (`wake_reads_on`).
_signal_wakeup: int | None = None


def stop_reads_on(event: threading.Event) -> None:
    """Make every pipe or standard input opened from now on in this context (a reader
    thread's: `corpus.counting.prefetched`) give up a read waiting for data, with
    `ReadStopped`, within `PIPE_WAIT_SECONDS` of `event` being set. A thread blocked in a
    read of a pipe nobody writes to would otherwise never end, and the thread that waits for
    it (to stop a run cleanly) neither."""
    _READ_STOPS.set((*_READ_STOPS.get(), event))


def wake_reads_on(fd: int | None) -> None:
    """Make every pipe read waiting for data give up with `ReadStopped` once `fd` is
    readable: the CLI's `signal.set_wakeup_fd`, which a signal makes readable. The signal's
    handler raises the interrupt in the main thread, but only once that thread runs Python:
    waiting in Arrow's reader (a JSONL or CSV pipe, which Arrow reads in threads of its own),
    it would wait forever for a read that waits for data. None: no such descriptor."""
    global _signal_wakeup
    _signal_wakeup = fd


def open_pipe(src: Source) -> io.BufferedReader:
    """A named pipe or standard input as a binary stream whose reads wait for data in slices
    of `PIPE_WAIT_SECONDS` (`_PipeReader`), so that a pipe nobody writes to never holds up a
    stopping run. A named pipe is opened without waiting for a writer (the reads wait)."""
    if src.kind == "stdin":
        return io.BufferedReader(_PipeReader(0, owned=False))
    if not hasattr(select, "poll") or not sys.platform.startswith("linux"):
        # elsewhere a pipe with no writer yet may poll as ended: wait for one when opening
        return open(src.path, "rb")  # noqa: SIM115 - closed by the caller
    fd = os.open(src.path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        # blocking reads again (a read follows a poll that saw data); until a writer comes,
        # Linux polls the pipe as empty, not as ended
        os.set_blocking(fd, True)
        return io.BufferedReader(_PipeReader(fd, owned=True))
    except BaseException:
        os.close(fd)
        raise


class _PipeReader(io.RawIOBase):
    """A pipe's descriptor read after `poll` says it has data (or has ended): each wait lasts
    at most `PIPE_WAIT_SECONDS`, after which the read gives up if the run is stopping
    (`stop_reads_on`, `wake_reads_on`). In the main thread, a signal interrupts the wait
    itself and its handler raises. The events and the signal descriptor are those of the
    context that opened the pipe: Arrow reads it from threads of its own."""

    def __init__(self, fd: int, owned: bool) -> None:
        super().__init__()
        self._fd = fd
        self._owned = owned
        self._stops = _READ_STOPS.get()
        self._poll: Any = None
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)
            if _signal_wakeup is not None:
                self._poll.register(_signal_wakeup, select.POLLIN)

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, b: Any) -> int:
        while self._poll is not None:
            if any(stop.is_set() for stop in self._stops):
                raise ReadStopped("the run is stopping")
            ready = [fd for fd, _ in self._poll.poll(PIPE_WAIT_SECONDS * 1000)]
            if self._fd in ready:
                break
            if ready:  # the signal's own exception is the main thread's handler's to raise
                raise ReadStopped("a signal arrived")
        if hasattr(os, "readv"):
            return os.readv(self._fd, [b])
        data = os.read(self._fd, len(b))  # (Windows)
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self._owned:
            os.close(self._fd)
        super().close()


#: The URI whose file `open_binary` opened last, and its stream as stored (not decompressed):
#: progress follows its position (`read_position`), as it follows a local file's descriptor.
_last_opened: list[Any] = [None, None]


def read_position(uri: str) -> int | None:
    """Bytes read so far of the file of `uri` that `open_binary` opened last (compressed
    bytes for a compressed file); None when another file was opened since, or it is closed."""
    name, raw = _last_opened
    if name != uri or raw is None or raw.closed:
        return None
    return raw.position


def open_seekable(src: Source) -> Any:
    """The input's file as stored (not decompressed), seekable: a Python file for a local
    path, an Arrow random-access file for a URI."""
    try:
        if src.uri is not None:
            fs, path = filesystem_of(src.uri)
            return fs.open_input_file(path)
        return open(src.path, "rb")  # noqa: SIM115 - closed by the caller
    except TokcolumnarError:
        raise
    except Exception as e:  # noqa: BLE001 - OSError or ArrowException
        raise TokcolumnarError(f"cannot open {src.label}: {_first_line(e)}") from None


def file_stat(src: Source) -> tuple[int, int]:
    """(size, mtime in ns) of a file input: as listed (`Source.listed`), else from its
    filesystem (OSError when it cannot be read)."""
    if src.listed is not None:
        return src.listed
    if src.uri is None:
        st = os.stat(src.path)
        return st.st_size, st.st_mtime_ns
    fs, path = filesystem_of(src.uri)
    try:
        info = fs.get_file_info(path)
    except Exception as e:  # noqa: BLE001 - ArrowException: as an OSError to callers
        raise OSError(_first_line(e)) from None
    if info.size is None:
        raise FileNotFoundError(src.label)
    return info.size, info.mtime_ns or 0


#: Bytes at the head (and, for `FileDigests.head_tail_blake2b`, the tail) of a file hashed.
HEAD_BYTES = 1 << 20


@dataclass(frozen=True)
class FileDigests:
    """What identifies a file input's content cheaply: its size and mtime (ns) as listed,
    the SHA-256 of its first `HEAD_BYTES` (the work directory's fingerprint) and the BLAKE2b
    of its first and, past 2 x `HEAD_BYTES`, last `HEAD_BYTES` (`run.json`; None for a
    URI's file, whose tail would cost a request)."""

    size: int
    mtime_ns: int
    head_sha256: str
    head_tail_blake2b: str | None


def file_digests(src: Source) -> FileDigests:
    """The digests of a file input (one read of its head, one of its tail when large; once
    per file within a `run_scope`, where a reader that read the whole file may have left them:
    `digests_recorder`). A local file is read with `os.read` calls sized from its listed size:
    a buffered 1 MiB read per 3 KB file costs more than the hash."""
    memo = _RUN.get()
    key = _digest_key(src)
    if memo is not None and (known := memo.digests.get(key)) is not None:
        return known
    try:
        size, mtime_ns = file_stat(src)
        if src.uri is not None:
            with open_seekable(src) as f:
                head, tail = f.read(HEAD_BYTES), None
        else:
            fd = os.open(src.path, os.O_RDONLY)
            try:
                head = _read_head(fd, size)
                tail = _read_tail(fd) if size > 2 * HEAD_BYTES else b""
            finally:
                os.close(fd)
    except OSError as e:
        raise TokcolumnarError(f"cannot open {src.label}: {_first_line(e)}") from None
    digests = _digests_of(size, mtime_ns, head, tail)
    if memo is not None:
        memo.digests[key] = digests
    return digests


def digests_recorder() -> Callable[[Source, bytes], None] | None:
    """Within a `run_scope`, a function a reader calls with a local file it read whole (its
    bytes, as many as listed), so that `file_digests` need not read it again (the
    fingerprints of a folder of 10,000 small files, which the count reads anyway); None
    outside one. The function may be called from another thread (the run's memo is kept)."""
    memo = _RUN.get()
    if memo is None:
        return None

    def record(src: Source, data: bytes) -> None:
        if src.listed is None or src.uri is not None or len(data) != src.listed[0] or (
                len(data) > 2 * HEAD_BYTES):
            return  # not the file as listed, or one with a tail of its own to hash
        memo.digests.setdefault(_digest_key(src),
                                _digests_of(*src.listed, data[:HEAD_BYTES], b""))

    return record


def _digest_key(src: Source) -> str:
    """A file's key in the run's digests: its URI, or its absolute path."""
    return src.uri or os.path.abspath(src.path)


def _digests_of(size: int, mtime_ns: int, head: bytes, tail: bytes | None) -> FileDigests:
    """The digests of a file of `size` bytes from its head (first `HEAD_BYTES`) and tail
    (last `HEAD_BYTES` past 2 x `HEAD_BYTES`, else b""; None: no BLAKE2b, a URI's file)."""
    both = None
    if tail is not None:
        h = hashlib.blake2b(digest_size=16)
        h.update(head[:size] if size else head)
        h.update(tail)
        both = h.hexdigest()
    return FileDigests(size, mtime_ns, hashlib.sha256(head).hexdigest(), both)


def _read_head(fd: int, size: int) -> bytes:
    """The first `HEAD_BYTES` of an open file (all of it when shorter); `size` its listed
    size: one read sized to it (a byte more: a file grown since is read on)."""
    want = min(size + 1, HEAD_BYTES)
    block = os.read(fd, want)
    if len(block) < want:  # a regular file reads short only at its end
        return block
    parts, total = [block], len(block)
    while total < HEAD_BYTES and (more := os.read(fd, HEAD_BYTES - total)):
        parts.append(more)
        total += len(more)
    return b"".join(parts)


def _read_tail(fd: int) -> bytes:
    """The last `HEAD_BYTES` of an open file (longer than that)."""
    os.lseek(fd, -HEAD_BYTES, os.SEEK_END)
    parts = []
    while block := os.read(fd, HEAD_BYTES):
        parts.append(block)
    return b"".join(parts)


@dataclass
class _RunMemo:
    """What a `run_scope` keeps: listings by (inputs, format), digests by file (a URI, a
    local file's absolute path)."""

    listings: dict[Any, tuple[Source, ...]] = field(default_factory=dict)
    digests: dict[str, FileDigests] = field(default_factory=dict)


_RUN: ContextVar[_RunMemo | None] = ContextVar("tokcolumnar_run_scope", default=None)


@contextlib.contextmanager
def run_scope() -> Iterator[None]:
    """One run's view of its inputs: within it, `expand_inputs` lists the same inputs once
    and `file_digests` reads each file once (a training run lists its inputs for the work
    directory's fingerprint, the counting plan and `run.json`, and fingerprints them for the
    work directory and `run.json`). The files are taken as they were when first listed or
    read. A scope inside another is the outer one; threads started within see none."""
    if _RUN.get() is not None:
        yield
        return
    token = _RUN.set(_RunMemo())
    try:
        yield
    finally:
        _RUN.reset(token)


def file_size(src: Source) -> int:
    """The size of a file input in bytes (as stored: compressed bytes for a .gz)."""
    return file_stat(src)[0]


def parquet_file(src: Source) -> Any:
    """A `pyarrow.parquet.ParquetFile` of an uncompressed Parquet input (it owns its file)."""
    import pyarrow.parquet as pq

    if src.uri is None:
        return pq.ParquetFile(str(src.path))
    fs, path = filesystem_of(src.uri)
    return pq.ParquetFile(path, filesystem=fs)


def parquet_metadata(src: Source) -> Any:
    """The footer of a Parquet input (`pyarrow.parquet.FileMetaData`)."""
    pf = parquet_file(src)
    try:
        return pf.metadata
    finally:
        pf.close()


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class _Counted(io.RawIOBase):
    """An Arrow input stream that counts the bytes read from it (`position`)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream
        self.position = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self._stream.read(None if size is None or size < 0 else size)
        self.position += len(data)
        return data

    def readinto(self, b: Any) -> int:
        n = self._stream.readinto(b)
        self.position += n
        return n

    def close(self) -> None:
        self._stream.close()
        super().close()


class _ByteRange(io.RawIOBase):
    """Bytes [start, end) of a regular file (a local path or a URI's), read front to back."""

    def __init__(self, src: Source, start: int, end: int) -> None:
        super().__init__()
        self._file = open_seekable(src)
        self._file.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._file.readinto(memoryview(b)[: min(len(b), self._left)])
        self._left -= n
        return n

    def close(self) -> None:
        self._file.close()
        super().close()
