"""The work directory of a training run (`--work-dir`, default `OUT.work` beside `--out`):
spilled count runs, the counting manifest, the counted words and the merge loop's checkpoint
(docs/architecture.md, "Memory and spilling / checkpoints").

Safety follows the outputs' rules (`outputs`): the path is checked as an output is (never an
input, inside an input directory, the current directory, `/` or a symbolic link); an existing
directory is used only when it is empty or ours — it holds our marker `MARKER` naming the tool —
and never while the process that marked it is alive. Every file is written to a temporary name
and renamed into place, so a `kill -9` leaves either the old or the new file. Without
`--resume` a work directory of ours left by a killed run is cleared; with it, its fingerprint
(the options and, per input, size, mtime and a hash of the first block) must match this run's,
or the run is refused naming what changed. A fresh run writes the hashes into the marker
before the first file a resume could take up, once the count has read the inputs (`WorkDir`).
It is removed when the run succeeds.

Test-only: the environment variable `TOKCOLUMNAR_TEST_KILL=STAGE:N` (`count:N` after N units
counted, `merge:N` at the N-th pass of the merge loop) makes the process SIGKILL itself, so that
tests can kill a run at a chosen point (`kill_point`). Never set it otherwise."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl

from . import ondisk
from .config import TrainConfig
from .corpus.sources import Source, file_digests, file_stat
from .errors import TokcolumnarEnvironmentError, TokcolumnarError
from .outputs import _pid_alive, check_target, writing
from .presets import flag

MARKER = "tokcolumnar-work.json"
#: The files a resumed run takes up (`WorkDir.resumable`): the counting manifest
#: (`corpus.spill.MANIFEST`), the counted words (`training.pipeline.COUNTED_WORDS`) and the
#: merge loop's checkpoint (`training.checkpoint.CHECKPOINT`).
SAVED_STATE = ("count.json", "words.parquet", "merge.pkl")
#: Options that change nothing in the outputs, left out of the fingerprint.
UNFINGERPRINTED = ("show_progress", "special_token_roles")  # (roles: outputs only)
TEST_KILL = "TOKCOLUMNAR_TEST_KILL"
#: its value, read once (tests set it in the environment of the process they start):
#: `kill_point` runs before every pass of a merge loop, and a lookup of a variable that is not
#: set (a KeyError caught inside `os.environ.get`) costs ~2 us, ~60 ms over medium/en's
#: 30,000 WordPiece passes
_KILL_AT = os.environ.get(TEST_KILL)


def default_work_dir(out_dir: str | os.PathLike) -> Path:
    """`OUT.work` beside `--out OUT`."""
    out = Path(os.path.abspath(os.fspath(out_dir)))
    return out.parent / (out.name + ".work")


def input_fingerprint(paths: list[Path | Source], heads: bool = True) -> list[dict[str, Any]]:
    """Per input file (a local path or `Source`, or a URI's `Source`: read through its
    filesystem): its absolute path (the URI), size, mtime (ns) and, with `heads`, the SHA-256
    of its first MiB (`sources.file_digests`: read once per run, `run.json`'s fingerprint
    shares it). Without `heads`, nothing is read: a listed file's size and mtime are known."""
    out = []
    for p in paths:
        src = p if isinstance(p, Source) else Source(p, "text", None)
        # a local file by its absolute path (a resumed run may start from another directory)
        name = src.uri or os.path.abspath(src.path)
        if not heads:
            size, mtime_ns = file_stat(src)
            out.append({"path": name, "size": size, "mtime_ns": mtime_ns})
            continue
        digests = file_digests(src)
        out.append({"path": name, "size": digests.size, "mtime_ns": digests.mtime_ns,
                    "head_sha256": digests.head_sha256})
    return out


#: The layout of the states a work directory saves (the pickled merge loop, the DuckDB tables):
#: raised whenever it changes, so that `--resume` refuses a directory an older copy wrote
#: (2: the training layout without `nxt`, `prv` and `word_of`, docs/architecture.md; 3: the
#: loop's pickle with its large arrays after it, `write_pickle`; 4: int16 ids in the layout
#: and the pair table's narrow form for vocabularies that fit them; 5: uint16 ids up to
#: 65,534 tokens, the pair table's keys stored plus one).
STATE_FORMAT = 5


def run_fingerprint(cfg: TrainConfig, paths: list[Path | Source], heads: bool = True
                    ) -> dict[str, Any]:
    """What a resumed run must share with the run it continues (`heads`: see
    `input_fingerprint`)."""
    options = {k: v for k, v in cfg.to_dict().items() if k not in UNFINGERPRINTED}
    return {"options": options, "inputs": input_fingerprint(paths, heads),
            "polars": pl.__version__, "python": sys.version.split()[0],
            "state_format": STATE_FORMAT}


def has_heads(fingerprint: dict[str, Any]) -> bool:
    """Whether a fingerprint holds its inputs' head hashes (a run's marker gets them before
    the first file a resume could take up: see `WorkDir`)."""
    return all("head_sha256" in x for x in fingerprint.get("inputs", []))


