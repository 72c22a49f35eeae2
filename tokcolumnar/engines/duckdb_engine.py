"""The DuckDB twin of the training pipeline: the same stages as plain SQL files in `sql/`
(see their header comments), run here with bound parameters, giving the same tables as the
Polars engine.

`count_duckdb(inputs, cfg)` -> the `words` table; `train_duckdb(inputs, cfg, from_counts)` ->
a `TrainResult` identical to `tokcolumnar.training.train`'s (BPE).

All data stays in DuckDB tables: the corpus, the words, each word's symbols, the pair counts and
the merge queue. Python only drives the merge loop: it reads the best queue entries, picks the
batch of merges for the next pass (DESIGN.md §4: members that share no symbol the wrong way
round; SQL then cuts the batch where a new pair or a deferred candidate would overtake a member)
and runs the pass's statements."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from ..config import TrainConfig
from ..errors import TokcolumnarError

SQL_DIR = Path(os.environ.get("TOKCOLUMNAR_SQL_DIR")
               or Path(__file__).resolve().parents[2] / "sql")

NORMALIZERS = ("none", "nfc")
PRETOKENIZERS = ("whitespace", "whitespace-split", "subword-nmt", "none")
LINE_INSENSITIVE = ("whitespace", "whitespace-split", "subword-nmt")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_SECTION = re.compile(r"^-- name: ([A-Za-z0-9_]+)\s*$", re.M)
_UNSET = object()
VARIABLE_TYPES = {"n": "INTEGER", "prefix": "VARCHAR", "theta": "BIGINT"}

# merge loop tuning
CANDIDATES = 256  # queue entries read per pass
HOT_SIZE = 4096  # entries moved from cold to hot per refill
MAX_CONFLICTS = 48  # candidates sharing a symbol with an earlier one, per batch


# -- SQL files ------------------------------------------------------------------------------
class Scripts:
    """The stage files of `sql/`, split into named sections (`-- name: x`) and statements, run
    with named parameters (each statement gets the ones it uses)."""

    def __init__(self, con: Any, directory: Path = SQL_DIR):
        self.con = con
        self.dir = directory
        self._cache: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
        self._prepared: dict[tuple[str, str], list[str]] = {}
        self._names: list[str] = []
        self._bound: dict[str, Any] = {}

    def _file(self, stem: str) -> Path:
        found = sorted(self.dir.glob(f"*{stem}.sql"))
        if not found:
            raise TokcolumnarError(f"SQL stage file *{stem}.sql not found in {self.dir} "
                                   "(set TOKCOLUMNAR_SQL_DIR)")
        return found[0]

    def statements(self, stem: str, section: str = "") -> list[tuple[str, tuple[str, ...]]]:
        key = (stem, section)
        if key not in self._cache:
            text = self._file(stem).read_text(encoding="utf-8")
            if section:
                parts = _SECTION.split(text)
                bodies = dict(zip(parts[1::2], parts[2::2]))
                if section not in bodies:
                    raise TokcolumnarError(f"no section {section!r} in {self._file(stem).name}")
                text = bodies[section]
            stmts = []
            for st in self.con.extract_statements(text):
                q = st.query
                if not q.strip() or not _strip_comments(q).strip():
                    continue
                stmts.append((q, tuple(dict.fromkeys(_PARAM.findall(_strip_strings(q))))))
            self._cache[key] = stmts
        return self._cache[key]

    def run(self, stem: str, section: str = "", **params: Any) -> Any:
        """Run every statement of a section; returns the connection after the last one."""
        con = self.con
        for q, names in self.statements(stem, section):
            if names:
                con.execute(q, {n: params[n] for n in names})
            else:
                con.execute(q)
        return con

    def rows(self, stem: str, section: str = "", **params: Any) -> list[tuple]:
        return self.run(stem, section, **params).fetchall()

    # Statements run thousands of times (the merge pass) are prepared once. Their $name
    # parameters are then bound as DuckDB variables (SET VARIABLE name = $value), read by
    # getvariable('name') in the prepared text: values still never enter the SQL text.
    def bind(self, **values: Any) -> None:
        for name, value in values.items():
            if self._bound.get(name, _UNSET) == value:
                continue
            sql_type = VARIABLE_TYPES[name]
            self.con.execute(f"SET VARIABLE {name} = $v::{sql_type}", {"v": value})
            self._bound[name] = value

    def _as_variables(self, q: str) -> str:
        return _PARAM.sub(lambda m: f"getvariable('{m.group(1)}')", q)

    def run_vars(self, stem: str, section: str = "") -> None:
        """Run a section whose $name parameters are read from the bound variables (DDL such as
        views, which cannot take parameters)."""
        for q, _ in self.statements(stem, section):
            self.con.execute(self._as_variables(q))

    def prepare(self, stem: str, section: str) -> list[str]:
        """PREPARE every statement of a section; returns the EXECUTE statements to run it."""
        key = (stem, section)
        if key not in self._prepared:
            names = []
            for q, _ in self.statements(stem, section):
                name = f"tc_{len(self._names)}"
                self._names.append(name)
                self.con.execute(f"PREPARE {name} AS {self._as_variables(q)}")
                names.append(f"EXECUTE {name}")
            self._prepared[key] = names
        return self._prepared[key]


def _strip_comments(q: str) -> str:
    return re.sub(r"--[^\n]*", "", q)


def _strip_strings(q: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", _strip_comments(q))


def connect() -> Any:
    import duckdb

    threads = os.environ.get("TOKCOLUMNAR_DUCKDB_THREADS")
    con = duckdb.connect(":memory:", config={"threads": int(threads)} if threads else {})
    Scripts(con).run("text_functions")
    return con


def _duck_error(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


# -- counting -------------------------------------------------------------------------------
def _check_supported(cfg: TrainConfig) -> None:
    if (cfg.normalizer or "none").lower() not in NORMALIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the normalizers "
                               f"{', '.join(NORMALIZERS)} (got {cfg.normalizer!r}); use "
                               "--engine polars")
    if cfg.pre_tokenizer.lower() not in PRETOKENIZERS:
        raise TokcolumnarError(f"the duckdb engine supports the pre-tokenizers "
                               f"{', '.join(PRETOKENIZERS)} (got {cfg.pre_tokenizer!r}); use "
                               "--engine polars")


def _load_corpus(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stage 2: fill tc_corpus(src, seq, text) from files (DuckDB readers) or Python data."""
    import duckdb

    con = sql.con
    sql.run("read_corpus", "create")
    if inputs is None:
        raise TokcolumnarError("no inputs given (pass files or --from-counts)")
    frame = _as_frame(inputs, cfg.column)
    if frame is not None:
        con.register("tc_input_frame", frame)
        con.execute("INSERT INTO tc_corpus SELECT 0, tc_row, text FROM tc_input_frame")
        con.unregister("tc_input_frame")
        return
    from ..corpus import expand_inputs

    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for src, s in enumerate(expand_inputs(inputs, cfg.format)):
        path = str(s.path)
        try:
            if s.fmt == "text":
                if s.compression is None:
                    sql.run("read_corpus", "text", path=path, src=src)
                elif s.compression in ("gzip", "zstd"):
                    if cfg.pre_tokenizer.lower() not in LINE_INSENSITIVE:
                        raise TokcolumnarError(
                            f"{path}: the duckdb engine reads compressed text through read_csv, "
                            "which drops line endings; with the "
                            f"{cfg.pre_tokenizer!r} pre-tokenizer they matter (decompress the "
                            "file or use --engine polars)")
                    sql.run("read_corpus", "text_compressed", path=path, src=src)
                else:
                    raise TokcolumnarError(f"{path}: the duckdb engine cannot read "
                                           f"{s.compression} files (use --engine polars)")
            else:
                if s.fmt == "parquet" and s.compression:
                    raise TokcolumnarError(f"{path}: compressed Parquet files are not readable "
                                           "by DuckDB (use --engine polars)")
                delim = "\t" if ".tsv" in s.path.name else ","
                extra = {"delim": delim} if s.fmt == "csv" else {}
                cur = sql.run("read_corpus", f"peek_{s.fmt}", path=path, **extra)
                cols = {d[0]: d[1] for d in cur.description}
                if cfg.column not in cols:
                    raise TokcolumnarError(
                        f"{path}: no column {cfg.column!r} (columns: "
                        f"{', '.join(cols) or 'none'}); choose one with --column")
                ctype = str(cols[cfg.column]).upper()
                if ctype not in ("VARCHAR", "STRING", '"NULL"', "NULL", "JSON"):
                    raise TokcolumnarError(f"{path}: text column has type {ctype}, expected "
                                           "strings")
                sql.run("read_corpus", s.fmt, path=path, src=src, column=cfg.column, **extra)
        except duckdb.Error as e:
            msg = _duck_error(e)
            if "UTF-8" in msg or "utf-8" in msg or "Unicode" in msg:
                raise TokcolumnarError(f"{path}: invalid UTF-8 ({msg})") from None
            raise TokcolumnarError(f"cannot read {path} as {s.fmt}: {msg}") from None


