"""The command line's jobs: one function per sub-command, each taking the parsed arguments and
returning the exit code (errors are raised and reported by `cli.main`)."""

from __future__ import annotations

import argparse
import sys
import time

from ..config import TrainConfig
from ..encode.dataset import encode_files
from ..errors import TokcolumnarError
from ..outputs import output_file, write_parquet
from ..progress import StageTimer
from ..training.pipeline import count_words, train

OPTION_NAMES = ["model", "vocab_size", "min_frequency", "special_tokens", "pre_tokenizer",
                "normalizer", "lowercase", "end_of_word_suffix", "end_of_word_token",
                "continuing_subword_prefix", "limit_alphabet", "max_token_length", "tie_break",
                "preset", "engine", "max_merges", "min_score", "wordpiece_scoring",
                "unk_token", "max_word_chars", "format", "column"]


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    kw = {k: getattr(args, k) for k in OPTION_NAMES if getattr(args, k, None) is not None}
    if getattr(args, "initial_alphabet", None) is not None:
        kw["initial_alphabet"] = args.initial_alphabet
    if getattr(args, "quiet", False):
        kw["show_progress"] = False
    return TrainConfig(**kw)


def cmd_train(args: argparse.Namespace) -> int:
    if not args.inputs and not args.from_counts:
        raise TokcolumnarError("give INPUT files or --from-counts words.parquet")
    if args.inputs and args.from_counts:
        raise TokcolumnarError("give either INPUT files or --from-counts, not both")
    cfg = config_from_args(args)
    t0 = time.perf_counter()
    result = train(args.inputs or None, out_dir=args.out, from_counts=args.from_counts,
                   force=args.force, config=cfg)
    if not args.quiet:
        print(f"trained {cfg.model} vocab of {result.vocab.height:,} tokens "
              f"({result.merges.height:,} merges) from {result.words.height:,} distinct words "
              f"in {time.perf_counter() - t0:.2f}s -> {args.out}", file=sys.stderr)
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    with output_file(args.out, inputs=args.inputs, force=args.force) as tmp:
        words = count_words(args.inputs, config=cfg)
        write_parquet(words, tmp, "words")
    if not args.quiet:
        print(f"{words.height:,} distinct words, {int(words['count'].sum()):,} occurrences "
              f"-> {args.out}", file=sys.stderr)
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    if args.max_line_bytes < 1:
        raise TokcolumnarError(f"--max-line-bytes must be at least 1, got {args.max_line_bytes}")
    timer = StageTimer()
    rows = encode_files(args.tokenizer, args.inputs, args.out, fmt=args.format,
                        column=args.column or "text", keep_newlines=args.keep_newlines,
                        force=args.force, progress=None if not args.quiet else False,
                        columns=args.columns, keep_text=not args.drop_text,
                        add_special_tokens=not args.no_special_tokens,
                        max_line_bytes=args.max_line_bytes,
                        rows_per_file=args.rows_per_file, timer=timer)
    if args.timings:
        total = sum(timer.seconds.values())
        print("stage seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in timer.seconds.items())
              + f" (sum {total:.2f})", file=sys.stderr)
    if not args.quiet:
        print(f"encoded {rows:,} rows -> {args.out}", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from ..duckdb.query import ready_query, run_sql  # DuckDB loads only for the commands
    # that use it
    if (args.sql is None) == (args.query is None):
        raise TokcolumnarError("give either SQL or --query NAME (a ready analysis query)")
    text = ready_query(args.query) if args.query is not None else args.sql
    params = {}
    for item in args.param or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TokcolumnarError(f"--param expects NAME=VALUE, got {item!r}")
        params[name] = value
    run_sql(args.dir, text, fmt=args.format, output=args.output, params=params or None,
            force=args.force, allow_external=args.allow_external)
    return 0


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from ..duckdb.crosscheck import crosscheck  # DuckDB loads only for the commands that use it

    cfg = config_from_args(args)
    return crosscheck(args.inputs, cfg, from_counts=args.from_counts)


COMMANDS = {"train": cmd_train, "count": cmd_count, "encode": cmd_encode, "sql": cmd_sql,
            "crosscheck": cmd_crosscheck}
