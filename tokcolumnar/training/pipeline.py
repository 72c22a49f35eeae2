"""The training pipeline, one path for every model and both engines (docs/architecture.md,
"Data flow"):

1. settings: `TrainConfig` (options checked, preset applied);
2. count: the engine's `count(inputs)`, or a words table given with `from_counts`;
3. train: the engine's `train(words)` -> initial symbols, merge loop, result tables;
4. export (with `out_dir`): every output file, written atomically (`export`).

`train()` and `count_words()` are the Python entry points; their keyword arguments are the CLI
options."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from .. import ondisk
from ..config import TrainConfig, run_notes
from ..corpus.counts_file import load_counts, normalize_counts
from ..corpus.sources import Source, expand_inputs, run_scope
from ..corpus.spill import count_bounded, unit_bytes_for
from ..corpus.units import plan_units
from ..errors import (
    TokcolumnarEnvironmentError,
    TokcolumnarError,
    TokcolumnarTypeError,
    TokcolumnarValueError,
    environment_message,
    warn,
)
from ..export import TrainResult, write_outputs
from ..memory import (
    COUNT_TABLE_SHARE,
    LIBRARY_WORK,
    LoopPlan,
    LoopWatch,
    MemoryLimitError,
    RunMemory,
    format_size,
    keep_most_frequent,
    resident_bytes,
)
from ..outputs import output_dir, writing
from ..progress import StageTimer
from ..sizes import default_limit, parse_size
from ..workdir import WorkDir, default_work_dir, run_fingerprint
from .checkpoint import MergeCheckpoint
from .extend import extend_options, train_extended
from .tables import CountedWords, TrainTables, WordsFile
from .unigram_pipeline import unigram_tables


class Engine(Protocol):
    """What an engine does: count the words of the inputs, and train on a words table."""

    name: str
    #: Whether the pipeline counts the engine's file inputs itself when the run has a work
    #: directory: unit by unit within --memory-limit, spilling there (`corpus.spill`).
    counts_in_units: bool
    #: Whether `train` takes the words as `tables.CountedWords` (and drops them while its
    #: loop runs) rather than as a data frame.
    takes_counted_words: bool
    #: Whether `train` runs an extension (`cfg.extend`) itself; otherwise the pipeline runs
    #: the Polars engine's (`training.extend`).
    trains_extensions: bool

    def use_limits(self, memory_limit: int, work: WorkDir | None) -> None:
        """Take the run's memory limit (bytes) and work directory for the engine's own work."""

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame: ...

    def check_memory(self, words: pl.DataFrame, memory_limit: int, disk: bool,
                     vocab_size: int | None = None) -> LoopPlan | None:
        """Refuse, before the merge loop starts, words whose loop would not fit in
        `memory_limit` bytes; the plan says whether it fits only with its state on disk
        (`ondisk`; `disk`: the run has a work directory to keep it in). None: the engine
        does not check (its loop bounds itself, or it never did)."""

    def train(self, words: pl.DataFrame, cfg: TrainConfig, timer: StageTimer,
              checkpoint: MergeCheckpoint | None = None) -> TrainTables: ...


#: The module of each engine, imported when a run asks for it (DuckDB is not loaded otherwise).
ENGINE_MODULES = {"polars": "tokcolumnar.training.polars_engine",
                  "duckdb": "tokcolumnar.duckdb.engine",
                  "ray": "tokcolumnar.distributed.ray",
                  "spark": "tokcolumnar.distributed.spark"}
ENGINE_CLASSES = {"polars": "PolarsEngine", "duckdb": "DuckDBEngine", "ray": "RayEngine",
                  "spark": "SparkEngine"}


def engine_for(name: str) -> Engine:
    return getattr(import_module(ENGINE_MODULES[name]), ENGINE_CLASSES[name])()


def engine_of_run(inputs: Any, cfg: TrainConfig) -> Engine:
    """The settings' engine; Ray's for a `ray.data.Dataset`, Spark's for a Spark DataFrame
    (each counted where it lives)."""
    module = type(inputs).__module__
    if module.startswith("ray.data"):
        return engine_for("ray")
    if module.startswith("pyspark.sql") and type(inputs).__name__ == "DataFrame":
        return engine_for("spark")
    return engine_for(cfg.engine)


def resolve_config(options: dict[str, Any]) -> TrainConfig:
    """`config=` as given, or the settings the keyword options make."""
    cfg = options.pop("config", None)
    if cfg is None:
        return TrainConfig(**options)
    if options:
        raise TokcolumnarValueError(f"give either config= or options, not both (got config= and "
                                    f"{', '.join(sorted(options))})")
    return cfg


#: The default of --checkpoint-every (seconds).
CHECKPOINT_EVERY = 60.0


def check_checkpoint_every(checkpoint_every: Any) -> None:
    """--checkpoint-every is a number of seconds >= 0."""
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, (int, float)) \
            or not checkpoint_every >= 0:
        raise TokcolumnarValueError(f"--checkpoint-every must be a number of seconds >= 0, "
                                    f"got {checkpoint_every!r}")


@run_scope()  # the inputs listed and fingerprinted once per run (`sources.run_scope`)
def count_words(inputs: Any, *, memory_limit: str | int | None = None,
                work_dir: str | Path | None = None, resume: bool = False,
                checkpoint_every: float = CHECKPOINT_EVERY, **options: Any) -> pl.DataFrame:
    """The counting stage alone: the `words` table (word, count, first_seen); `options` are
    the training options (`engine="duckdb"` counts in DuckDB, `engine="ray"` — or a
    `ray.data.Dataset` as `inputs` — on Ray; a Spark DataFrame's `column` on Spark). With
    `memory_limit` or `work_dir`, the count is bounded as `train`'s (spilled to `work_dir`,
    default a temporary directory); with a `work_dir`, its manifest is saved every
    `checkpoint_every` seconds and `resume` continues a killed count from it (as `train`'s
    counting stage)."""
    cfg = resolve_config(options)
    engine = engine_of_run(inputs, cfg)
    check_checkpoint_every(checkpoint_every)
    if resume and work_dir is None:
        raise TokcolumnarValueError("--resume needs the work directory: give work_dir")
    if memory_limit is None and work_dir is None:
        return engine.count(inputs, cfg)
    every = float(checkpoint_every) if work_dir is not None else float("inf")
    limits = RunLimits(parse_size(memory_limit) if memory_limit is not None
                       else default_limit(), checkpoint_every=every)
    with work_directory(work_dir, inputs, None, input_list(inputs), cfg, resume) as limits.work:
        words = count_stage(engine, inputs, None, cfg, limits, StageTimer())
        limits.wait_saved()
    limits.work.remove()
    return words


@dataclass
class RunLimits:
    """How a run uses the machine (not what it produces): `--memory-limit` in bytes, the work
    directory (None: no spilling place, no checkpoints), `--checkpoint-every` seconds, and the
    bytes counting spilled (filled by the run)."""

    memory_limit: int
    work: WorkDir | None = None
    #: the process's resident memory when the run started (`memory.resident_bytes`): the
    #: limit counts what the run adds to it
    floor: int | None = None
    checkpoint_every: float = 60.0
    spilled_bytes: int = 0
    #: The counted words being saved into the work directory (`count_stage`), if any.
    saving: BackgroundWrite | None = None
    #: What the run says once it succeeded (`tokcolumnar: note:` lines; a refused run says
    #: one line, its error).
    notes: list[str] = field(default_factory=list)

    def wait_saved(self) -> None:
        """Wait for the counted words' save (raising its error, if it failed)."""
        saving, self.saving = self.saving, None
        if saving is not None:
            saving.wait()


