"""Inputs: files, directories (walked recursively), globs, named pipes (FIFOs, `<(cmd)`) and
`-` (standard input) resolved into an ordered list of `Source`s, each with its format (from
`--format` or the file extension) and compression (from the last extension), and opened as
binary streams for the readers."""

from __future__ import annotations

import glob
import io
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    file (a unit of a distributed count, `distributed.units`): `byte_range` (start, end) of an
    uncompressed text or JSONL file, cut at line starts; `row_groups` of a Parquet file."""

    path: Path
    fmt: str
    compression: str | None
    kind: str = "file"
    byte_range: tuple[int, int] | None = None
    row_groups: tuple[int, ...] | None = None

    @property
    def label(self) -> str:
        """How messages name the input."""
        return "standard input" if self.kind == "stdin" else str(self.path)


def expand_inputs(inputs: Iterable[str | os.PathLike], fmt: str | None = None) -> list[Source]:
    """Resolve files, named pipes, `-`, directories (recursively, regular files only) and globs
    into an ordered list of sources. A missing path, an unreadable one, and a device or socket
    are refused with a message saying which."""
    sources: list[Source] = []
    for item in inputs:
        s = str(item)
        if isinstance(item, str) and s == STDIN:
            if any(x.kind == "stdin" for x in sources):
                raise TokcolumnarError("standard input (-) is given more than once")
            sources.append(_detect(Path(STDIN), fmt, "stdin"))
            continue
        p = Path(s)
        mode = _stat_mode(p, s)
        if mode is None:
            if any(ch in s for ch in "*?["):
                found = sorted(Path(x) for x in glob.glob(s, recursive=True)
                               if Path(x).is_file())
                if not found:
                    raise TokcolumnarError(f"no files match {s}")
                sources.extend(_readable(f, fmt, "file") for f in found)
            elif p.is_symlink():
                raise TokcolumnarError(f"input not found: {s} (a broken symbolic link)")
            else:
                raise TokcolumnarError(f"input not found: {s}")
        elif stat.S_ISDIR(mode):
            if not os.access(p, os.R_OK | os.X_OK):
                raise TokcolumnarError(f"cannot read directory {s}: permission denied")
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith("."))
            if not found:
                raise TokcolumnarError(f"directory {s} contains no files")
            sources.extend(_readable(f, fmt, "file") for f in found)
        elif stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
            sources.append(_readable(p, fmt, "file" if stat.S_ISREG(mode) else "pipe"))
        else:
            what = next((name for test, name in _FILE_KINDS if test(mode)), "not a file")
            raise TokcolumnarError(f"input {s} is {what}, not a file or a pipe (to read it "
                                   f"anyway, pipe it into standard input: cat {s} | ... -)")
    if not sources:
        raise TokcolumnarError("no input files given")
    return sources


def _stat_mode(p: Path, s: str) -> int | None:
    """The file type bits of `p` (symbolic links followed), None when it does not exist."""
    try:
        return p.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise TokcolumnarError(f"cannot access input {s}: permission denied") from None
    except OSError as e:
        raise TokcolumnarError(f"cannot access input {s}: {e.strerror or e}") from None


def _readable(path: Path, fmt: str | None, kind: str) -> Source:
    if not os.access(path, os.R_OK):
        raise TokcolumnarError(f"cannot read input {path}: permission denied")
    return _detect(path, fmt, kind)


def _detect(path: Path, fmt: str | None, kind: str = "file") -> Source:
    suffixes = [s.lower() for s in path.suffixes] if kind != "stdin" else []
    compression = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    if fmt is None:
        fmt = _EXT_FORMAT.get(suffixes[-1], "text") if suffixes else "text"
    if fmt not in FORMATS:
        raise TokcolumnarError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    return Source(path, fmt, compression, kind)


def open_binary(src: Source, arrow: bool = False) -> Any:
    """A binary stream of the decompressed input: plain Python files for text and gzip (so the
    text path never imports pyarrow), Arrow streams for zstd / bz2 and the Arrow readers (an
    OS file for a regular file; a pipe or standard input through a Python file, which Arrow
    reads front to back without seeking)."""
    try:
        if src.byte_range is not None:
            part = io.BufferedReader(_ByteRange(src.path, *src.byte_range))
            if not arrow:
                return part
            import pyarrow as pa

            return pa.PythonFile(part, "r")
        if not arrow and src.compression in (None, "gzip"):
            if src.kind == "stdin":
                return open(0, "rb", closefd=False)  # noqa: SIM115 - closed by the caller
            if src.compression == "gzip":
                import gzip

                return gzip.open(src.path, "rb")
            return open(src.path, "rb")  # noqa: SIM115 - closed by the caller
        import pyarrow as pa

        if src.kind == "file":
            raw = pa.OSFile(str(src.path))
        elif src.kind == "stdin":
            raw = pa.PythonFile(open(0, "rb", closefd=False), "r")  # noqa: SIM115
        else:
            raw = pa.PythonFile(open(src.path, "rb"), "r")  # noqa: SIM115
        return pa.CompressedInputStream(raw, src.compression) if src.compression else raw
    except Exception as e:  # noqa: BLE001 - OSError or ArrowException
        raise TokcolumnarError(f"cannot open {src.label}: {e}") from None


class _ByteRange(io.RawIOBase):
    """Bytes [start, end) of a regular file, read front to back."""

    def __init__(self, path: Path, start: int, end: int) -> None:
        super().__init__()
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
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
