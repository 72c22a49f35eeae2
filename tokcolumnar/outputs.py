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
  next time). `force=True` (`--force`) lifts only the "not ours" refusals, and never deletes
  what tokcolumnar did not write: a file output replaces that one file (never a directory);
  a directory output that holds other files gets the run's files written into it, each
  replaced atomically (as HF `save_pretrained` does), every other file left alone, and a
  note saying which of ours were replaced (`output_dir`, "merging").
* An output is locked for the run's life (`locked`: `flock` on `.NAME.tc-lock` beside it,
  released by the kernel if the process dies, removed at the end): a second run writing the
  same output is refused in one line naming the other run's pid.
* A failure of the environment while the result is written (no space, no permission) is one
  error naming the output path (`TokcolumnarEnvironmentError`), never our temporary.
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
import fcntl
import json
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .errors import (
    TokcolumnarEnvironmentError,
    TokcolumnarError,
    TokcolumnarValueError,
    environment_reason,
    warn,
)

#: Every file a training run may write into its output directory.
OUTPUT_DIR_FILES = frozenset({
    "tokenizer.json", "vocab.json", "merges.txt", "vocab.txt", "codes.txt", "merges.parquet",
    "vocab.parquet", "words.parquet", "run.json",
    "tokenizer.tokcolumnar.json",  # instead of tokenizer.json when HF cannot express the run
    "tokenizer_config.json", "special_tokens_map.json",  # transformers' roles (`hfconfig`)
    "tokenizer.model", "rounds.parquet",  # a Unigram run's SentencePiece model and its rounds
    "pruned.parquet",  # ... and the pieces its rounds dropped
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
    # each one a regular file: a sub-folder named like one of ours is not ours
    if not all(os.path.isfile(path / n) and not os.path.islink(path / n) for n in names):
        return False
    if PARTS_MARKER in names:
        return (all(PART_NAME.match(n) for n in names - {PARTS_MARKER})
                and _has_parts_marker(path))
    return names <= OUTPUT_DIR_FILES and _has_our_marker(path)


def _some(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown
                                       else "")


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


def write_parquet(df: pl.DataFrame, path: Path, kind: str,
                  metadata: dict[str, str] | None = None) -> None:
    """Write a table we produce, marked as ours (`kind` names the table in the marker), with
    `metadata` beside the marker (a words table: the settings it was counted with)."""
    df.write_parquet(path, compression="zstd", statistics=True,
                     metadata={PARQUET_MARKER: json.dumps({"kind": kind}), **(metadata or {})})


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
                f"({_some(foreign)}); move them away, or pass --force to write the new files "
                "beside them (other files are left alone)")
        raise TokcolumnarValueError(
            f"{what} {raw} is not empty and not a tokcolumnar output ({_some(entries)}); give "
            "a new or empty directory, or pass --force to write tokcolumnar's files into it "
            "(only files of the same names are replaced; other files are left alone)")
    if real.is_dir():
        raise TokcolumnarValueError(f"{what} {raw} is a directory; give a file name")
    if not real.is_file():
        raise TokcolumnarValueError(f"{what} {raw} exists and is not a regular file")
    if not force and not is_our_file(real):
        raise TokcolumnarValueError(f"{what} {raw} exists and was not written by tokcolumnar; "
                                    "choose another name, or pass --force to replace this one "
                                    "file")
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
    stale = []
    # beside it, and inside it (where a `--force` run into a shared directory writes)
    places = [target.parent] + ([target] if target.is_dir() and not target.is_symlink() else [])
    for place in places:
        try:
            names = os.listdir(place)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise _env_error(e, place) from None
        for name in names:
            m = _TEMP.match(name)
            if m is None or m.group("name") != target.name or _pid_alive(int(m.group("pid"))):
                continue
            stale.append((m.group("kind"), place / name))
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
    return TokcolumnarEnvironmentError(f"cannot write {e.filename or path}: {e.strerror or e}")


@contextlib.contextmanager
def writing(shown: Path | str) -> Iterator[None]:
    """Report a failure of the environment inside the block (no space, no permission...) as
    one error naming `shown`, the path the user gave, not the temporary being written."""
    try:
        yield
    except TokcolumnarError:
        raise
    except Exception as e:
        reason = environment_reason(e)
        if reason is None:
            raise
        raise TokcolumnarEnvironmentError(f"cannot write {shown}: {reason}") from None


# -- one run per output ------------------------------------------------------------------------
def lock_path(target: Path) -> Path:
    """The lock file of an output: `.NAME.tc-lock` beside it."""
    return target.parent / f".{target.name}.tc-lock"


def _holder(fd: int) -> str:
    """The pid written into a lock file by the run holding it ("?" before it has)."""
    for _ in range(20):  # the holder writes its pid just after taking the lock
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.01)
    return "?"


