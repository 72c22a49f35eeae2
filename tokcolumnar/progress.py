"""Progress on stderr while counting, merging and encoding.

Two forms, chosen by where stderr goes:

- a terminal: one line redrawn in place (at most 5 times a second), e.g.
  `counting: 412 MB / 1.07 GB (38.4%), 21.3 MB/s, ETA 31s`;
- anything else (a log file, a pipe, CI): log-friendly lines, never a carriage return — at
  most one line every `LOG_EVERY_S` seconds while a stage runs, and one summary line when it
  ends, e.g. `merging: done, 49,742 merges in 2m03s (404 merges/s), last pair count 18`; a
  stage shorter than the interval writes nothing (a short run's stderr stays one line).

`enabled=None` (the Python API's default, `show_progress=None`) shows the terminal form on a
terminal and nothing elsewhere; `enabled=True` (the CLI without `--quiet`) also writes the log
lines off a terminal; `enabled=False` (`--quiet`, `show_progress=False`) writes nothing.
`TOKCOLUMNAR_QUIET=1` silences every form.

Counting and encoding report input bytes: `READING` follows the inputs `iter_sequences` reads
(the sum of their sizes is the total; a compressed input counts its compressed bytes, read
from the position of its open file), so that MB/s and the ETA are in the units of the files on
disk. Standard input and named pipes have no total: bytes and MB/s only, no ETA.

The hot loops call `update` once per unit of work (a 4 MiB batch, a merge); it costs a clock
read and a comparison unless a line is due."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from .corpus.sources import Source, file_size, parquet_metadata, read_position
from .memory import peak_resident_bytes

#: Off a terminal, a long stage writes one line per this many seconds at most (a 2-hour run
#: logs ~240 lines per stage: enough to see it move, few enough to read back). The environment
#: variable TOKCOLUMNAR_PROGRESS_EVERY (seconds) changes it.
LOG_EVERY_S = 30.0
#: On a terminal, the line is redrawn at most this often.
REDRAW_EVERY_S = 0.2


def format_bytes(n: float) -> str:
    """Decimal units, as file managers and `MB/s` use them: `950 B`, `12.3 kB`, `1.07 GB`."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.2f} {unit}" if v < 10 else f"{v:.1f} {unit}" if v < 100 else \
                f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def format_rate(bytes_per_s: float) -> str:
    """`21.3 MB/s` (megabytes, 10^6, per second; kB/s below one megabyte)."""
    if bytes_per_s < 1e6:
        return f"{bytes_per_s / 1e3:.1f} kB/s"
    return f"{bytes_per_s / 1e6:.1f} MB/s"


