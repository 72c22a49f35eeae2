"""Safe outputs: what an output path may replace, and how it is replaced.

The rules (README "Safety"):

* An output replaces only what tokcolumnar wrote there before. A training directory is ours when
  its `run.json` says `"tool": "tokcolumnar"` and it holds nothing but the files a run writes
  (`OUTPUT_DIR_FILES`); a Parquet file is ours when its key-value metadata has the key
  `tokcolumnar`; any other file is ours when it carries the extended attribute
  `user.tokcolumnar` (set where the file system allows it). An empty directory may be filled.
* Everything else is refused before any work starts: a directory with other files, an existing
  file that is not ours, a directory where a file is expected (and the reverse), a symbolic
  link, the current directory or one of its ancestors, `/`, an input itself, a directory that
  contains an input, and a path inside an input directory (its files would be read as input
  next time). `force=True` (`--force`) lifts only the "not ours" refusals.
* The output's parent is made (and proven writable) before the work starts: the temporary
  sibling the result is written into is created at once, so a read-only or missing location
  costs nothing.
* Results are written into that temporary sibling (`.NAME.tc-PID-RANDOM.tmp`) and moved into
  place at the end: a file by `rename`, a directory by an atomic exchange (`renameat2` with
  `RENAME_EXCHANGE` on Linux), so there is no moment without the old or the new result. Where
  the exchange is not available the old directory is first renamed to `.NAME.tc-PID-RANDOM.old`;
  a run killed between the two renames leaves it there, and the next run writing to the same
  place renames it back before anything else (`recover`).
* Temporary names are created with the process umask (files 0666, directories 0777 before the
  mask), like any file a Unix tool writes. Stale temporaries of our naming whose process is gone
  (a SIGKILL) are removed by the next run that writes to the same place.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from .errors import TokcolumnarError, TokcolumnarValueError

#: Every file a training run may write into its output directory.
OUTPUT_DIR_FILES = frozenset({
    "tokenizer.json", "vocab.json", "merges.txt", "vocab.txt", "codes.txt", "merges.parquet",
    "vocab.parquet", "words.parquet", "run.json",
    "tokenizer.tokcolumnar.json",  # instead of tokenizer.json when HF cannot express the run
    "tokenizer.tiktoken",  # a byte-level BPE's ranks in tiktoken's format
})
#: A directory of Parquet parts (`encode --rows-per-file`): `part-00000.parquet`, ... and the
#: marker written last, `_SUCCESS`, holding `{"tool": "tokcolumnar", ...}`.
PARTS_MARKER = "_SUCCESS"
PART_NAME = re.compile(r"^part-\d{5,}\.parquet$")
#: The key-value metadata key (Parquet) and extended attribute (other files) marking our files.
PARQUET_MARKER = "tokcolumnar"
XATTR_MARKER = "user.tokcolumnar"

_TEMP = re.compile(r"^\.(?P<name>.+)\.tc-(?P<pid>\d+)-[0-9a-f]{8}\.(?P<kind>tmp|old)$")


# -- what a path is --------------------------------------------------------------------------
def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _is_within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def _has_our_marker(path: Path) -> bool:
    try:
        run = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(run, dict) and run.get("tool") == "tokcolumnar"


def _has_parts_marker(path: Path) -> bool:
    try:
        done = json.loads((path / PARTS_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(done, dict) and done.get("tool") == "tokcolumnar"


def is_our_dir(path: Path) -> bool:
    """A directory a training run wrote (our `run.json` marker and only our file names), or a
    directory of Parquet parts we wrote (our `_SUCCESS` marker and only part files)."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return False
    if PARTS_MARKER in names:
        return (all(PART_NAME.match(n) for n in names - {PARTS_MARKER})
                and _has_parts_marker(path))
    return names <= OUTPUT_DIR_FILES and _has_our_marker(path)


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def is_our_file(path: Path) -> bool:
    """A file we wrote: Parquet with our metadata key, or any file with our extended attribute."""
    try:
        if XATTR_MARKER in os.listxattr(path):
            return True
    except (OSError, AttributeError):
        pass
    try:
        meta = pl.read_parquet_metadata(path)
    except Exception:  # noqa: BLE001 - not Parquet (or unreadable): not ours
        return False
    return PARQUET_MARKER in meta