def fingerprint_change(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """What differs between two fingerprints, in words (None when nothing does; head hashes
    are compared when both hold them)."""
    was_options, options = old.get("options", {}), new.get("options", {})
    for key in sorted(set(was_options) | set(options)):
        if was_options.get(key) != options.get(key):
            return (f"option {flag(key)} changed ({options.get(key)!r}, was "
                    f"{was_options.get(key)!r})")
    was_inputs, inputs = old.get("inputs", []), new.get("inputs", [])
    if [x["path"] for x in was_inputs] != [x["path"] for x in inputs]:
        return (f"the inputs changed ({len(inputs)} files: {_names(inputs)}; were "
                f"{len(was_inputs)}: {_names(was_inputs)})")
    for was, now in zip(was_inputs, inputs):
        for key, what in (("size", "size"), ("mtime_ns", "modification time"),
                          ("head_sha256", "first block")):
            if key in was and key in now and was[key] != now[key]:
                return f"input {now['path']} changed ({what})"
    for key in ("polars", "python"):
        if old.get(key) != new.get(key):
            return f"{key} changed ({new.get(key)}, was {old.get(key)})"
    if old.get("state_format", 1) != new.get("state_format", 1):
        return (f"it was saved by another tokcolumnar (state format "
                f"{old.get('state_format', 1)}, this one reads {new.get('state_format', 1)})")
    return None


def _names(inputs: list[dict[str, Any]]) -> str:
    names = [x["path"] for x in inputs]
    return ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")


def is_our_work_dir(path: Path) -> dict[str, Any] | None:
    """The marker of a work directory of ours (None when `path` is not one)."""
    try:
        marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(marker, dict) and marker.get("tool") == "tokcolumnar" and \
            marker.get("kind") == "work-dir":
        return marker
    return None


class WorkDir:
    """An open work directory (see the module docstring). `resumed`: it holds the state of an
    earlier run with the same fingerprint, to be continued.

    A fresh run's fingerprint may come in two steps: `fingerprint` without the inputs' head
    hashes (nothing read: the listing's sizes and mtimes), written into the marker at once,
    and `complete`, the whole fingerprint, taken and written into the marker before the first
    file a `--resume` could take up (`_settle`, called by every atomic write: the manifest,
    the counted words, the checkpoints). By then the count has read the small files whole and
    left their hashes in the run's scope (`sources.digests_recorder`): a folder of 10,000
    small files is not read a second time for them. A marker without head hashes is a run
    killed before it saved anything: `--resume` checks what it holds (the options, paths,
    sizes, mtimes: a change refuses) and starts again."""

    def __init__(self, path: Path, resumed: bool) -> None:
        self.path = path
        self.resumed = resumed
        self._marker: dict[str, Any] = {}
        self._complete: Callable[[], dict] | None = None  # the fingerprint still to take

    @classmethod
    def open(cls, target: str | os.PathLike, *, inputs: list[object], fingerprint: dict,
             resume: bool, complete: Callable[[], dict] | None = None) -> WorkDir:
        # the output checks, without "not ours" (which `is_our_work_dir` decides here)
        path = check_target(target, kind="dir", inputs=inputs, force=True, what="--work-dir")
        marker = is_our_work_dir(path) if path.is_dir() else None
        if path.is_dir() and marker is None and os.listdir(path):
            raise TokcolumnarError(f"--work-dir {target} is not empty and not a tokcolumnar work "
                                   "directory; give a new or empty directory")
        if marker is not None:
            pid = marker.get("pid")
            if isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid):
                raise TokcolumnarError(f"--work-dir {target} is in use by the running process "
                                       f"{pid}")
        resumed = False
        if resume and marker is not None:
            saved = marker.get("fingerprint") or {}
            if complete is not None and has_heads(saved):
                fingerprint, complete = complete(), None  # compared whole: taken now
            change = fingerprint_change(saved, fingerprint)
            if change is not None:
                raise TokcolumnarError(f"cannot --resume from {path}: {change}; run without "
                                       "--resume to start again")
            # a killed run whose marker has no head hashes had saved nothing: start again
            resumed = has_heads(saved)
        if not resumed:
            shutil.rmtree(path, ignore_errors=True)  # ours (a killed run's) or empty
        try:
            path.mkdir(parents=True, exist_ok=True)
            work = cls(path, resumed)
            work._marker = {"tool": "tokcolumnar", "kind": "work-dir", "pid": os.getpid(),
                            "fingerprint": fingerprint}
            work.write_json(MARKER, work._marker)
        except (OSError, TokcolumnarError) as e:
            if not resumed:  # a fresh directory holds nothing yet: no half-made one left
                shutil.rmtree(path, ignore_errors=True)
            if isinstance(e, TokcolumnarError):
                raise
            raise TokcolumnarEnvironmentError(f"cannot write --work-dir {path}: "
                                              f"{e.strerror or e}") from None
        work._complete = complete
        return work

    def _settle(self) -> None:
        """The marker with the whole fingerprint, before the first file a resume could take
        up (see the class)."""
        complete, self._complete = self._complete, None
        if complete is None:
            return
        self._marker["fingerprint"] = complete()
        self.write_json(MARKER, self._marker)

    # -- atomic files ----------------------------------------------------------------------
    def file(self, name: str) -> Path:
        return self.path / name

    @contextlib.contextmanager
    def _temporary(self, name: str) -> Iterator[Path]:
        """The temporary path `name` is written at, removed if the write fails (a full disk
        leaves no partial file behind); a failure of the environment is one error naming
        `name`'s path (`outputs.writing`)."""
        tmp = self.path / f".{name.replace('/', '_')}.{os.getpid()}.tmp"
        try:
            with writing(self.path / name):
                yield tmp
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _replace(self, name: str, write: Any) -> None:
        """Write `name` through a temporary file, fsync'd, then renamed over it (the marker
        settled first)."""
        self._settle()
        with self._temporary(name) as tmp:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path / name)

    def write_by(self, name: str, make: Callable[[Path], None]) -> None:
        """Write `name` with `make(path)` (a writer that opens the file itself, e.g. DuckDB)
        at a temporary path, fsync'd, then renamed over it (the marker settled first)."""
        self._settle()
        with self._temporary(name) as tmp:
            tmp.unlink(missing_ok=True)
            make(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path / name)

    def write_json(self, name: str, obj: Any) -> None:
        # one line: with `indent`, `json` encodes in Python (~50 ms for the fingerprint of a
        # folder of 10,000 files), without it in C
        self._replace(name, lambda f: f.write(json.dumps(obj).encode()))

    def read_json(self, name: str) -> Any:
        try:
            return json.loads((self.path / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def write_pickle(self, name: str, obj: Any) -> None:
        """Pickle `obj` into `name`, its large arrays' memory written after the pickle as it
        is (out-of-band buffers: no copy of an array is made, and a loop whose arrays are
        files, `ondisk`, is read from them page by page)."""
        self._replace(name, lambda f: _dump_with_buffers(obj, f))

    def read_pickle(self, name: str) -> Any:
        """What `write_pickle` wrote (None when there is no such file); the large arrays are
        read into `ondisk.empty` arrays (files again, when the loop runs on disk)."""
        try:
            with open(self.path / name, "rb") as f:
                return _load_with_buffers(f)
        except FileNotFoundError:
            return None

    def write_parquet(self, name: str, df: pl.DataFrame) -> None:
        self._replace(name, lambda f: df.write_parquet(f, compression="zstd"))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def resumable(self) -> bool:
        """Whether `--resume` could take up what this directory holds: the marker's whole
        fingerprint and one of the saved states (`SAVED_STATE`). A run that fails before
        saving any leaves nothing worth keeping."""
        if not has_heads(self._marker.get("fingerprint") or {"inputs": [{}]}):
            return False
        return any((self.path / name).is_file() for name in SAVED_STATE)


def kill_point(stage: str, n: int) -> None:
    """Test-only (see the module docstring): SIGKILL this process at `stage`'s N-th point."""
    if _KILL_AT and _KILL_AT == f"{stage}:{n}":
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _dump_with_buffers(obj: Any, f: BinaryIO) -> None:
    """`obj` pickled with its arrays of `ondisk.MIN_BYTES` or more out-of-band: the header's
    size (8 bytes), the header (the pickle's size and each buffer's), the pickle, the
    buffers."""
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < ondisk.MIN_BYTES:
            return True  # in the pickle
        buffers.append(buffer)
        return False

    body = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    header = pickle.dumps((len(body), [b.raw().nbytes for b in buffers]), protocol=5)
    f.write(len(header).to_bytes(8, "little"))
    f.write(header)
    f.write(body)
    del body
    for buffer in buffers:
        raw = buffer.raw()
        # a slice at a time: the pages of a loop on disk that a write reads are dropped after
        # each (one write of a whole array faulted it in, over the limit: 5 GB of text,
        # `--memory-limit 4GB`, peaked at 4.39 GB while checkpointing a 4.3 GB state)
        for at in range(0, raw.nbytes, ondisk.IO_CHUNK):
            f.write(raw[at:at + ondisk.IO_CHUNK])
            ondisk.drop_pages()


def _load_with_buffers(f: BinaryIO) -> Any:
    """What `_dump_with_buffers` wrote."""
    size = int.from_bytes(f.read(8), "little")
    body_size, sizes = pickle.loads(f.read(size))  # noqa: S301 - our own state, our marked dir
    body = f.read(body_size)
    buffers = []
    for n in sizes:
        buffer = ondisk.empty(n, np.uint8)
        view, done = memoryview(buffer), 0
        while done < n:
            got = f.readinto(view[done:done + ondisk.IO_CHUNK])
            if not got:
                raise EOFError(f"{f.name}: the saved state ends early")
            done += got
            ondisk.drop_pages()
        buffers.append(buffer)
    return pickle.loads(body, buffers=buffers)  # noqa: S301