def _as_frame(inputs: Any, column: str) -> pl.DataFrame | None:
    """Python inputs (data frames, Arrow tables, iterables of strings) as a frame
    (tc_row, text); None for paths."""
    import pyarrow as pa

    if isinstance(inputs, pl.LazyFrame):
        inputs = inputs.collect()
    if isinstance(inputs, pa.Table):
        inputs = pl.from_arrow(inputs)
    if isinstance(inputs, pl.DataFrame):
        if column not in inputs.columns:
            raise TokcolumnarError(f"no column {column!r} in the data frame "
                                   f"(columns: {', '.join(inputs.columns)})")
        s = inputs.get_column(column)
        if s.dtype == pl.Null:
            s = s.cast(pl.String)
        if s.dtype != pl.String:
            raise TokcolumnarError(f"data frame: text column has type {s.dtype}, expected "
                                   "strings")
        return pl.DataFrame({"text": s}).with_row_index("tc_row")
    if isinstance(inputs, (str, os.PathLike)):
        return None
    if isinstance(inputs, (list, tuple)) and all(isinstance(x, (str, os.PathLike))
                                                 for x in inputs):
        return None
    if isinstance(inputs, Iterable):
        texts = list(inputs)
        for x in texts:
            if not isinstance(x, str):
                raise TokcolumnarError(f"expected strings in the iterator, got "
                                       f"{type(x).__name__}")
        return pl.DataFrame({"text": pl.Series(texts, dtype=pl.String)}).with_row_index("tc_row")
    raise TokcolumnarError(f"unsupported input {type(inputs).__name__}")