class BackgroundWrite:
    """One write run in a thread while the run goes on (`wait` joins it and raises its
    error): the counted words' save overlaps the initial symbols (Polars' Parquet writer
    and the file's fsync release the GIL)."""

    def __init__(self, write: Callable[[], None]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                write()
            except BaseException as e:  # noqa: BLE001 - raised by `wait`, in the run's thread
                self.error = e

        self.thread = threading.Thread(target=run, name="tokcolumnar-save", daemon=True)
        self.thread.start()

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


#: The counted words kept in the work directory, so that a resumed run does not count again.
COUNTED_WORDS = "words.parquet"


@run_scope()  # the inputs listed and fingerprinted once per run (`sources.run_scope`)
def train(inputs: Any = None, *, out_dir: str | Path | None = None,
          from_counts: str | pl.DataFrame | None = None, force: bool = False,
          memory_limit: str | int | None = None, work_dir: str | Path | None = None,
          resume: bool = False, checkpoint_every: float = CHECKPOINT_EVERY,
          **options: Any) -> TrainResult:
    """Train a tokenizer. `inputs`: paths/globs/dirs/URIs, a Polars or Arrow table, a Ray
    Dataset or a Spark DataFrame (counted on Ray / Spark), an HF `datasets.Dataset` /
    `IterableDataset` (its `column`, streamed), or an iterator of strings; `options`:
    the CLI options as keyword arguments (see `TrainConfig`; `engine="duckdb"` runs every stage
    in DuckDB and returns the same tables).

    With `out_dir`, the output is checked before any work starts (it may replace only an
    earlier tokcolumnar output or an empty directory, unless `force`; never an input) and
    written atomically at the end (see `outputs`).

    `memory_limit` (`"1.5GB"`, bytes; default `sizes.DEFAULT_FRACTION` of the RAM) bounds the
    count (spilled to `work_dir`) and is checked against the merge loop's need; `work_dir`
    (default `OUT.work` beside `out_dir`, else a temporary directory) holds the spilled runs
    and the checkpoints, written every `checkpoint_every` seconds (none in a temporary
    directory: nothing could resume from it); `resume` continues a killed run with the same
    arguments from them (see `workdir`).

    `extend` (a base tokenizer: one of our output directories) keeps the base's tokens, ids,
    merges and settings and continues its merges on the inputs (`training.extend`)."""
    extend = options.pop("extend", None)
    if extend is not None:  # the base's settings with the options given
        options = extend_options(os.fspath(extend), options)
    cfg = resolve_config(options)
    limit = parse_size(memory_limit) if memory_limit is not None else default_limit()
    check_checkpoint_every(checkpoint_every)
    if from_counts is not None:
        if inputs is not None:
            raise TokcolumnarValueError("give either inputs or from_counts, not both")
        if not isinstance(from_counts, (pl.DataFrame, str, os.PathLike)):
            raise TokcolumnarTypeError("from_counts must be the path of a words Parquet file or "
                                       f"a Polars DataFrame, got {type(from_counts).__name__}")
    elif inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    read = [*input_list(inputs), *([from_counts] if isinstance(from_counts, (str, Path)) else []),
            *([cfg.extend] if cfg.extend is not None else [])]
    if work_dir is None and out_dir is not None:
        work_dir = default_work_dir(out_dir)
    if resume and work_dir is None:
        raise TokcolumnarValueError("--resume needs the work directory: give out_dir or "
                                    "work_dir")
    # no work directory given: a temporary one, which no later run can resume from, so no
    # checkpoints (the loop's checkpoints of 100 MB of byte-level Chinese: ~2.5 s written away)
    every = float(checkpoint_every) if work_dir is not None else float("inf")
    limits = RunLimits(limit, checkpoint_every=every, floor=resident_bytes())
    if out_dir is None:
        with work_directory(work_dir, inputs, from_counts, read, cfg, resume) as limits.work:
            result = _train(inputs, from_counts, cfg, limits)
            result.words  # noqa: B018 - a words table in a file of the work directory: read
        limits.work.remove()
        _say_notes(cfg, limits.notes)
        return result
    with output_dir(out_dir, inputs=read, force=force) as tmp:
        with work_directory(work_dir, inputs, from_counts, read, cfg, resume) as limits.work:
            result = _train(inputs, from_counts, cfg, limits)
            timer = StageTimer()
            with timer.stage("export"), writing(out_dir):
                write_outputs(result, tmp)
            result.timings.update(timer.seconds)
            if result.memory is not None:
                result.memory.high_water.update(timer.high_water)
            keep = limits.work
    if isinstance(result.words_table, WordsFile):  # moved to the output: read from there
        result.words_table.path = Path(out_dir) / "words.parquet"
    keep.remove()  # after the output is in place: a kill before leaves it to --resume
    _say_notes(cfg, limits.notes)
    return result


def _say_notes(cfg: TrainConfig, notes: list[str]) -> None:
    """The run's notes and its settings' (`config.run_notes`), once the run succeeded: a
    refused run says one line, its error."""
    for note in [*notes, *run_notes(cfg)]:
        warn(note)


def resumable_paths(inputs: Any, from_counts: Any, fmt: str | None
                    ) -> list[Path | Source] | None:
    """The files a run reads, for the work directory's fingerprint (the listing's sources:
    `input_fingerprint` records a local one by its absolute path); None when an input cannot
    be read again (standard input, a pipe, a data frame, an iterator)."""
    if isinstance(from_counts, pl.DataFrame):
        return None
    if from_counts is not None:
        return [Path(os.path.abspath(from_counts))]
    if not isinstance(inputs, (str, os.PathLike, list, tuple)) or not all(
            isinstance(x, (str, os.PathLike)) for x in input_list(inputs)):
        return None
    sources = expand_inputs(input_list(inputs), fmt)
    if any(src.kind != "file" for src in sources):
        return None
    return sources


@contextlib.contextmanager
def work_directory(work_dir: str | Path | None, inputs: Any, from_counts: Any, read: list[str],
                   cfg: TrainConfig, resume: bool) -> Iterator[WorkDir]:
    """The run's work directory (see `workdir`): a given or default one is kept when the run
    fails (a later `--resume` continues from it; a later run without it clears it), and
    removed by the caller after success; without one, a temporary directory."""
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="tokcolumnar-work-") as tmp:
            yield WorkDir.open(Path(tmp) / "work", inputs=read, fingerprint={}, resume=False)
        return
    paths = resumable_paths(inputs, from_counts, cfg.format)
    if resume and paths is None:
        raise TokcolumnarError("--resume needs input files: standard input, a pipe, a data "
                               "frame or an iterator cannot be read again")
    # the inputs' head hashes are taken before the first saved file (`WorkDir`)
    work = WorkDir.open(work_dir, inputs=read, fingerprint=run_fingerprint(
        cfg, paths or [], heads=False), resume=resume,
        complete=functools.partial(run_fingerprint, cfg, paths or []))
    try:
        yield work
    except BaseException as e:
        # refused input or settings: nothing to resume; otherwise (no space, the memory
        # check, Ctrl-C) the directory is kept when it holds something --resume can take up,
        # and the error line says so (a SIGKILL keeps it whatever it holds: the next run
        # clears it or resumes)
        refused = isinstance(e, TokcolumnarError) and not isinstance(
            e, (MemoryLimitError, TokcolumnarEnvironmentError))
        if refused or paths is None or not work.resumable():
            work.remove()
            raise
        message = (str(e) if isinstance(e, TokcolumnarError)
                   else environment_message(e) if isinstance(e, Exception) else None)
        if message is None:  # an interrupt, or a bug
            raise
        kind = MemoryLimitError if isinstance(e, MemoryLimitError) else \
            TokcolumnarEnvironmentError
        raise kind(
            f"{message}; the work directory {work.path} holds the run's saved state: run the "
            "same command with --resume to continue from it, or remove it") from None


