"""The pages of `report` and `compare`: metrics and vocabulary tables turned into charts, one
offline HTML file, and optionally the charts as PNGs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import TokcolumnarError
from ..models.bpe import BPEModel
from ..tokenizer import Tokenizer, read_json
from . import charts
from .compare import compare_tables
from .metrics import METRIC_COLUMNS, duplicated_merges, metrics_table, unknown_message
from .page import page, table_html, write_pngs, write_text_output
from .vocabulary import vocab_frame


def unknown_warnings(metrics: pl.DataFrame, label: str = "") -> list[str]:
    """A warning per file where characters could not be represented: BPE without an unknown
    token drops them silently, which inflates bytes per token and deflates parity."""
    return [unknown_message(row["file"], row["unknown_char_share"], label) + "."
            for row in metrics.filter(pl.col("unknown_char_share") > 0).iter_rows(named=True)]


def setting_text(value: object, limit: int = 120) -> str:
    """A run.json setting as JSON, a long one (the 256 byte characters of `--preset gpt2`'s
    alphabet) cut to `limit` characters with its length said."""
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} values)" if isinstance(value, (list, dict)) else ""
    return text[:limit] + "…" + size


def run_tables(directory: Path) -> list[tuple[str, str]]:
    """The run's settings and stage timings from `run.json`, as HTML tables."""
    path = directory / "run.json"
    if not path.is_file():
        return []
    run = read_json(path, "run.json")
    out = []
    settings = run.get("settings") if isinstance(run, dict) else None
    if isinstance(settings, dict):
        out.append(("Settings (run.json)", table_html(pl.DataFrame(
            {"setting": list(settings), "value": [setting_text(v) for v in settings.values()]}))))
    timings = run.get("timings_s") if isinstance(run, dict) else None
    if isinstance(timings, dict):
        out.append(("Training timings (run.json)", table_html(pl.DataFrame(
            {"stage": list(timings), "seconds": [float(v) for v in timings.values()]}))))
    return out


def report_specs(directory: Path, tok: Tokenizer, metrics: pl.DataFrame,
                 curve: pl.DataFrame | None) -> dict[str, charts.Spec]:
    vocab = vocab_frame(tok)
    specs: dict[str, charts.Spec] = {}
    merges_path = directory / "merges.parquet"
    if merges_path.is_file():
        merges = pl.read_parquet(merges_path, columns=["rank", "id", "count"])
        if merges.height:
            specs["merge_count"] = charts.merge_count(merges)
            specs["entering"] = charts.entering(merges, vocab)
    specs["token_lengths"] = charts.token_lengths(vocab)
    specs["scripts"] = charts.scripts(vocab)
    if curve is not None and curve.height:
        specs["prefix_curve"] = charts.prefix_curve(curve)
    if metrics.height:
        specs["metrics"] = charts.metrics_panels(metrics)
    return specs


def write_report(directory: str, texts: list[str], out: str, png: str | None = None,
                 fmt: str | None = None, column: str = "text", force: bool = False
                 ) -> dict[str, Any]:
    """`tokcolumnar report`: returns what was written (for the command's summary line)."""
    d = Path(directory)
    if not d.is_dir():
        raise TokcolumnarError(f"not a training directory: {directory} (report reads a "
                               "directory written by `tokcolumnar train`)")
    tok = Tokenizer.from_dir(d)
    inputs = [*texts, directory]
    vocab_path = d / "vocab.parquet"
    ranks = pl.read_parquet(vocab_path, columns=["token", "id", "rank"]) \
        if vocab_path.is_file() else None
    metrics, curve = metrics_table(tok, texts, fmt, column, ranks=ranks)
    specs = report_specs(d, tok, metrics, curve)
    notes = ["Metrics: totals over each file, read as training reads it (each line one "
             "sequence, its line ending kept); tokens exclude the post-processor's template "
             "tokens; words are WORD_RE matches (runs of non-space characters; one word per "
             "character of scripts written without spaces); renyi_efficiency uses alpha 2.5 "
             "and the full vocabulary size."]
    if isinstance(tok.model, BPEModel) and curve is not None:
        dup = duplicated_merges(tok.model)
        notes.append("Bytes per token by vocabulary size is exact for every prefix of the "
                     "merge list, from one traced encoding."
                     + (f" The merge list names {dup} pair(s) twice: there the curve counts "
                        "the merges the full model uses with rank < k." if dup else ""))
    elif curve is not None:
        notes.append("WordPiece has no prefix property (a missing piece changes the whole "
                     "greedy walk): bytes per token by vocabulary size is exact at "
                     "the points drawn, each a re-encoding with the base vocabulary and the "
                     "tokens of the first k merges.")
    elif texts:
        notes.append("No bytes-per-token curve: it needs a BPE model or the vocab.parquet of "
                     "a WordPiece training directory.")
    tables = [("Metrics", table_html(metrics.select("file", *METRIC_COLUMNS)))] \
        if metrics.height else []
    tables += run_tables(d)
    doc = page(f"tokcolumnar report: {d.name}", specs, tables,
               warnings=unknown_warnings(metrics), notes=notes)
    write_text_output(out, doc, inputs=inputs, force=force)
    pngs = write_pngs(specs, png, inputs=inputs, force=force) if png else []
    return {"charts": len(specs), "pngs": len(pngs), "metrics": metrics}


def write_compare(tokenizers: list[str], texts: list[str], out: str, fmt: str | None = None,
                  column: str = "text", force: bool = False,
                  png: str | None = None) -> dict[str, Any]:
    """`tokcolumnar compare --out compare.html`."""
    met, overlap = compare_tables(tokenizers, texts, fmt, column)
    files = [Path(t).name for t in texts]
    specs = {"parity": charts.parity(met, files, files[0]),
             "metrics": charts.metrics_panels(met, by="tokenizer")}
    notes = [f"parity = tokens of a file / tokens of the first file ({files[0]}) for the same "
             "tokenizer: meaningful when the files are parallel text (the same content in "
             "several languages).",
             "Vocabulary overlap compares surface strings (byte-level tokens decoded, ## and "
             "end-of-word suffixes stripped), so GPT-2's 'Ġthe' is ' the', not 'the'."]
    tables = [("Metrics", table_html(met)), ("Vocabulary overlap", table_html(overlap))]
    warnings = []
    for name in met.get_column("tokenizer").unique(maintain_order=True).to_list():
        warnings += unknown_warnings(met.filter(pl.col("tokenizer") == name), f"{name}, ")
    doc = page("tokcolumnar compare", specs, tables, warnings=warnings, notes=notes)
    inputs = [*texts, *tokenizers]
    write_text_output(out, doc, inputs=inputs, force=force)
    pngs = write_pngs(specs, png, inputs=inputs, force=force) if png else []
    return {"charts": len(specs), "pngs": len(pngs), "metrics": met}