def mark_file(path: Path) -> None:
    """Mark a non-Parquet output as ours (best effort: not every file system has xattrs)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setxattr(path, XATTR_MARKER, b"1")


def write_parquet(df: pl.DataFrame, path: Path, kind: str) -> None:
    """Write a table we produce, marked as ours (`kind` names the table in the marker)."""
    df.write_parquet(path, compression="zstd", statistics=True,
                     metadata={PARQUET_MARKER: json.dumps({"kind": kind})})


def input_paths(inputs: Iterable[object]) -> list[Path]:
    """The real paths of the inputs that are files or directories (globs expanded; `-`,
    data frames and iterators name no path)."""
    import glob

    out: list[Path] = []
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            continue
        s = os.fspath(item)
        if s == "-":
            continue
        if s.startswith("file://"):  # a local file named by a URI is guarded as its path
            from urllib.parse import unquote, urlsplit

            s = unquote(urlsplit(s).path)
        matches = glob.glob(s, recursive=True) if any(c in s for c in "*?[") else [s]
        out.extend(_real(m) for m in matches if os.path.exists(m))
    return out


# -- the checks --------------------------------------------------------------------------------
def check_target(target: str | os.PathLike, *, kind: str, inputs: Iterable[object] = (),
                 force: bool = False, what: str = "--out") -> Path:
    """Refuse an output path that could destroy data we did not write (see the module
    docstring); returns the absolute path to write. `kind` is "dir" or "file"."""
    raw = os.fspath(target)
    if not raw:
        raise TokcolumnarValueError(f"{what}: empty path")
    path = Path(os.path.abspath(raw))
    if path.is_symlink():
        raise TokcolumnarValueError(f"{what} {raw} is a symbolic link; give the real path")
    real = _real(path)
    cwd = _real(os.getcwd())
    if real == Path(real.anchor):
        raise TokcolumnarValueError(f"{what} {raw} is the root directory")
    if _is_within(cwd, real):
        raise TokcolumnarValueError(f"{what} {raw} is the current directory or contains it; "
                                    "give a new or empty directory")
    for inp in input_paths(inputs):
        if real == inp:
            raise TokcolumnarValueError(f"{what} {raw} is an input")
        if _is_within(inp, real):
            raise TokcolumnarValueError(f"{what} {raw} contains the input {inp}")
        if inp.is_dir() and _is_within(real, inp):
            raise TokcolumnarValueError(f"{what} {raw} is inside the input directory {inp} (its "
                                   "files would be read as input); write it elsewhere")
    if not os.path.lexists(real):
        return real
    if kind == "dir":
        if not real.is_dir():
            raise TokcolumnarValueError(f"{what} {raw} exists and is not a directory")
        if force or is_our_dir(real):
            return real
        try:
            entries = sorted(os.listdir(real))
        except OSError as e:
            raise TokcolumnarError(f"cannot read {what} {raw}: {e.strerror}") from None
        if not entries:
            return real
        if _has_our_marker(real):
            foreign = [e for e in entries if e not in OUTPUT_DIR_FILES]
            raise TokcolumnarValueError(
                f"{what} {raw} is a tokcolumnar output that also holds other files "
                f"({_some(foreign)}); move them away, or pass --force to replace it all")
        raise TokcolumnarValueError(
            f"{what} {raw} is not empty and not a tokcolumnar output ({_some(entries)}); give "
            "a new or empty directory, or --force to replace it")
    if real.is_dir():
        raise TokcolumnarValueError(f"{what} {raw} is a directory; give a file name")
    if not real.is_file():
        raise TokcolumnarValueError(f"{what} {raw} exists and is not a regular file")
    if not force and not is_our_file(real):
        raise TokcolumnarValueError(f"{what} {raw} exists and was not written by tokcolumnar; "
                                    "remove it, choose another name, or pass --force to replace "
                                    "it")
    return real


# -- temporaries -------------------------------------------------------------------------------
def _temp_name(target: Path, kind: str) -> Path:
    return target.parent / f".{target.name}.tc-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def recover(target: Path) -> None:
    """Before writing `target`: put back an old result a killed run left moved aside (when the
    target itself is missing), and remove our stale temporaries of dead processes."""
    try:
        names = os.listdir(target.parent)
    except FileNotFoundError:
        return
    except OSError as e:
        raise _env_error(e, target.parent) from None
    stale = []
    for name in names:
        m = _TEMP.match(name)
        if m is None or m.group("name") != target.name or _pid_alive(int(m.group("pid"))):
            continue
        stale.append((m.group("kind"), target.parent / name))
    for kind, p in sorted(stale, key=lambda x: x[0] != "old"):  # old results first
        if kind == "old" and not os.path.lexists(target):
            os.rename(p, target)
        else:
            _remove(p)


def _make_parent(target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _env_error(e, target.parent) from None


# -- atomic replacement --------------------------------------------------------------------
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False  # the file system cannot exchange: fall back to two renames
    raise OSError(err, os.strerror(err), str(b))


def _install_dir(tmp: Path, target: Path) -> None:
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if _exchange(tmp, target):
        _remove(tmp)  # it now holds the previous result
        return
    old = _temp_name(target, "old")
    os.rename(target, old)  # a kill here is repaired by `recover` on the next run
    os.rename(tmp, target)
    _remove(old)


def _env_error(e: OSError, path: Path | str) -> TokcolumnarError:
    return TokcolumnarError(f"cannot write {e.filename or path}: {e.strerror or e}")


@contextlib.contextmanager
def output_dir(target: str | os.PathLike, *, inputs: Iterable[object] = (), force: bool = False,
               what: str = "--out") -> Iterator[Path]:
    """Check `target` (see `check_target`), create the temporary directory at once, yield it;
    on success it replaces `target` atomically, on any failure it is removed."""
    path = check_target(target, kind="dir", inputs=inputs, force=force, what=what)
    _make_parent(path)
    recover(path)
    tmp = _temp_name(path, "tmp")
    try:
        os.mkdir(tmp, 0o777)  # the umask applies
    except OSError as e:
        raise _env_error(e, path.parent) from None
    try:
        yield tmp
        try:
            _install_dir(tmp, path)
        except OSError as e:
            raise _env_error(e, path) from None
    finally:
        _remove(tmp)


@contextlib.contextmanager
def output_file(target: str | os.PathLike, *, inputs: Iterable[object] = (), force: bool = False,
                what: str = "--out") -> Iterator[Path]:
    """As `output_dir` for a single file: yields an empty temporary file beside `target`,
    renamed over it on success. The caller marks it as ours (Parquet metadata or `mark_file`)."""
    path = check_target(target, kind="file", inputs=inputs, force=force, what=what)
    _make_parent(path)
    recover(path)
    tmp = _temp_name(path, "tmp")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask applies
    except OSError as e:
        raise _env_error(e, path.parent) from None
    try:
        yield tmp
        try:
            os.replace(tmp, path)
        except OSError as e:
            raise _env_error(e, path) from None
    finally:
        _remove(tmp)
