"""Cross-check the two engines: train with Polars and with DuckDB, compare the tables.

`crosscheck(inputs, cfg, from_counts)` is what `tokcolumnar crosscheck INPUT... [options]` runs:
it prints the first difference and returns 1, or a one-line summary and returns 0.
`compare_results(a, b)` / `compare_dirs(a, b)` compare two `TrainResult`s or two saved
training directories the same way (a test can alter a table and see the difference). BPE and
WordPiece (`--model wordpiece`, both scorings: `score` compared as exact floats) alike; for
`--model unigram`, which DuckDB does not train, the words' segmentation by the trained
vocabulary (`unigram.first_segmentation_difference`), then the seeds computed again in SQL from
the trainer's sentences (`unigram_seeds.check_seeds`) and every EM iteration and pruning round
replayed in SQL on the trainer's own pieces (`unigram_rounds.check_rounds`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ..config import TrainConfig
from ..corpus.sources import expand_inputs, run_scope
from ..errors import TokcolumnarError
from ..progress import StageTimer
from ..training.pipeline import train
from ..training.unigram_log import UnigramTrace
from ..training.unigram_pipeline import unigram_tables
from .engine import SMALL_WORDS, scripts
from .runner import THREADS_VARIABLE
from .unigram import first_segmentation_difference
from .unigram_rounds import StageCheck, check_rounds
from .unigram_seeds import check_seeds

# What must agree (docs/architecture.md, "Both engines"): every column of the three tables.
COLUMNS = {
    "words": ["word", "count", "first_seen", "tokens", "ids"],
    "merges": ["rank", "left", "right", "token", "left_id", "right_id", "id", "count", "score",
               "words"],
    "vocab": ["id", "token", "kind", "rank"],
}
# Compared when either table has them: WordPiece likelihood merges carry the two token counts
# each score was computed from (the score itself, a float, must be exactly equal too).
OPTIONAL = {"merges": ["left_count", "right_count"]}


def _tables(x: Any) -> dict[str, pl.DataFrame]:
    if isinstance(x, (str, Path)):
        d = Path(x)
        if not d.is_dir():
            raise TokcolumnarError(f"not a directory: {x}")
        out = {}
        for name in COLUMNS:
            f = d / f"{name}.parquet"
            if not f.exists():
                raise TokcolumnarError(f"{d} has no {name}.parquet")
            out[name] = pl.read_parquet(f)
        return out
    return {name: getattr(x, name) for name in COLUMNS}


def _fmt(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."


def first_difference(a: pl.DataFrame, b: pl.DataFrame, name: str,
                     labels: tuple[str, str] = ("a", "b")) -> str | None:
    """A one-line description of the first difference between two tables, or None."""
    cols = [c for c in COLUMNS.get(name, a.columns)]
    cols += [c for c in OPTIONAL.get(name, []) if c in a.columns or c in b.columns]
    for c in cols:
        if (c in a.columns) != (c in b.columns):
            where = labels[0] if c not in a.columns else labels[1]
            return f"{name}: column {c!r} missing in {where}"
    cols = [c for c in cols if c in a.columns]
    for c in cols:
        if a.schema[c] != b.schema[c]:
            return (f"{name}.{c}: type {a.schema[c]} ({labels[0]}) vs {b.schema[c]} "
                    f"({labels[1]})")
    n = min(a.height, b.height)
    first: tuple[int, str] | None = None
    for c in cols:
        sa, sb = a.get_column(c).head(n), b.get_column(c).head(n)
        diff = sa.ne_missing(sb)
        if diff.any():
            i = int(diff.arg_max())  # first True
            if first is None or i < first[0]:
                first = (i, c)
    if first is not None:
        i, c = first
        key = ""
        if name == "merges":
            key = f" (rank {a.get_column('rank')[i]})"
        elif name == "words":
            key = f" (word {a.get_column('word')[i]!r})"
        elif name == "vocab":
            key = f" (id {a.get_column('id')[i]})"
        return (f"{name} row {i}{key}, column {c!r}: {labels[0]} {_fmt(a.get_column(c)[i])} vs "
                f"{labels[1]} {_fmt(b.get_column(c)[i])}")
    if a.height != b.height:
        longer, label = (a, labels[0]) if a.height > b.height else (b, labels[1])
        row = longer.row(n, named=True)
        return (f"{name}: {a.height:,} rows ({labels[0]}) vs {b.height:,} ({labels[1]}); first "
                f"extra row in {label}: {_fmt({k: row[k] for k in cols})}")
    return None


def compare_results(a: Any, b: Any, labels: tuple[str, str] = ("a", "b")) -> str | None:
    """Compare two TrainResults or saved training directories (words, merges, vocab): the
    first difference as a line of text, or None when identical."""
    ta, tb = _tables(a), _tables(b)
    for name in COLUMNS:
        d = first_difference(ta[name], tb[name], name, labels)
        if d:
            return d
    return None


def compare_dirs(a: str | Path, b: str | Path, out: Any = None) -> int:
    """Compare two saved training directories; print the first difference (1) or a summary
    (0)."""
    out = out or sys.stdout
    d = compare_results(a, b, (str(a), str(b)))
    if d:
        print(f"DIFFERENT: {d}", file=out)
        return 1
    print(f"identical: {a} and {b}", file=out)
    return 0


def _readable_twice(inputs: Any, cfg: TrainConfig) -> Any:
    """The inputs, such that each engine can read them: an iterator is kept (as an iterable
    that can be read twice); standard input and named pipes (read once) are refused."""
    if inputs is None:
        return None
    paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs
    if isinstance(paths, (list, tuple)) and all(isinstance(x, (str, os.PathLike)) for x in paths):
        for src in expand_inputs(paths, cfg.format):
            if src.kind != "file":
                raise TokcolumnarError(f"crosscheck reads its inputs once per engine, and "
                                       f"{src.label} can be read only once: save it to a file")
        return inputs
    if isinstance(inputs, Iterator):
        return _Replay(list(inputs))
    return inputs


class _Replay:
    """An iterable of kept items: each engine iterates over the same ones."""

    def __init__(self, items: list[Any]):
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def crosscheck(inputs: Any, cfg: TrainConfig, from_counts: Any = None, out: Any = None) -> int:
    """Train with both engines and compare words, merges and vocab. Prints the first difference
    and returns 1, or a one-line summary and returns 0."""
    out = out or sys.stdout
    inputs = inputs or None
    if inputs is None and from_counts is None:
        raise TokcolumnarError("give INPUT files or --from-counts words.parquet")
    if inputs is not None and from_counts is not None:
        raise TokcolumnarError("give either INPUT files or --from-counts, not both")
    if cfg.model == "unigram":
        return _crosscheck_unigram(inputs, dataclasses.replace(cfg, engine="polars"), out)
    inputs = _readable_twice(inputs, cfg)
    pcfg = dataclasses.replace(cfg, engine="polars")
    dcfg = dataclasses.replace(cfg, engine="duckdb")
    timer = StageTimer()
    with timer.stage("polars"):
        a = train(inputs, from_counts=from_counts, config=pcfg)
    with timer.stage("duckdb"):
        b = train(inputs, from_counts=from_counts, config=dcfg)
    tp, td = timer.seconds["polars"], timer.seconds["duckdb"]
    d = compare_results(a, b, ("polars", "duckdb"))
    times = f"polars {tp:.2f}s, duckdb {td:.2f}s ({td / tp if tp else float('inf'):.1f}x)"
    if d:
        print(f"MISMATCH: {d} [{times}]", file=out)
        return 1
    print(f"identical: {a.words.height:,} words, {a.merges.height:,} merges, "
          f"{a.vocab.height:,} tokens; {times}", file=out)
    return 0


def unigram_stages(sql: Any, trace: UnigramTrace) -> Iterator[StageCheck]:
    """The trainer's stages replayed in SQL and compared, in the order it ran them: the seeds
    (sql/16_unigram_seeds.sql, from the trainer's sentences), then every EM iteration and
    pruning round (`unigram_rounds.check_rounds`)."""
    yield check_seeds(sql, trace)
    yield from check_rounds(sql, trace)


def _crosscheck_unigram(inputs: Any, cfg: TrainConfig, out: Any) -> int:
    """--model unigram: train with Polars, recording its seeding and every EM iteration and
    pruning round; segment every distinct word again by the SQL Viterbi of
    sql/13_unigram_viterbi.sql over the trained vocabulary and compare with the `words` table;
    then compute the seeds again from the trainer's sentences (sql/16_unigram_seeds.sql) and
    replay each EM iteration (sql/14_unigram_em.sql) and pruning round
    (sql/15_unigram_prune.sql) on the trainer's own pieces, and compare (`unigram_stages`).
    One line per stage; the first that differs ends the check (1)."""
    timer = StageTimer()
    trace = UnigramTrace()
    with timer.stage("polars"), run_scope():
        tables, _ = unigram_tables(inputs, None, cfg, StageTimer(), trace)
    with timer.stage("duckdb"):
        d = first_segmentation_difference(tables.words, tables.vocab)
    times = f"polars training {timer.seconds['polars']:.2f}s, duckdb Viterbi " \
            f"{timer.seconds['duckdb']:.2f}s"
    if d:
        print(f"MISMATCH: {d} [{times}]", file=out)
        return 1
    print(f"identical: {tables.words.height:,} words segmented alike by the SQL Viterbi over "
          f"{tables.vocab.height:,} pieces; {times}", file=out)
    with timer.stage("rounds"), scripts() as sql:
        few = trace.words is not None and len(trace.words) < SMALL_WORDS
        if few and not os.environ.get(THREADS_VARIABLE):
            sql.con.execute("SET threads = 1")  # tiny statements: threads only add overhead
        for check in unigram_stages(sql, trace):
            if not check.ok:
                print(f"MISMATCH: {check.line}", file=out)
                return 1
            print(check.line, file=out, flush=True)
    print(f"identical: the seeds, {len(trace.em):,} EM iterations and {len(trace.prunes):,} "
          f"pruning rounds replayed in SQL; duckdb {timer.seconds['rounds']:.2f}s", file=out)
    return 0