def _count(sql: Scripts, inputs: Any, cfg: TrainConfig) -> None:
    """Stages 2-3: tc_words from the inputs."""
    import duckdb

    _check_supported(cfg)
    _load_corpus(sql, inputs, cfg)
    try:
        sql.run("count_words", "tokenize", normalizer=(cfg.normalizer or "none").lower(),
                lowercase=bool(cfg.lowercase), pretokenizer=cfg.pre_tokenizer.lower())
        sql.run("count_words", "count")
    except duckdb.Error as e:
        raise TokcolumnarError(f"counting words failed: {_duck_error(e)}") from None
    _check_words(sql, cfg)


def _check_words(sql: Scripts, cfg: TrainConfig) -> None:
    n, longest = sql.rows("count_words", "stats")[0]
    if n == 0:
        raise TokcolumnarError("the input contains no words (empty files or empty column?)")
    if cfg.max_word_chars and longest > cfg.max_word_chars:
        raise TokcolumnarError(
            f"a pre-token of {longest:,} characters exceeds --max-word-chars "
            f"{cfg.max_word_chars:,} (a huge line without separators?); split the input, choose "
            "another pre-tokenizer, or raise the limit")


def count_duckdb(inputs: Any, cfg: TrainConfig) -> pl.DataFrame:
    """The counting stage in DuckDB: the `words` table (word, count u64, first_seen u64),
    sorted by first_seen, identical to the Polars engine's."""
    con = connect()
    try:
        sql = Scripts(con)
        _count(sql, inputs, cfg)
        return con.sql("SELECT word, count, first_seen FROM tc_words ORDER BY w").pl()
    finally:
        con.close()


