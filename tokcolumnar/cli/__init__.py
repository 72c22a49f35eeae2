"""Command line: `tokcolumnar train|count|encode|sql|crosscheck`.

Bad input and a failing environment (no space, no permission) end with one `tokcolumnar: error:
...` line and exit code 2; Ctrl-C exits 130 and SIGTERM 143, after every temporary file is
removed. The signal handlers are installed before the heavy libraries load (this module and
`tokcolumnar/__init__` import none), so an interruption during start-up is clean too; each
command imports what it needs when it runs."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from .errors import Terminated, TokcolumnarError, TokcolumnarWarning, environment_message


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `tokcolumnar: error: <argparse's message>`, exit 2 (the
    usage stays in `--help`). Subparsers are built with the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tokcolumnar: error: {message}\n")


def _csv_list(s: str) -> list[str]:
    """`A,B,...` -> names; `''` -> no names. Empty names are kept so that the settings refuse
    them (`a,,b`)."""
    return s.split(",") if s else []


def add_train_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--model", choices=["bpe", "wordpiece"], default=None)
    g.add_argument("--vocab-size", type=int, default=None)
    g.add_argument("--min-frequency", type=int, default=None)
    g.add_argument("--special-tokens", type=_csv_list, default=None, metavar="A,B,...")
    g.add_argument("--pre-tokenizer", default=None,
                   help="whitespace (default), whitespace-split, bert, byte-level, metaspace, "
                        "digits, none")
    g.add_argument("--normalizer", default=None, help="none (default), nfc, nfkc, nfd, nfkd, bert")
    g.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                   help="lowercase after normalising (--preset bert: on unless --no-lowercase)")
    g.add_argument("--end-of-word-suffix", default=None, metavar="S",
                   help="fused to each word's last character, as HF (e.g. </w>)")
    g.add_argument("--end-of-word-token", default=None, metavar="S",
                   help="a separate symbol after each word, as in the seed documents")
    g.add_argument("--continuing-subword-prefix", default=None, metavar="P")
    g.add_argument("--limit-alphabet", type=int, default=None)
    g.add_argument("--initial-alphabet", default=None, metavar="CHARS",
                   help="characters always kept in the alphabet")
    g.add_argument("--max-token-length", type=int, default=None)
    g.add_argument("--tie-break", choices=["id", "lexical-max", "first-seen"], default=None)
    g.add_argument("--preset", choices=["gpt2", "bert", "subword-nmt"], default=None)
    g.add_argument("--engine", choices=["polars", "duckdb"], default=None)
    g.add_argument("--max-merges", type=int, default=None)
    g.add_argument("--min-score", type=float, default=None)
    g.add_argument("--wordpiece-scoring", choices=["likelihood", "frequency"], default=None)
    g.add_argument("--unk-token", default=None)
    g.add_argument("--max-word-chars", type=int, default=None,
                   help="refuse pre-tokens longer than this (default 1,000,000)")


def add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["text", "parquet", "jsonl", "csv"], default=None,
                   help="input format (default: from the file extension)")
    p.add_argument("--column", default=None, help="text column of parquet/jsonl/csv (text)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


OPTION_NAMES = ["model", "vocab_size", "min_frequency", "special_tokens", "pre_tokenizer",
                "normalizer", "lowercase", "end_of_word_suffix", "end_of_word_token",
                "continuing_subword_prefix", "limit_alphabet", "max_token_length", "tie_break",
                "preset", "engine", "max_merges", "min_score", "wordpiece_scoring",
                "unk_token", "max_word_chars", "format", "column"]


def config_from_args(args: argparse.Namespace) -> Any:
    from .config import TrainConfig

    kw = {k: getattr(args, k) for k in OPTION_NAMES if getattr(args, k, None) is not None}
    if getattr(args, "initial_alphabet", None) is not None:
        kw["initial_alphabet"] = args.initial_alphabet
    if getattr(args, "quiet", False):
        kw["show_progress"] = False
    return TrainConfig(**kw)


def cmd_train(args: argparse.Namespace) -> int:
    from .training import train

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
    from .outputs import output_file, write_parquet
    from .training import count_words

    cfg = config_from_args(args)
    with output_file(args.out, inputs=args.inputs, force=args.force) as tmp:
        words = count_words(args.inputs, config=cfg)
        write_parquet(words, tmp, "words")
    if not args.quiet:
        print(f"{words.height:,} distinct words, {int(words['count'].sum()):,} occurrences "
              f"-> {args.out}", file=sys.stderr)
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    from .encoding import encode_files

    rows = encode_files(args.tokenizer, args.inputs, args.out, fmt=args.format,
                        column=args.column or "text", keep_newlines=args.keep_newlines,
                        force=args.force, progress=None if not args.quiet else False)
    if not args.quiet:
        print(f"encoded {rows:,} rows -> {args.out}", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from .sql_query import run_sql

    params = {}
    for item in args.param or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TokcolumnarError(f"--param expects NAME=VALUE, got {item!r}")
        params[name] = value
    run_sql(args.dir, args.query, fmt=args.format, output=args.output, params=params or None,
            force=args.force, allow_external=args.allow_external)
    return 0


def cmd_crosscheck(args: argparse.Namespace) -> int:
    from .engines.crosscheck import crosscheck

    cfg = config_from_args(args)
    return crosscheck(args.inputs, cfg, from_counts=args.from_counts)


FORCE_HELP = ("replace an existing output even if tokcolumnar did not write it (never an input, "
              "the current directory or /)")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="tokcolumnar", description="Columnar BPE / WordPiece "
                       "tokenizer training with Polars (and a DuckDB SQL twin).")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a tokenizer into --out DIR")
    t.add_argument("inputs", nargs="*", metavar="INPUT", help="files, directories or globs")
    t.add_argument("--out", required=True, metavar="DIR")
    t.add_argument("--from-counts", default=None, metavar="words.parquet")
    t.add_argument("--force", action="store_true", help=FORCE_HELP)
    add_train_options(t)
    add_input_options(t)
    t.set_defaults(func=cmd_train)

    c = sub.add_parser("count", help="count words only (the first stage of train)")
    c.add_argument("inputs", nargs="+", metavar="INPUT")
    c.add_argument("--out", required=True, metavar="words.parquet")
    c.add_argument("--force", action="store_true", help=FORCE_HELP)
    add_train_options(c)
    add_input_options(c)
    c.set_defaults(func=cmd_count)

    e = sub.add_parser("encode", help="tokenize a dataset into a Parquet column of ids")
    e.add_argument("inputs", nargs="+", metavar="INPUT")
    e.add_argument("--tokenizer", required=True, metavar="DIR|tokenizer.json")
    e.add_argument("--out", required=True, metavar="FILE.parquet")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.add_argument("--keep-newlines", action="store_true",
                   help="keep each text line's line ending (default: stripped)")
    add_input_options(e)
    e.set_defaults(func=cmd_encode)

    q = sub.add_parser("sql", help="query a training directory's tables with DuckDB")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("query", metavar="SQL")
    q.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table")
    q.add_argument("--output", default=None, metavar="FILE")
    q.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a named query parameter ($NAME in the SQL); repeatable")
    q.add_argument("--force", action="store_true", help=FORCE_HELP)
    q.add_argument("--allow-external", action="store_true",
                   help="let the query read and write other files, attach databases and load "
                        "extensions (off by default: the query sees only DIR's tables)")
    q.set_defaults(func=cmd_sql)

    x = sub.add_parser("crosscheck", help="train with both engines and compare the tables")
    x.add_argument("inputs", nargs="*", metavar="INPUT")
    x.add_argument("--from-counts", default=None, metavar="words.parquet")
    add_train_options(x)
    add_input_options(x)
    x.set_defaults(func=cmd_crosscheck)
    return p


def _on_signal(signum: int, frame: Any) -> None:
    """First SIGINT/SIGTERM: raise, so that every `finally` removes its temporary files; a
    second signal cannot interrupt that cleanup."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt()


