"""The command line's jobs: one function per sub-command, each taking the parsed arguments and
returning the exit code (errors are raised and reported by `cli.main`).

Each command loads its own work when it runs, not with this module: `encode` does not load the
training pipeline (and `train` not the encoders), no command loads DuckDB, the report or the
Ray and Spark glue unless asked to (see docs/architecture.md, "Start-up cost")."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ..config import TrainConfig
from ..errors import TokcolumnarError
from ..malloc import ENCODE_MMAP_THRESHOLD, ENCODE_TRIM_THRESHOLD, fix_mmap_threshold
from ..memory import format_size
from ..outputs import output_file, write_parquet
from ..presets import ROLES, role_name
from ..progress import StageTimer
from ..workdir import default_work_dir

OPTION_NAMES = ["model", "vocab_size", "min_frequency", "special_tokens", "pre_tokenizer",
                "normalizer", "lowercase", "end_of_word_suffix", "end_of_word_token",
                "continuing_subword_prefix", "limit_alphabet", "max_token_length", "tie_break",
                "preset", "engine", "max_merges", "min_score", "wordpiece_scoring",
                "unk_token", "max_word_chars", "format", "column", "cjk_split", "max_words",
                "pattern", "byte_fallback"]
# (special_token_roles: merged from each --special-token-roles, in config_from_args)


def given_options(args: argparse.Namespace) -> dict[str, object]:
    """The training options given on the command line (as `train`'s keyword arguments)."""
    kw = {k: getattr(args, k) for k in OPTION_NAMES if getattr(args, k, None) is not None}
    if getattr(args, "initial_alphabet", None) is not None:
        kw["initial_alphabet"] = args.initial_alphabet
    if getattr(args, "special_token_roles", None) is not None:
        # each --special-token-roles in turn: a later one giving a role again wins (`pad` and
        # `pad_token` are one role; an unknown name is left for the settings to refuse)
        kw["special_token_roles"] = {
            (role_name(k) if role_name(k) in ROLES else k): v
            for roles in args.special_token_roles for k, v in roles.items()}
    # the CLI shows progress off a terminal too (log lines), unless --quiet
    kw["show_progress"] = not getattr(args, "quiet", False)
    return kw


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(**given_options(args))


def use_ray_address(args: argparse.Namespace) -> None:
    """--ray-address: the cluster `--engine ray` connects to (through Ray's RAY_ADDRESS)."""
    if args.ray_address is not None:
        if args.engine != "ray":
            raise TokcolumnarError("--ray-address needs --engine ray")
        os.environ["RAY_ADDRESS"] = args.ray_address


def cmd_train(args: argparse.Namespace) -> int:
    from ..training.pipeline import train  # the training pipeline loads with train and count

    if not args.inputs and not args.from_counts:
        raise TokcolumnarError("give INPUT files or --from-counts words.parquet")
    if args.inputs and args.from_counts:
        raise TokcolumnarError("give either INPUT files or --from-counts, not both")
    # --extend: the base's settings, with the options given (`training.extend`)
    options = ({"extend": args.extend, **given_options(args)} if args.extend is not None
               else {"config": config_from_args(args)})
    use_ray_address(args)
    t0 = time.perf_counter()
    result = train(args.inputs or None, out_dir=args.out, from_counts=args.from_counts,
                   force=args.force, memory_limit=args.memory_limit,
                   work_dir=args.work_dir, resume=args.resume,
                   checkpoint_every=args.checkpoint_every, **options)
    cfg = result.config
    if not args.quiet:
        segmenter = result.timings.get("count_segmenter")  # jieba / mecab's share
        # a Unigram vocabulary is pruned from seeds in EM rounds, not merged
        steps = (f"{result.rounds.height:,} EM rounds" if result.rounds is not None
                 else f"{result.merges.height:,} merges")
        print(f"trained {cfg.model} vocab of {result.vocab.height:,} tokens "
              f"({steps}) from {result.n_words:,} distinct words "
              f"in {time.perf_counter() - t0:.2f}s"
              + (f" ({cfg.pre_tokenizer} {segmenter:.2f}s)" if segmenter is not None else "")
              + (f", {format_size(result.spilled_bytes)} spilled" if result.spilled_bytes
                 else "")
              + f" -> {args.out}", file=sys.stderr)
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    from ..corpus.counts_file import counts_metadata
    from ..training.pipeline import count_words  # (as for train)

    cfg = config_from_args(args)
    use_ray_address(args)
    with output_file(args.out, inputs=args.inputs, force=args.force) as tmp:
        words = count_words(args.inputs, config=cfg, memory_limit=args.memory_limit,
                            work_dir=args.work_dir or default_work_dir(args.out),
                            resume=args.resume, checkpoint_every=args.checkpoint_every)
        write_parquet(words, tmp, "words", counts_metadata(cfg))
    if not args.quiet:
        print(f"{words.height:,} distinct words, {int(words['count'].sum()):,} occurrences "
              f"-> {args.out}", file=sys.stderr)
    return 0


def tiktoken_tokenizer(args: argparse.Namespace, tokenizer_class: Any) -> Any:
    """`--tokenizer FILE.tiktoken --pattern P [--special-tokens ...]`: the tokenizer of that
    vocabulary (`Tokenizer.from_tiktoken`, the class given: the encoder loads in
    `cmd_encode`); any other --tokenizer as given (--pattern and --special-tokens belong to a
    .tiktoken file)."""
    path = str(args.tokenizer)
    if not path.endswith(".tiktoken"):
        for flag, value in (("--pattern", args.pattern), ("--special-tokens",
                                                          args.special_tokens)):
            if value is not None:
                raise TokcolumnarError(f"{flag} applies to a .tiktoken --tokenizer only (a "
                                       "tokenizer.json has its own)")
        return args.tokenizer
    if args.pattern is None:
        raise TokcolumnarError("a .tiktoken --tokenizer needs --pattern (its split pattern: "
                               "gpt2, cl100k, o200k, qwen2, ...)")
    if args.engine != "polars":
        raise TokcolumnarError(f"a .tiktoken --tokenizer is not available with --engine "
                               f"{args.engine}")
    return tokenizer_class.from_tiktoken(path, args.pattern, args.special_tokens or [])


def cmd_encode(args: argparse.Namespace) -> int:
    # the encoder loads here, not with the module: `train` does not need it, and it pulls in
    # pyarrow.parquet (~0.05 s); the Ray and Spark glue only with their engine
    from ..encode.config import EncodeConfig
    from ..encode.dataset import encode_files
    from ..encode.stats import EncodeStats
    from ..tokenizer import Tokenizer

    use_ray_address(args)
    # per-batch temporaries stay in the heap, and its freed top is kept (tokcolumnar.malloc)
    fix_mmap_threshold(ENCODE_MMAP_THRESHOLD, ENCODE_TRIM_THRESHOLD)
    # every option is checked by EncodeConfig (the CLI's names mapped to its fields)
    cfg = EncodeConfig(
        fmt=args.format, column=args.column or "text", keep_newlines=args.keep_newlines,
        columns=args.columns, word_ids=args.word_ids, keep_text=not args.drop_text,
        add_special_tokens=not args.no_special_tokens, max_line_bytes=args.max_line_bytes,
        rows_per_file=args.rows_per_file, keep_columns=args.keep_columns, pack=args.pack,
        pack_separator_token=args.pack_separator, pack_drop_last=args.pack_drop_last,
        max_file_size=args.max_file_size, stats=args.stats, max_length=args.max_length,
        truncation=args.truncation, stride=args.stride, timings=args.timings,
        engine=args.engine)
    # a .tiktoken vocabulary with its --pattern (checked there), once the options are
    args.tokenizer = tiktoken_tokenizer(args, Tokenizer)
    if args.engine != "polars":
        if args.engine == "ray":
            from ..distributed.ray_encode import encode_files_ray as encode
        else:
            from ..distributed.spark import encode_files_spark as encode
        rows = encode(args.tokenizer, args.inputs, args.out, fmt=cfg.fmt, column=cfg.column,
                      keep_newlines=cfg.keep_newlines, force=args.force,
                      progress=not args.quiet)
        if not args.quiet:
            print(f"encoded {rows:,} rows -> {args.out}", file=sys.stderr)
        return 0
    stats: EncodeStats | bool = EncodeStats() if cfg.stats else False
    timer = StageTimer()
    rows = encode_files(args.tokenizer, args.inputs, args.out, force=args.force,
                        progress=not args.quiet, timer=timer, stats=stats, config=cfg)
    if stats is not False and not args.quiet:
        for line in stats.summary():
            print(line, file=sys.stderr)
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


def cmd_report(args: argparse.Namespace) -> int:
    from ..report.build import write_report  # the optional extra (Altair, vl-convert) loads
    # only for the commands that draw

    t0 = time.perf_counter()
    done = write_report(args.dir, args.text, args.out, png=args.png, fmt=args.text_format,
                        column=args.column or "text", force=args.force)
    if not args.quiet:
        print(f"report: {done['charts']} charts, {done['metrics'].height} text file(s)"
              + (f", {done['pngs']} PNGs -> {args.png}" if args.png else "")
              + f" in {time.perf_counter() - t0:.2f}s -> {args.out}", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if (args.out is None) == (args.format is None):
        raise TokcolumnarError("give either --out compare.html or --format json|csv")
    if args.png and args.out is None:
        raise TokcolumnarError("--png goes with --out (the charts of the HTML page)")
    if args.format is not None:
        from ..report.compare import compare_tables, print_table  # report loads only here

        met, _ = compare_tables(args.tokenizers, args.text, args.text_format,
                                args.column or "text")
        print_table(met, args.format)
        return 0
    from ..report.build import write_compare  # the optional extra loads only for the
    # commands that draw

    t0 = time.perf_counter()
    write_compare(args.tokenizers, args.text, args.out, fmt=args.text_format,
                  column=args.column or "text", force=args.force, png=args.png)
    if not args.quiet:
        print(f"compare: {len(args.tokenizers)} tokenizers x {len(args.text)} files in "
              f"{time.perf_counter() - t0:.2f}s -> {args.out}", file=sys.stderr)
    return 0


COMMANDS = {"train": cmd_train, "count": cmd_count, "encode": cmd_encode, "sql": cmd_sql,
            "crosscheck": cmd_crosscheck, "report": cmd_report,
            "compare": cmd_compare}