def _load_counts(sql: Scripts, from_counts: Any) -> pl.DataFrame | None:
    """`--from-counts`: a Parquet path (read by DuckDB, normalised as the Polars engine does) or
    a data frame (used as is). Returns the frame when one was given (the words table keeps it)."""
    import duckdb

    con = sql.con
    if isinstance(from_counts, pl.DataFrame):
        df = from_counts
        if "first_seen" not in df.columns:
            df = df.with_row_index("first_seen").select("word", "count", "first_seen")
        con.register("tc_counts_input",
                     df.select("word", "count", "first_seen").with_row_index("tc_row"))
        sql.run("count_words", "from_frame")
        con.unregister("tc_counts_input")
        return df
    path = str(from_counts)
    if not Path(path).exists():
        raise TokcolumnarError(f"counts file not found: {path}")
    try:
        cur = con.execute("SELECT * FROM read_parquet($p) LIMIT 0", {"p": path})
        cols = {d[0]: str(d[1]).upper() for d in cur.description}
    except duckdb.Error as e:
        raise TokcolumnarError(f"cannot read {path} as Parquet: {_duck_error(e)}") from None
    for col in ("word", "count"):
        if col not in cols:
            raise TokcolumnarError(f"{path}: no column {col!r} (columns: {', '.join(cols)})")
    if cols["word"] not in ("VARCHAR", "STRING"):
        raise TokcolumnarError(f"{path}: column 'word' must be strings")
    if not any(t in cols["count"] for t in ("INT", "HUGEINT")):
        raise TokcolumnarError(f"{path}: column 'count' must be integers")
    sql.run("count_words", "counts_file" if "first_seen" in cols else "counts_file_rows",
            path=path)
    if con.execute("SELECT count(*) FROM tc_counts_input WHERE count < 0").fetchone()[0]:
        raise TokcolumnarError(f"{path}: negative counts")
    sql.run("count_words", "from_counts")
    con.execute("DROP TABLE tc_counts_input")
    if not con.execute("SELECT count(*) FROM tc_words").fetchone()[0]:
        raise TokcolumnarError(f"{path}: no words with a positive count")
    return None


# -- training -------------------------------------------------------------------------------
@dataclass
class _Cand:
    eid: int
    key: int
    a: int
    b: int
    stale: int
    cnt: int
    eff: int
    tok: str
    blen: int
    reuse_id: int | None
    reuse_blen: int | None
    multi: bool
    fs: int | None
    ltok: str
    rtok: str