@contextmanager
def notes_to_stderr(quiet: bool) -> Iterator[None]:
    """Print each `TokcolumnarWarning` raised while running a command as one
    `tokcolumnar: note: ...` line on stderr (nothing with --quiet); other warnings as usual."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", TokcolumnarWarning)
        shown = warnings.showwarning

        def show(message: Any, category: Any, filename: Any, lineno: Any, file: Any = None,
                 line: Any = None) -> None:
            if not issubclass(category, TokcolumnarWarning):
                shown(message, category, filename, lineno, file, line)
            elif not quiet:
                print(f"tokcolumnar: note: {message}", file=sys.stderr)

        warnings.showwarning = show
        yield


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("tokcolumnar: interrupted (outputs left as they were)", file=sys.stderr)
        return 130
    except Terminated:
        print("tokcolumnar: terminated (outputs left as they were)", file=sys.stderr)
        return 143


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "quiet", False):
        os.environ["TOKCOLUMNAR_QUIET"] = "1"
    try:
        with notes_to_stderr(getattr(args, "quiet", False)):
            return args.func(args)
    except TokcolumnarError as e:
        print(f"tokcolumnar: error: {e}", file=sys.stderr)
        return e.exit_code
    except MemoryError:
        print("tokcolumnar: error: out of memory", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, and keep Python from reporting
        # the pipe again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - the environment, or a bug: one line either way
        env = environment_message(e)
        if env is not None:
            print(f"tokcolumnar: error: {env}", file=sys.stderr)
            return 2
        if os.environ.get("TOKCOLUMNAR_DEBUG"):
            raise
        print(f"tokcolumnar: internal error: {type(e).__name__}: {e} "
              "(set TOKCOLUMNAR_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