def input_list(inputs: Any) -> list[str]:
    """The input paths as strings ([] for data frames and iterators)."""
    if isinstance(inputs, (str, Path)):
        return [str(inputs)]
    if isinstance(inputs, (list, tuple)):
        return [str(x) for x in inputs]
    return []


def _train(inputs: Any, from_counts: Any, cfg: TrainConfig,
           limits: RunLimits | None = None) -> TrainResult:
    """Stages 2-3 (see the module docstring), within `limits` (default: the default limit,
    no work directory)."""
    limits = limits or RunLimits(default_limit())
    if cfg.model == "unigram":  # sentences, not counted words (training.unigram_pipeline)
        timer = StageTimer()
        tables, trained = unigram_tables(inputs, from_counts, cfg, timer)
        normalizer, pretokenizer = cfg.text_components()
        result = TrainResult(cfg, tables.words, tables.merges, tables.vocab, normalizer,
                             pretokenizer, timer.seconds, input_list(inputs))
        result.rounds, result.pruned = trained.rounds, trained.pruned
        result.memory = RunMemory(limits.memory_limit, limits.floor, None, timer.high_water)
        return result
    engine = engine_of_run(inputs, cfg)
    engine.use_limits(limits.memory_limit, limits.work)
    timer = StageTimer()
    with timer.stage("count"):
        words = count_stage(engine, inputs, from_counts, cfg, limits, timer)
    try:
        words = keep_most_frequent(words, cfg.max_words)
        # over the limit in memory, the loop may keep its state in the work directory
        plan = engine.check_memory(words, limits.memory_limit, disk=limits.work is not None,
                                   vocab_size=cfg.vocab_size)
        disk = plan is not None and plan.disk
        watch = LoopWatch(limits.memory_limit, limits.floor)
        watch.anonymous = disk
        # every engine's loop checkpoints into the work directory, when there is one; its
        # first checkpoint (or test kill point) waits for the counted words' save
        checkpoint = (MergeCheckpoint(limits.work, limits.checkpoint_every,
                                      ready=limits.wait_saved, watch=watch)
                      if limits.work is not None else None)
        with (loop_state_on_disk(limits, plan.in_memory) if disk
              else contextlib.nullcontext()):
            # --extend: the loop continues a base's (`extend`; the DuckDB engine's in SQL)
            if cfg.extend is not None and not engine.trains_extensions:
                tables = train_extended(words, cfg, timer, checkpoint)
            elif engine.takes_counted_words:
                # the engine drops the table while its loop runs, and reads the work
                # directory's copy back after it: no reference to it is kept here
                counted = CountedWords(words, saved_words(limits), limits.wait_saved,
                                       cfg.max_words)
                del words
                tables = engine.train(counted, cfg, timer, checkpoint=checkpoint)
            else:
                tables = engine.train(words, cfg, timer, checkpoint=checkpoint)
        limits.wait_saved()
    finally:
        # an error of the loop: the save still ends before the work directory is kept or
        # removed (its own error, if any, is then left to the loop's)
        if limits.saving is not None:
            limits.saving.thread.join()
    normalizer, pretokenizer = cfg.text_components()
    result = TrainResult(cfg, tables.words, tables.merges, tables.vocab, normalizer,
                         pretokenizer, timer.seconds, input_list(inputs))
    result.spilled_bytes = limits.spilled_bytes
    result.memory = RunMemory(limits.memory_limit, limits.floor, plan, timer.high_water)
    return result