class MergeLoop:
    """Drives stages 7-8: one SQL pass per batch of merges, until the vocabulary is full, no pair
    is left, or the best count is below min_frequency."""

    def __init__(self, sql: Scripts, cfg: TrainConfig, vocab_n: int):
        self.sql = sql
        self.cfg = cfg
        self.hf = cfg.tie_break == "id"
        self.vocab_n = vocab_n
        self.merges_n = 0
        self.theta = 1 << 62  # everything starts cold
        self.passes = 0
        self.minimum = max(1, cfg.min_frequency)
        self.max_merges = cfg.max_merges if cfg.max_merges is not None else 1 << 62
        self.cold_left = True
        sql.bind(n=CANDIDATES, prefix=cfg.continuing_subword_prefix, theta=self.theta)
        sql.run_vars("merge_pass", "views")
        section = {"id": "candidates_id", "lexical-max": "candidates_lexical",
                   "first-seen": "candidates_first_seen"}[cfg.tie_break]
        self.q_candidates = "; ".join(sql.prepare("merge_pass", "clear")
                                      + sql.prepare("merge_pass", section))
        self.q_apply = "; ".join(sql.prepare("merge_pass", "apply"))
        self.q_reuse = "; ".join(sql.prepare("merge_pass", "reuse_counts") + sql.prepare(
            "merge_pass", "mark_multi" if self.hf else "fold_old"))

    # -- queue ------------------------------------------------------------------------------
    def refill(self) -> bool:
        """Lower theta and move the next cold entries to hot. False when cold was empty."""
        sql = self.sql
        if not self.cold_left:
            return False
        sql.run("queue", "flush")
        row = sql.rows("queue", "threshold", h=HOT_SIZE)
        theta = row[0][0] if row else -(1 << 62)
        sql.run("queue", "refill", theta=theta)
        self.theta = theta
        sql.bind(theta=theta)
        if not row:
            self.cold_left = False
        if not self.hf:
            sql.run("queue", "drop_dead")
        return True

    def candidates(self) -> list[_Cand]:
        return [_Cand(*r) for r in self.sql.con.execute(self.q_candidates).fetchall()]

    def _first_seen_winner(self, cands: list[_Cand]) -> _Cand:
        """first-seen: make sure the leader's first occurrence is exact (fs is a lower bound)."""
        while True:
            top = [c for c in cands if c.cnt == cands[0].cnt]
            probe = top[:32]
            got = dict(self.sql.rows("merge_pass", "first_seen_actual",
                                     eids=[c.eid for c in probe]))
            for c in probe:
                c.fs = got.get(c.eid, 1 << 62)
            best = min(probe, key=lambda c: (c.fs, c.eid))
            rest = top[len(probe):]
            if not rest or best.fs <= rest[0].fs:
                return best
            cands = self.candidates()

    # -- one pass ---------------------------------------------------------------------------
    def step(self) -> bool:
        """One pass; False when training is over."""
        cfg = self.cfg
        if self.vocab_n >= cfg.vocab_size or self.merges_n >= self.max_merges:
            return False
        cands = self.candidates()
        while not cands or cands[0].eff < self.theta:
            if not self.refill():
                break
            cands = self.candidates()
        if not cands:
            return False
        first = cands[0]
        if first.cnt < self.minimum:
            return False
        if cfg.tie_break == "first-seen":
            first = self._first_seen_winner(cands)
        room = min(cfg.vocab_size - self.vocab_n, self.max_merges - self.merges_n)
        picked: list[tuple[_Cand, bool]] = [(first, False)]
        batching = self.hf or cfg.tie_break == "lexical-max"
        if batching and first.reuse_id is None and not first.multi:
            lefts, rights, made = {first.a}, {first.b}, {first.tok}
            conflicts = 0
            for c in cands[1:]:
                if len(picked) >= room or c.eff < self.theta or c.cnt < self.minimum:
                    break
                if c.reuse_id is not None or c.multi or c.tok in made:
                    break
                conflict = c.a in rights or c.b in lefts
                if conflict:
                    conflicts += 1
                    if conflicts > MAX_CONFLICTS:
                        break
                picked.append((c, conflict))
                lefts.add(c.a)
                rights.add(c.b)
                made.add(c.tok)
        self._pass(picked)
        return True

    def _pass(self, picked: list[tuple[_Cand, bool]]) -> None:
        """Run stage 7 on the picked candidates (in queue order, with their conflict flag)."""
        sql = self.sql
        cs = [c for c, _ in picked]
        self.passes += 1
        sql.run("merge_pass", "compute", r=list(range(len(cs))),
                conflict=[f for _, f in picked], eid=[c.eid for c in cs],
                key=[c.key for c in cs], a=[c.a for c in cs], b=[c.b for c in cs],
                eff=[c.eff for c in cs], stale=[c.stale for c in cs], cnt=[c.cnt for c in cs],
                reuse_id=[c.reuse_id for c in cs],
                new_blen=[c.blen if c.reuse_id is None else c.reuse_blen for c in cs],
                tok=[c.tok for c in cs], ltok=[c.ltok for c in cs], rtok=[c.rtok for c in cs],
                vocab_n=self.vocab_n, hf=self.hf,
                max_token_length=self.cfg.max_token_length, **{"pass": self.passes})
        if cs[0].reuse_id is not None:
            sql.con.execute(self.q_reuse)
        kstar, fresh = sql.con.execute(self.q_apply).fetchone()
        self.merges_n += kstar
        self.vocab_n += fresh

    def run(self) -> None:
        progress = None
        if self.cfg.show_progress is not False:
            from ..progress import Progress

            progress = Progress("merging (duckdb)", total=self.cfg.vocab_size,
                                enabled=self.cfg.show_progress)
        while self.step():
            if progress is not None:
                progress.update(self.vocab_n)
        if progress is not None:
            progress.close(self.vocab_n)


def _initial(sql: Scripts, cfg: TrainConfig) -> int:
    """Stages 4-6; returns the initial vocabulary size."""
    from ..alphabet import check_vocab_size

    sql.run("alphabet", "chars")
    sql.run("alphabet", "alphabet", initial_alphabet=list(cfg.initial_alphabet),
            limit_alphabet=cfg.limit_alphabet)
    sql.run("alphabet", "vocab", special_tokens=list(cfg.special_tokens),
            eow_token=cfg.end_of_word_token)
    sql.run("initial_symbols", "symbols", prefix=cfg.continuing_subword_prefix,
            suffix=cfg.end_of_word_suffix, eow_token=cfg.end_of_word_token)
    sql.run("initial_symbols", "variants", variant_order=list(cfg.variant_order or []))
    sql.run("initial_symbols", "seg")
    n = sql.con.execute("SELECT count(*) FROM tc_vocab").fetchone()[0]
    check_vocab_size(cfg.vocab_size, n)
    sql.run("pair_counts", "pairs", max_token_length=cfg.max_token_length)
    sql.run("pair_counts", "tables")
    return n