@contextlib.contextmanager
def locked(target: Path, what: str = "--out", shown: str | None = None) -> Iterator[None]:
    """Hold an exclusive advisory lock on `target` for the block: a second run writing the same
    output (another `--work-dir`, another `encode`) is refused at once instead of silently
    replacing the first one's result. The kernel releases the lock when the process dies (a
    SIGKILL leaves an unlocked file, taken over by the next run); it is removed at the end."""
    path = lock_path(target)
    if not os.access(target.parent, os.W_OK) and target.is_dir():
        path = target / ".tc-lock"  # writing into an existing directory only (`--force`)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise _env_error(e, path.parent) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise TokcolumnarError(f"{what} {shown or target} is being written by another "
                                   f"tokcolumnar run (pid {pid}); wait for it to end, or "
                                   "choose another path") from None
        # the run that held it may have removed the file meanwhile: lock the one at the path
        try:
            now, held = os.stat(path), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


# -- what a directory output writes ------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """The files a directory output is made of: `ours(name)` tells whether a name is one a run
    may write there, `written_before(dir)` the names an earlier run of ours wrote there (those
    a `--force` run into a shared directory removes when it no longer writes them)."""

    ours: Callable[[str], bool]
    written_before: Callable[[Path], set[str]]


def _train_files_before(directory: Path) -> set[str]:
    """The files `run.json` says an earlier training run wrote (none without that list)."""
    try:
        run = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(run, dict) or run.get("tool") != "tokcolumnar":
        return set()
    files = run.get("files")
    return {f for f in files if f in OUTPUT_DIR_FILES} if isinstance(files, list) else set()


def _parts_before(directory: Path) -> set[str]:
    """Part files that carry our Parquet marker, and our `_SUCCESS`."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    found = {n for n in names if PART_NAME.match(n) and is_our_file(directory / n)}
    if _has_parts_marker(directory):
        found.add(PARTS_MARKER)
    return found


#: A training run's directory (`OUTPUT_DIR_FILES`).
TRAIN_LAYOUT = Layout(ours=OUTPUT_DIR_FILES.__contains__, written_before=_train_files_before)
#: A directory of Parquet parts and its `_SUCCESS` marker (`encode --rows-per-file`, the
#: distributed engines).
PARTS_LAYOUT = Layout(ours=lambda n: n == PARTS_MARKER or PART_NAME.match(n) is not None,
                      written_before=_parts_before)


def _shares_with_others(path: Path) -> bool:
    """Whether a directory output holds files that are not ours, so that the run's files are
    written into it one by one (`--force`) instead of replacing it whole."""
    try:
        return bool(os.listdir(path)) and not is_our_dir(path)
    except OSError:
        return False