#: A loop on disk holds the resident memory at this share of --memory-limit (beyond the floor
#: and the libraries' first work): the rest absorbs the pages a pass faults in before the
#: watcher drops them. A read of a mapped page maps the 16 pages around it when they are in
#: the page cache (the kernel's fault-around), so one gather of a pass at random positions
#: maps up to 64 KB per position: 5 GB of text under `--memory-limit 4GB` peaked at 4.2 GB
#: at 0.9 and at 4.1 GB at 0.8.
ONDISK_SHARE = 0.7


def saved_words(limits: RunLimits) -> Path | None:
    """The work directory's copy of the counted words (`count_stage`), being written or read
    back by a resumed run; None when the words were given as a table, not saved."""
    work = limits.work
    if work is None:
        return None
    saved = work.file(COUNTED_WORDS)
    return saved if limits.saving is not None or (work.resumed and saved.exists()) else None


@contextlib.contextmanager
def loop_state_on_disk(limits: RunLimits, in_memory: int) -> Iterator[None]:
    """The merge loop's large arrays in files of the work directory (`ondisk`), the process's
    resident memory held at `ONDISK_SHARE` of the limit (beyond the run's floor and the libraries'
    first work, as `memory.LoopWatch` counts it); a note says so once the run succeeded
    (`in_memory`: the loop's estimate in memory)."""
    assert limits.work is not None
    budget = (limits.floor or 0) + LIBRARY_WORK + int(limits.memory_limit * ONDISK_SHARE)
    with ondisk.on_disk(limits.work.path / "loop", budget):
        yield
    limits.notes.append(
        f"the merge loop kept its state on disk, in the work directory (in memory it needs "
        f"about {format_size(in_memory)}, over --memory-limit "
        f"{format_size(limits.memory_limit)})")


