"""The training pipeline, one path for every model and both engines (docs/architecture.md,
"Data flow"):

1. settings: `TrainConfig` (options checked, preset applied);
2. count: the engine's `count(inputs)`, or a words table given with `from_counts`;
3. train: the engine's `train(words)` -> initial symbols, merge loop, result tables;
4. export (with `out_dir`): every output file, written atomically (`export`).

`train()` and `count_words()` are the Python entry points; their keyword arguments are the CLI
options."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from ..config import TrainConfig
from ..corpus.counts_file import load_counts, normalize_counts
from ..errors import TokcolumnarError, TokcolumnarTypeError, TokcolumnarValueError
from ..export import build_tokenizer, export, write_outputs
from ..outputs import output_dir
from ..progress import StageTimer
from ..text.normalizers import Normalizer
from ..text.pretokenizers import PreTokenizer
from ..tokenizer import Tokenizer
from .tables import TrainTables


class Engine(Protocol):
    """What an engine does: count the words of the inputs, and train on a words table."""

    name: str

    def count(self, inputs: Any, cfg: TrainConfig, timer: StageTimer | None = None
              ) -> pl.DataFrame: ...

    def train(self, words: pl.DataFrame, cfg: TrainConfig, timer: StageTimer
              ) -> TrainTables: ...


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
    """The settings' engine; Ray's for a `ray.data.Dataset` (counted where it lives)."""
    return engine_for("ray" if type(inputs).__module__.startswith("ray.data") else cfg.engine)


@dataclass
class TrainResult:
    """Everything a run produced: the three tables, the settings and the stage timings."""

    config: TrainConfig
    words: pl.DataFrame
    merges: pl.DataFrame
    vocab: pl.DataFrame
    normalizer: Normalizer | None
    pretokenizer: PreTokenizer
    timings: dict[str, float] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)

    def tokenizer(self) -> Tokenizer:
        """The trained tokenizer (the one `tokenizer.json` holds)."""
        return build_tokenizer(self.config, self.vocab, self.merges)

    def save(self, out_dir: str | Path, force: bool = False) -> Path:
        """Write the output files into `out_dir` (see `train`'s `out_dir` for the rules)."""
        return export(self, out_dir, force=force)


def resolve_config(options: dict[str, Any]) -> TrainConfig:
    """`config=` as given, or the settings the keyword options make."""
    cfg = options.pop("config", None)
    if cfg is None:
        return TrainConfig(**options)
    if options:
        raise TokcolumnarValueError(f"give either config= or options, not both (got config= and "
                                    f"{', '.join(sorted(options))})")
    return cfg


def count_words(inputs: Any, **options: Any) -> pl.DataFrame:
    """The counting stage alone: the `words` table (word, count, first_seen); `options` are
    the training options (`engine="duckdb"` counts in DuckDB, `engine="ray"` — or a
    `ray.data.Dataset` as `inputs` — on Ray)."""
    cfg = resolve_config(options)
    return engine_of_run(inputs, cfg).count(inputs, cfg)


def train(inputs: Any = None, *, out_dir: str | Path | None = None,
          from_counts: str | pl.DataFrame | None = None, force: bool = False,
          **options: Any) -> TrainResult:
    """Train a tokenizer. `inputs`: paths/globs/dirs, a Polars or Arrow table, or an iterator of
    strings; `options`: the CLI options as keyword arguments (see `TrainConfig`;
    `engine="duckdb"` runs every stage in DuckDB and returns the same tables).

    With `out_dir`, the output is checked before any work starts (it may replace only an
    earlier tokcolumnar output or an empty directory, unless `force`; never an input) and
    written atomically at the end (see `outputs`)."""
    cfg = resolve_config(options)
    if from_counts is not None:
        if inputs is not None:
            raise TokcolumnarValueError("give either inputs or from_counts, not both")
        if not isinstance(from_counts, (pl.DataFrame, str, os.PathLike)):
            raise TokcolumnarTypeError("from_counts must be the path of a words Parquet file or "
                                       f"a Polars DataFrame, got {type(from_counts).__name__}")
    elif inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    if out_dir is None:
        return _train(inputs, from_counts, cfg)
    read = [*input_list(inputs), *([from_counts] if isinstance(from_counts, (str, Path)) else [])]
    with output_dir(out_dir, inputs=read, force=force) as tmp:
        result = _train(inputs, from_counts, cfg)
        timer = StageTimer()
        with timer.stage("export"):
            write_outputs(result, tmp)
        result.timings.update(timer.seconds)
    return result


def input_list(inputs: Any) -> list[str]:
    """The input paths as strings ([] for data frames and iterators)."""
    if isinstance(inputs, (str, Path)):
        return [str(inputs)]
    if isinstance(inputs, (list, tuple)):
        return [str(x) for x in inputs]
    return []


def _train(inputs: Any, from_counts: Any, cfg: TrainConfig) -> TrainResult:
    """Stages 2-3 (see the module docstring)."""
    engine = engine_of_run(inputs, cfg)
    timer = StageTimer()
    with timer.stage("count"):
        if isinstance(from_counts, pl.DataFrame):
            words = normalize_counts(from_counts, "from_counts")
        elif from_counts is not None:
            words = load_counts(str(from_counts))
        else:
            words = engine.count(inputs, cfg, timer)
    tables = engine.train(words, cfg, timer)
    normalizer, pretokenizer = cfg.text_components()
    return TrainResult(cfg, tables.words, tables.merges, tables.vocab, normalizer, pretokenizer,
                       timer.seconds, input_list(inputs))