def _fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _merge_into(tmp: Path, target: Path, layout: Layout, what: str, raw: str) -> None:
    """Move each file of the finished result `tmp` (a hidden directory inside `target`) over
    its namesake in `target`, each by one `rename` once its data is on disk; remove the files
    an earlier run of ours wrote that this one does not; leave everything else. Says which
    files of ours it replaced or removed (one note)."""
    new = sorted(os.listdir(tmp))
    if any(not layout.ours(n) for n in new):  # a writer's bug: never move other names in
        raise TokcolumnarError(f"internal: unexpected output files {_some(new)}")
    before = layout.written_before(target)
    for name in new:  # all or nothing is not possible file by file: check them all first
        if os.path.isdir(target / name) and not os.path.islink(target / name):
            raise TokcolumnarValueError(f"{what} {raw}/{name} is a directory; tokcolumnar "
                                        "writes a file of that name: move it away")
    replaced = [n for n in new if os.path.lexists(target / n)]
    for name in new:
        _fsync_path(tmp / name)
        os.replace(tmp / name, target / name)
    stale = sorted(n for n in before - set(new)
                   if os.path.isfile(target / n) and not os.path.islink(target / n))
    for name in stale:
        (target / name).unlink()
    with contextlib.suppress(OSError):  # the renames themselves on disk
        _fsync_path(target)
    others = len([n for n in os.listdir(target) if n not in new and n != tmp.name
                  and n != ".tc-lock"])
    warn(f"{what} {raw}: wrote {len(new)} files beside {others} other(s), left as they were"
         + (f"; replaced {_some(replaced, 8)}" if replaced else "; replaced none")
         + (f"; removed {_some(stale, 8)} (an earlier tokcolumnar run's, not written by this one)"
            if stale else ""))


@contextlib.contextmanager
def output_dir(target: str | os.PathLike, *, inputs: Iterable[object] = (), force: bool = False,
               what: str = "--out", layout: Layout = TRAIN_LAYOUT) -> Iterator[Path]:
    """Check `target` (see `check_target`), lock it, create the temporary directory at once,
    yield it; on success its files go into `target`, on any failure it is removed.

    A new, empty or ours-only `target` is replaced whole, atomically (`_install_dir`). One
    that also holds other files (accepted with `force` only) is merged into instead: the
    temporary directory is made inside it, and each file of the result replaces its namesake
    by a rename (`_merge_into`); nothing else in it is touched."""
    raw = os.fspath(target)
    path = check_target(target, kind="dir", inputs=inputs, force=force, what=what)
    merge = force and path.is_dir() and _shares_with_others(path)
    _make_parent(path)
    with contextlib.ExitStack() as stack:
        stack.enter_context(locked(path, what, raw))
        recover(path)
        tmp = _temp_name(path / path.name if merge else path, "tmp")
        try:
            os.mkdir(tmp, 0o777)  # the umask applies
        except OSError as e:
            raise _env_error(e, tmp.parent) from None
        stack.callback(_remove, tmp)
        with writing(raw):
            yield tmp
        try:
            if merge:
                _merge_into(tmp, path, layout, what, raw)
            else:
                _install_dir(tmp, path)
        except OSError as e:
            raise TokcolumnarEnvironmentError(f"cannot write {raw}: {e.strerror or e}") from None


@contextlib.contextmanager
def output_file(target: str | os.PathLike, *, inputs: Iterable[object] = (), force: bool = False,
                what: str = "--out") -> Iterator[Path]:
    """As `output_dir` for a single file: yields an empty temporary file beside `target`,
    renamed over it on success (replacing that one file only: a directory is refused by
    `check_target`, even with `force`). The caller marks it as ours (Parquet metadata or
    `mark_file`)."""
    raw = os.fspath(target)
    path = check_target(target, kind="file", inputs=inputs, force=force, what=what)
    _make_parent(path)
    with contextlib.ExitStack() as stack:
        stack.enter_context(locked(path, what, raw))
        recover(path)
        tmp = _temp_name(path, "tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # umask applies
        except OSError as e:
            raise _env_error(e, path.parent) from None
        stack.callback(_remove, tmp)
        with writing(raw):
            yield tmp
        if os.path.isdir(path) and not os.path.islink(path):  # made since the check
            raise TokcolumnarValueError(f"{what} {raw} is a directory; give a file name")
        try:
            os.replace(tmp, path)
        except OSError as e:
            raise TokcolumnarEnvironmentError(f"cannot write {raw}: {e.strerror or e}") from None