def format_duration(seconds: float) -> str:
    """`45s`, `12m05s`, `2h03m` (an ETA or an elapsed time: no more precision than useful)."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class InputMeter:
    """Input bytes consumed so far: the sizes of the finished inputs plus the read position of
    the current one. The position is that of the input's open file descriptor (found once per
    input by its device and inode), so a compressed input counts compressed bytes and the
    readers need no change. A Parquet file is read at offsets, which move no position: its
    share is its size times the fraction of its rows read (from its footer's row count).
    A file of a URI (read through an Arrow filesystem: no descriptor of ours) is followed by
    the position of the stream `open_binary` opened (`sources.read_position`), else by the
    text read from it, as standard input is, up to its size; its Parquet rows as a local
    file's. Anything else without a descriptor counts once it is finished."""

    def __init__(self) -> None:
        self.total: int | None = None
        self._finished = 0
        self._current: Source | None = None
        self._fd: int | None = None
        self._stat: tuple[int, int] | None = None
        self._rows = 0  # rows read of the current Parquet input
        self._rows_total: int | None = None
        self._size = 0  # the current Parquet input's size
        self._last = 0  # the current input's last read position (it stays once closed)
        self._text = 0  # text read of the current URI's file

    def begin(self, sources: list[Source]) -> None:
        """A new reading: the total is the sum of the sizes when every input is a whole
        regular file (none for standard input, a pipe, or data given from Python)."""
        self._finished, self._current, self._fd = 0, None, None
        if not sources:
            self.total = None
            return
        try:
            self.total = (sum(file_size(s) for s in sources)
                          if all(s.kind == "file" and s.byte_range is None for s in sources)
                          else None)
        except OSError:
            self.total = None

    def begin_units(self, total: int | None) -> None:
        """A new reading unit by unit (a bounded count): the total is given."""
        self.total, self._finished, self._current, self._fd = total, 0, None, None

    def start_unit(self, src: Source, before: int, size: int) -> None:
        """The next unit, `size` bytes after `before` bytes of the total. A whole file (a
        compressed text, a CSV) is followed by its read position, Parquet row groups by the
        rows read of theirs, standard input and pipes by the text read; a byte range of a
        text file counts once it is finished (its position is not the unit's)."""
        # (standard input and pipes have no size: their text read so far stays counted)
        self._finished, self._current, self._fd = max(before, self._finished), None, None
        if src.kind != "file" or src.byte_range is None:
            self.start(src)
        if src.fmt == "parquet" and src.row_groups is not None:
            try:
                meta = parquet_metadata(src)
                self._rows_total = sum(meta.row_group(g).num_rows for g in src.row_groups)
                self._size = size
            except Exception:  # noqa: BLE001 - progress never fails a run
                self._rows_total, self._size = 0, 0

    def end_unit(self, after: int) -> None:
        """The unit ended `after` bytes into the total (or, reading standard input, where
        its text read so far says)."""
        self._finished, self._current, self._fd = max(after, self.position()), None, None

    def start(self, src: Source) -> None:
        self._current, self._fd, self._last, self._text = src, None, 0, 0
        self._rows, self._rows_total = 0, None
        if src.uri is not None:
            self._stat = None
            try:
                self._size = file_size(src)
            except OSError:
                self._size = 0
            return
        try:
            st = os.stat(src.path) if src.kind == "file" else None
        except OSError:
            st = None
        self._stat = (st.st_dev, st.st_ino) if st is not None else None

    def read_text(self, nbytes: int) -> None:
        """Bytes of text read from an input without a file position (standard input, a
        pipe, a URI's file): counted as they are read."""
        if self._current is not None and self._current.uri is not None:
            self._text += nbytes
        else:
            self._finished += nbytes

    def read_rows(self, n: int) -> None:
        """Rows read from the current input (a Parquet file: its position is by rows)."""
        self._rows += n

    def finish(self, src: Source) -> None:
        if src.kind == "file":
            with contextlib.suppress(OSError):
                self._finished += file_size(src)
        self._current, self._fd = None, None

    def position(self) -> int:
        """Bytes consumed (called at most once per redraw or log interval). The inputs may be
        read in another thread (a reader ahead of the count: `corpus.units.unit_chunks`,
        `corpus.counting.prefetched`), which can change the current input while this reads
        it: then the position of the finished inputs (progress never fails a run)."""
        try:
            return self._finished + self._current_position()
        except Exception:  # noqa: BLE001 - the current input changed meanwhile (see above)
            return self._finished

    def _current_position(self) -> int:
        if self._current is not None and self._current.uri is not None:
            if self._current.fmt == "parquet":
                return self._parquet_position(self._current)
            position = read_position(self._current.uri)
            if position is not None:
                self._last = position
                return position
            # closed (read to its end) or not opened by open_binary: the text read
            return max(self._last, min(self._text, self._size))
        if self._current is None or self._stat is None:
            return 0
        if self._current.fmt == "parquet":
            return self._parquet_position(self._current)
        if self._fd is not None:  # still the input's descriptor (not closed and reused)?
            with contextlib.suppress(OSError):
                st = os.fstat(self._fd)
                if (st.st_dev, st.st_ino) == self._stat:
                    self._last = os.lseek(self._fd, 0, os.SEEK_CUR)  # reads, never moves, it
                    return self._last
            self._fd = None
        # find the descriptor of the current input among the open ones (once per input)
        for fd in _open_fds():
            with contextlib.suppress(OSError):
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == self._stat:
                    self._fd = fd
                    self._last = os.lseek(fd, 0, os.SEEK_CUR)
                    return self._last
        # closed: read to its end, the last chunks still being counted
        return self._last

    def _parquet_position(self, src: Source) -> int:
        if self._rows_total is None:
            try:
                self._rows_total = parquet_metadata(src).num_rows
                self._size = file_size(src)
            except Exception:  # noqa: BLE001 - progress never fails a run
                self._rows_total, self._size = 0, 0
        if not self._rows_total:
            return 0
        return self._size * min(self._rows, self._rows_total) // self._rows_total


def _open_fds() -> list[int]:
    """The process's open file descriptors (Linux's /proc, else the first 1024)."""
    with contextlib.suppress(OSError):
        return sorted(int(x) for x in os.listdir("/proc/self/fd") if x.isdigit())
    return list(range(3, 1024))


#: The inputs being read now (`corpus.readers.iter_sequences` keeps it up to date; one
#: reading at a time per process, which is how the CLI and `train` read).
READING = InputMeter()


class Progress:
    """One stage's progress (`stage`: counting, merging, encoding).

    `unit="bytes"` reads its position from `meter` (input bytes) and shows sizes, MB/s and an
    ETA; `unit="merges"` / `"rows"` counts what `update(done)` says. `total` (for bytes: the
    meter's) gives the fraction and the ETA. `update(done, pair=...)` also shows the count of
    the pair just merged."""

    def __init__(self, stage: str, total: int | None = None, unit: str = "bytes",
                 enabled: bool | None = None, meter: InputMeter | None = None,
                 stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        tty = _isatty(self.stream)
        if os.environ.get("TOKCOLUMNAR_QUIET") or enabled is False:
            self.mode: str | None = None
        elif tty:
            self.mode = "tty"
        else:
            self.mode = "log" if enabled else None
        self.stage, self.unit, self.meter = stage, unit, meter
        self._total = total
        self.start = time.monotonic()
        self.every = REDRAW_EVERY_S if self.mode == "tty" else log_every()
        self._next = self.start + self.every
        self.done = 0
        self.pair: int | None = None
        self.rows: int | None = None

    @property
    def total(self) -> int | None:
        """The target: the meter's total input bytes (known once reading begins), else the
        total given."""
        return self.meter.total if self.meter is not None else self._total

    def update(self, done: int | None = None, pair: int | None = None,
               rows: int | None = None) -> None:
        """Record progress; write a line when one is due. Cheap: a clock read otherwise."""
        if self.mode is None:
            return
        if done is not None:
            self.done = done
        if pair is not None:
            self.pair = pair
        if rows is not None:
            self.rows = rows
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        self._write(self._line(now, final=False), final=False)

    def close(self, done: int | None = None) -> None:
        """The stage ended: the summary line (on a terminal, the redrawn line's last state).
        Off a terminal, a stage shorter than the log interval writes nothing: a short run's
        stderr stays its result line, or its one error line when a later check refuses it."""
        if self.mode is None:
            return
        now = time.monotonic()
        if self.mode == "log" and now - self.start < self.every:
            self.mode = None
            return
        if done is not None:
            self.done = done
        self._write(self._line(now, final=True), final=True)
        self.mode = None

    def _position(self) -> int:
        return self.meter.position() if self.meter is not None else self.done

    def _line(self, now: float, final: bool) -> str:
        elapsed = now - self.start
        done = self._position()
        total = self.total if not final else None  # the summary says what was done
        if self.unit == "bytes":
            size = format_bytes(done) + (f" / {format_bytes(total)}" if total else "")
            rate = format_rate(done / elapsed) if elapsed > 0 else "—"
            if self.rows is not None:
                size += f", {self.rows:,} rows"
        else:
            size = f"{done:,}" + (f" / {total:,}" if total else "") + f" {self.unit}"
            rate = f"{done / elapsed:,.0f} {self.unit}/s" if elapsed > 0 else "—"
        if final:
            line = f"{self.stage}: done, {size} in {format_duration(elapsed)} ({rate})"
        else:
            line = f"{self.stage}: {size}"
            if self.total:
                line += f" ({min(done / self.total, 1):.1%})"
            line += f", {rate}"
            if self.total and done > 0 and elapsed > 0:
                line += f", ETA {format_duration((self.total - done) * elapsed / done)}"
        if self.pair is not None:
            line += f", {'last ' if final else ''}pair count {self.pair:,}"
        return line

    def _write(self, line: str, final: bool) -> None:
        try:
            if self.mode == "tty":
                # redraw: back to the start of the line, clear it, write the new state
                self.stream.write("\r\x1b[K" + line + ("\n" if final else ""))
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not stop training
            self.mode = None


def log_every() -> float:
    """Seconds between log lines: TOKCOLUMNAR_PROGRESS_EVERY when set to a number, else
    `LOG_EVERY_S` (a value that is not a positive number is ignored: progress never fails a
    run)."""
    try:
        every = float(os.environ.get("TOKCOLUMNAR_PROGRESS_EVERY", LOG_EVERY_S))
    except ValueError:
        return LOG_EVERY_S
    return every if every > 0 else LOG_EVERY_S


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class StageTimer:
    """Wall time per stage of a run (`run.json`'s `timings_s`): `with timer.stage("count"):`
    adds the time of the block to that stage. `high_water` keeps the process's peak resident
    memory as each stage ended (`memory.peak_resident_bytes`; run.json's
    `memory.peak_rss_after`): a stage whose value is above the one before set the peak."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.high_water: dict[str, int] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            peak = peak_resident_bytes()
            if peak is not None:
                self.high_water[name] = peak