def train_duckdb(inputs: Any, cfg: TrainConfig, from_counts: Any = None) -> Any:
    """Train a BPE tokenizer with every stage in DuckDB. Returns the same `TrainResult` as
    `tokcolumnar.training.train` (so `result.save(dir)` writes the same files)."""
    import duckdb

    from ..training import TrainResult, pipeline_parts

    if cfg.model != "bpe":
        raise TokcolumnarError("the duckdb engine trains BPE only (WordPiece: use --engine "
                               "polars)")
    timings: dict[str, float] = {}
    normalizer, pretokenizer = pipeline_parts(cfg)
    con = connect()
    try:
        sql = Scripts(con)
        t0 = time.perf_counter()
        frame = None
        if from_counts is not None:
            frame = _load_counts(sql, from_counts)
        else:
            _count(sql, inputs, cfg)
        timings["count"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            n0 = _initial(sql, cfg)
        except duckdb.Error as e:
            raise TokcolumnarError(f"building the alphabet failed: {_duck_error(e)}") from None
        timings["initial"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        loop = MergeLoop(sql, cfg, n0)
        loop.run()
        timings["merge"] = time.perf_counter() - t2
        timings["passes"] = float(loop.passes)
        t3 = time.perf_counter()
        words = con.sql(_section_text(sql, "results", "words_out")).pl()
        if frame is not None:
            words = frame.with_columns(words.get_column("tokens"), words.get_column("ids"))
        merges = con.sql(_section_text(sql, "results", "merges_out")).pl()
        vocab = con.sql(_section_text(sql, "results", "vocab_out")).pl()
        timings["tables"] = time.perf_counter() - t3
    finally:
        con.close()
    result = TrainResult(cfg, words, merges, vocab, normalizer, pretokenizer, timings)
    if isinstance(inputs, (str, Path)):
        result.inputs = [str(inputs)]
    elif isinstance(inputs, (list, tuple)):
        result.inputs = [str(x) for x in inputs]
    return result


def _section_text(sql: Scripts, stem: str, section: str) -> str:
    (q, names), = sql.statements(stem, section)
    if names:
        raise TokcolumnarError(f"section {section} takes parameters")
    return q


# -- the Unicode classes of stage 1 ---------------------------------------------------------
def _rust_ranges(pattern: str) -> list[tuple[int, int]]:
    """Code point ranges matching `pattern` (a one-character regex) in the Rust regex crate,
    which Polars (and HF tokenizers) use."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    df = pl.DataFrame({"cp": cps, "c": [chr(c) for c in cps]})
    return _ranges(df.filter(pl.col("c").str.contains(f"^(?:{pattern})$")).get_column(
        "cp").to_list())


def _re2_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)


def _sigma_classes() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The characters Rust's to_lowercase treats as cased / case-ignorable when it decides
    whether a capital sigma ends a word (its tables, measured through Polars: they are not the
    regex crate's \\p{Cased} / \\p{Case_Ignorable}, which follow a newer Unicode version)."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    df = pl.DataFrame({"cp": cps, "c": [chr(c) for c in cps]}).with_columns(
        after_letter=(pl.lit("\u0391") + pl.col("c") + pl.lit("\u03a3")).str.to_lowercase()
        .str.ends_with("\u03c2"),
        after_space=(pl.lit(" ") + pl.col("c") + pl.lit("\u03a3")).str.to_lowercase()
        .str.ends_with("\u03c2"))
    cased = df.filter(pl.col("after_space")).get_column("cp").to_list()
    ignorable = df.filter(pl.col("after_letter") & ~pl.col("after_space")).get_column(
        "cp").to_list()
    return _ranges(cased), _ranges(ignorable)


def _ranges(cps: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for c in cps:
        if out and c == out[-1][1] + 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _lowercase_fixes() -> tuple[str, str, list[tuple[str, str]]]:
    """Characters whose Rust `to_lowercase` differs from DuckDB's lower(): 1:1 ones for
    translate(), longer ones for replace()."""
    import duckdb

    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c != 0x3A3]
    con = duckdb.connect()
    con.register("tc_chars", pl.DataFrame({"c": [chr(c) for c in cps]}))
    got = con.sql("SELECT c, lower(c) AS d FROM tc_chars").pl().with_columns(
        pl.col("c").str.to_lowercase().alias("r"))
    diff = got.filter(pl.col("d") != pl.col("r"))
    src, dst, multi = [], [], []
    for c, r in zip(diff.get_column("c").to_list(), diff.get_column("r").to_list()):
        if len(r) == 1:
            src.append(c)
            dst.append(r)
        else:
            multi.append((c, r))
    return "".join(src), "".join(dst), multi


def text_functions_sql() -> str:
    """The text of sql/01_text_functions.sql (regenerate it with
    `python -m tokcolumnar.engines.duckdb_engine --regenerate`)."""
    w = _re2_class(_rust_ranges(r"\w"))
    s = _re2_class(_rust_ranges(r"\s"))
    cased, ci = (_re2_class(r) for r in _sigma_classes())
    src, dst, multi = _lowercase_fixes()
    breaks = r"\x{0B}\x{0C}\x{1C}\x{1D}\x{1E}\x{85}\x{2028}\x{2029}"
    nmt = rf"[^ \x{{0D}}\x{{0A}}{breaks}]*[{breaks}]|[^ \x{{0D}}\x{{0A}}{breaks}]+"
    lower = "t"
    for c, r in multi:
        lower = f"replace({lower}, {_sql_str(c)}, {_sql_str(r)})"
    lower = f"translate({lower}, {_sql_str(src)}, {_sql_str(dst)})"
    sigma = f"([{cased}][{ci}]*)\u03a3([{ci}]*)($|[^{cased}{ci}])"
    lower = f"lower(regexp_replace({lower}, {_sql_str(sigma)}, '\\1\u03c2\\2\\3', 'g'))"
    return f"""-- Stage 1: text functions for the counting stage (GENERATED: do not edit by hand;
-- regenerate with `python -m tokcolumnar.engines.duckdb_engine --regenerate`).
--
-- In:  nothing. Out: three macros used by stage 3.
--   tc_pretokenize(text, kind) -> VARCHAR[]  the words of a text:
--     'whitespace'        HF Whitespace, `\\w+|[^\\w\\s]+`
--     'whitespace-split'  HF WhitespaceSplit, `\\S+`
--     'subword-nmt'       subword-nmt's split: ASCII spaces only (and its line ends)
--     'none'              the whole text as one word (nothing for '')
--   tc_lowercase(text) -> VARCHAR            Rust's str::to_lowercase
--   tc_normalize(text, normalizer, lowercase) -> VARCHAR   ('none' | 'nfc', then lowercase)
--
-- Why generated: DuckDB's regexes are RE2, where \\w and \\s are ASCII only and \\p{{L}} etc.
-- follow an older Unicode version than the Rust regex crate behind Polars and HF tokenizers.
-- The classes below are the exact code point sets of Rust's \\w (Alphabetic, M, Nd, Pc,
-- Join_Control) and \\s (White_Space), listed as ranges, so both engines split identically.
-- Likewise lower() (utf8proc) differs from Rust's to_lowercase on {len(src) + len(multi)}
-- code points (newer characters, U+0130) and has no final-sigma rule: the translate / replace
-- tables and the regexp_replace below (Σ -> ς when a cased letter precedes it and none
-- follows, case-ignorable characters skipped, with the cased / case-ignorable sets Rust's
-- to_lowercase itself uses, measured) close both gaps.

CREATE OR REPLACE MACRO tc_pretokenize(t, kind) AS
    CASE kind
        WHEN 'whitespace' THEN regexp_extract_all(t, '[{w}]+|[^{w}{s}]+')
        WHEN 'whitespace-split' THEN regexp_extract_all(t, '[^{s}]+')
        WHEN 'subword-nmt' THEN regexp_extract_all(t, '{nmt}')
        WHEN 'none' THEN CASE WHEN t = '' THEN []::VARCHAR[] ELSE [t] END
    END;

CREATE OR REPLACE MACRO tc_lowercase(t) AS
    {lower};

CREATE OR REPLACE MACRO tc_normalize(t, normalizer, lowercase) AS
    CASE WHEN lowercase
         THEN tc_lowercase(CASE WHEN normalizer = 'nfc' THEN nfc_normalize(t) ELSE t END)
         ELSE CASE WHEN normalizer = 'nfc' THEN nfc_normalize(t) ELSE t END
    END;
"""


if __name__ == "__main__":  # pragma: no cover
    import sys

    if "--regenerate" in sys.argv:
        (SQL_DIR / "01_text_functions.sql").write_text(text_functions_sql(), encoding="utf-8")
        print(f"wrote {SQL_DIR / '01_text_functions.sql'}")