def count_stage(engine: Engine, inputs: Any, from_counts: Any, cfg: TrainConfig,
                limits: RunLimits, timer: StageTimer) -> pl.DataFrame:
    """The words table: the counted words a resumed run saved, the given counts, a bounded
    count of file inputs (Polars engine), or the engine's count. Saved in the work
    directory once counted."""
    work = limits.work
    if work is not None and work.resumed and work.file(COUNTED_WORDS).exists():
        return pl.read_parquet(work.file(COUNTED_WORDS))
    if isinstance(from_counts, pl.DataFrame):
        return normalize_counts(from_counts, "from_counts")
    if from_counts is not None:
        return load_counts(str(from_counts), cfg, limits.notes)
    if engine.counts_in_units and work is not None and isinstance(
            inputs, (str, os.PathLike, list, tuple)) and all(
            isinstance(x, (str, os.PathLike)) for x in input_list(inputs)):
        budget = int(limits.memory_limit * COUNT_TABLE_SHARE)
        units = plan_units(input_list(inputs), cfg.format, unit_bytes_for(budget))
        words, limits.spilled_bytes = count_bounded(units, cfg, work, budget,
                                                    limits.checkpoint_every, timer)
    else:
        words = engine.count(inputs, cfg, timer)
    if work is not None:  # in a thread: the next stages need not wait for it
        limits.saving = BackgroundWrite(lambda: work.write_parquet(COUNTED_WORDS, words))
    return words
