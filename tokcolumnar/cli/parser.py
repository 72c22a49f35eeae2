"""The command line's arguments: one parser with a sub-command per job (train, count, encode,
sql, crosscheck, report, compare); option names, choices and defaults come from the settings
(`config`), so the CLI and the Python API accept the same values."""

from __future__ import annotations

import argparse
import json
from typing import NoReturn

from ..config import ENGINES, MODELS, TIE_BREAKS, WORDPIECE_SCORINGS
from ..corpus.sources import FORMATS
from ..duckdb import QUERY_FORMATS, ready_queries
from ..encode import (
    DEFAULT_COLUMNS,
    MAX_LINE_BYTES,
    OUTPUT_COLUMNS,
    OVERFLOW_COLUMN,
    TRUNCATION_DIRECTIONS,
)
from ..presets import PRESETS
from ..text.normalizers import NORMALIZER_NAMES
from ..text.pretokenizers import PRETOKENIZER_NAMES
from ..text.segmenters import CJK_SPLITS, SEGMENTER_NAMES
from ..version import package_version


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `tokcolumnar: error: <argparse's message>`, exit 2 (the
    usage stays in `--help`). Subparsers are built with the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tokcolumnar: error: {message}\n")


def _csv_list(s: str) -> list[str]:
    """`A,B,...` -> names; `''` -> no names. Empty names are kept so that the settings refuse
    them (`a,,b`)."""
    return s.split(",") if s else []


def special_token_roles(s: str) -> dict[str, str]:
    """`ROLE=TOKEN,ROLE=TOKEN` (a token holds no comma; it may hold `=`) or a JSON object
    `{"ROLE": "TOKEN", ...}` -> {role: token} (the role names are checked by the settings)."""
    if s.lstrip().startswith("{"):
        try:
            roles = json.loads(s)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"not a JSON object: {e}") from None
        if not isinstance(roles, dict) or not all(isinstance(v, str) for v in roles.values()):
            raise argparse.ArgumentTypeError("the JSON object must map roles to token strings")
        return roles
    out: dict[str, str] = {}
    for item in _csv_list(s):
        role, eq, token = item.partition("=")
        if not eq or not role or not token:
            raise argparse.ArgumentTypeError(f"expected ROLE=TOKEN, got {item!r}")
        out[role.strip()] = token
    return out


def add_train_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--model", choices=MODELS, default=None,
                   help="the subword model (default bpe; --preset bert: wordpiece)")
    g.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help="the vocabulary's size, special tokens and alphabet included (default "
                   "30,000; --preset subword-nmt: the number of merges)")
    g.add_argument("--min-frequency", type=int, default=None, metavar="N",
                   help="stop when the best pair's count falls below N (default 0)")
    # --special-tokens and --special-token fill one list, in the order given
    g.add_argument("--special-tokens", dest="special_tokens", action="extend",
                   type=_csv_list, default=None, metavar="A,B,...",
                   help="special tokens, given the first ids, in order (a preset's replace "
                   "its defaults; '' for none); repeatable")
    g.add_argument("--special-token", dest="special_tokens", action="append", default=None,
                   metavar="TOKEN",
                   help="one special token, which may hold a comma; repeatable, added in "
                   "order with --special-tokens")
    g.add_argument("--pre-tokenizer", default=None,
                   help=f"{', '.join(PRETOKENIZER_NAMES + SEGMENTER_NAMES)} (default "
                   "whitespace; jieba needs tokcolumnar[zh], mecab tokcolumnar[ja])")
    g.add_argument("--pattern", default=None, metavar="NAME|REGEX",
                   help="byte-level BPE's split pattern: gpt2 (default), cl100k (= llama3, "
                   "gpt4), o200k (= gpt4o), qwen2 (implies --pre-tokenizer byte-level)")
    g.add_argument("--normalizer", default=None,
                   help=f"{', '.join(NORMALIZER_NAMES)} (default none)")
    g.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None,
                   help="lowercase after normalising (--preset bert: on unless --no-lowercase)")
    g.add_argument("--end-of-word-suffix", default=None, metavar="S",
                   help="fused to each word's last character, as HF (e.g. </w>)")
    g.add_argument("--end-of-word-token", default=None, metavar="S",
                   help="a separate symbol after each word, as in the seed documents")
    g.add_argument("--continuing-subword-prefix", default=None, metavar="P",
                   help="put before every token that continues a word (WordPiece: ## by "
                   "default)")
    g.add_argument("--limit-alphabet", type=int, default=None, metavar="N",
                   help="keep only the N most frequent characters in the initial alphabet")
    g.add_argument("--initial-alphabet", default=None, metavar="CHARS",
                   help="characters always kept in the alphabet")
    g.add_argument("--max-token-length", type=int, default=None, metavar="N",
                   help="no token longer than N characters (prefix and suffix not counted)")
    g.add_argument("--tie-break", choices=TIE_BREAKS, default=None,
                   help="BPE, among equal counts: smallest ids (id: HF's, default), greatest "
                   "strings (lexical-max: subword-nmt's) or first occurrence (first-seen)")
    g.add_argument("--byte-fallback", action="store_true", default=None,
                   help="--model unigram or bpe: SentencePiece's 256 byte pieces "
                   "<0x00>..<0xFF> after the special tokens, which spell a character the "
                   "vocabulary lacks in its UTF-8 bytes")
    g.add_argument("--preset", choices=PRESETS, default=None,
                   help="a reference configuration (fixes some options, gives defaults to "
                   "others): gpt2; the LLM byte-level BPEs gpt4, gpt4o, llama3, qwen2; bert "
                   "and the word-segmenting BERTs bert-zh-wwm, bert-ja; subword-nmt; "
                   "sentencepiece (spm_train --model_type=unigram); llama2 (SentencePiece-"
                   "style BPE with byte fallback); see docs/cli.md")
    g.add_argument("--engine", choices=ENGINES, default=None,
                   help="where to count and train (default polars; duckdb: the SQL twin; ray, "
                   "spark: count on a cluster)")
    g.add_argument("--max-merges", type=int, default=None, metavar="N",
                   help="stop after N merges")
    g.add_argument("--min-score", type=float, default=None, metavar="X",
                   help="WordPiece: stop when the best pair's score falls below X")
    g.add_argument("--wordpiece-scoring", choices=WORDPIECE_SCORINGS, default=None,
                   help="WordPiece: a pair's score (likelihood, default: count(ab) / "
                   "(count(a) count(b)); frequency: count(ab))")
    g.add_argument("--unk-token", default=None, metavar="TOKEN",
                   help="the unknown token, one of the special tokens (WordPiece: [UNK] by "
                   "default; BPE: none)")
    g.add_argument("--cjk-split", choices=CJK_SPLITS, default=None,
                   help="jieba/mecab: text the dictionary does not know stays in the words the "
                   "segmenter guesses (words, default) or becomes characters (chars)")
    g.add_argument("--max-word-chars", type=int, default=None,
                   help="refuse pre-tokens longer than this (default 1,000,000)")


def add_scale_options(p: argparse.ArgumentParser, job: str = "train") -> None:
    """The memory budget, work directory and checkpoints of `train` or `count` (README "Large
    corpora"); `--max-words` for train only."""
    run = "run" if job == "train" else "count"
    g = p.add_argument_group("memory and resuming")
    g.add_argument("--memory-limit", default=None, metavar="SIZE",
                   help=f"bound the {run}'s memory: 400MB, 1.5GB, 512MiB or bytes (default: "
                   "half the physical RAM); counting spills to --work-dir beyond it"
                   + (", and so does the merge loop's state" if job == "train" else ""))
    g.add_argument("--work-dir", default=None, metavar="DIR",
                   help="spilled counts and checkpoints (default OUT.work beside --out; "
                   f"removed when the {run} succeeds)")
    g.add_argument("--resume", action="store_true",
                   help=f"continue a killed {run} with the same arguments from its work "
                   "directory")
    saved = "counting and the merge loop save their" if job == "train" else "counting saves its"
    g.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help=f"how often {saved} state (default 60)")
    if job == "train":
        g.add_argument("--max-words", type=int, default=None, metavar="N",
                       help="train on the N most frequent words only (an approximation; exact "
                       "by default)")


def add_ray_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="with --engine ray: the Ray cluster to use (default: $RAY_ADDRESS, or a "
                        "new local Ray)")


def add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="input format (default: from the file extension)")
    p.add_argument("--column", default=None, help="text column of parquet/jsonl/csv (text)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines and no summary line (errors only)")


def _keep_columns(s: str) -> list[str] | str:
    return "all" if s == "all" else _csv_list(s)


def add_encode_dataset_options(p: argparse.ArgumentParser) -> None:
    """encode's dataset options (issue 13): kept input columns, packing, parts by size,
    statistics."""
    g = p.add_argument_group("dataset layout")
    g.add_argument("--keep-columns", type=_keep_columns, default=None, metavar="A,B,...|all",
                   help="input columns of parquet/jsonl/csv written beside the outputs, row for "
                        "row (all: every column); a text input has only the text column")
    g.add_argument("--pack", type=int, default=None, metavar="N",
                   help="concatenate the documents' ids, each followed by the end-of-text "
                        "token, into rows of exactly N ids (the last one shorter); documents "
                        "are encoded without the post-processor's special tokens")
    g.add_argument("--pack-separator", default=None, metavar="TOKEN",
                   help="with --pack: the token after each document (default: the "
                        "eos_token of tokenizer_config.json beside the tokenizer, else "
                        "<|endoftext|> or another known end-of-text token for BPE, [SEP] for "
                        "WordPiece)")
    g.add_argument("--pack-drop-last", action="store_true",
                   help="with --pack: drop the last, shorter block")
    g.add_argument("--max-file-size", default=None, metavar="SIZE",
                   help="write --out as a directory of Parquet parts of about SIZE each on disk "
                        "(256MB, 1GiB, bytes), with a _SUCCESS marker written last")
    g.add_argument("--stats", action="store_true",
                   help="print tokens per word, bytes and characters per token, the unknown "
                        "rate and the tokens-per-row distribution, and write them to "
                        "OUT.stats.parquet")


def add_text_options(p: argparse.ArgumentParser) -> None:
    """The options of `report` and `compare` for reading --text files."""
    p.add_argument("--text-format", choices=FORMATS, default=None,
                   help="format of the --text files (default: from the file extension)")
    p.add_argument("--column", default=None, help="text column of parquet/jsonl/csv (text)")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument("--quiet", action="store_true", help="no summary line")


def add_truncation_options(p: argparse.ArgumentParser) -> None:
    """encode's truncation, as HF's `enable_truncation(max_length, stride, direction)`."""
    g = p.add_argument_group("truncation")
    g.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="at most N tokens per row, special tokens included (room is kept for "
                        "them), as HF's truncation")
    g.add_argument("--truncation", choices=TRUNCATION_DIRECTIONS, default=None,
                   help="with --max-length: keep the start (right, default) or the end (left) "
                        "of the text")
    g.add_argument("--stride", type=int, default=None, metavar="K",
                   help="with --max-length: write every window of the text as a row (HF's "
                        "overflowing encodings), consecutive windows sharing K tokens, with "
                        f"{OVERFLOW_COLUMN} the input row's index (0 for windows that do not "
                        "overlap)")


FORCE_HELP = ("write even where tokcolumnar did not write before: a directory gets the run's "
              "files written into it, replacing only files of the same names (every other "
              "file is left alone); a file output replaces that one file, never a directory "
              "(never an input, the current directory or /)")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="tokcolumnar", description="Columnar BPE / WordPiece "
                       "tokenizer training with Polars (and a DuckDB SQL twin).")
    p.add_argument("--version", action="version", version=f"tokcolumnar {package_version()}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a tokenizer into --out DIR")
    t.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="files, directories, globs or URIs (file://, s3://, gs://, hdfs://)")
    t.add_argument("--out", required=True, metavar="DIR",
                   help="the output directory (tokenizer.json, its side files, the tables, "
                   "run.json), replaced atomically")
    t.add_argument("--from-counts", default=None, metavar="words.parquet",
                   help="train on a words table written by `count` instead of INPUT files")
    t.add_argument("--force", action="store_true", help=FORCE_HELP)
    t.add_argument("--extend", default=None, metavar="BASE",
                   help="keep a base tokenizer (one of our output directories) and continue its "
                   "merges on the inputs up to --vocab-size (docs/extend.md)")
    add_train_options(t)
    t.add_argument("--special-token-roles", type=special_token_roles, action="append",
                   default=None, metavar="ROLE=TOKEN,...",
                   help="the transformers roles of special tokens (bos, eos, unk, sep, pad, "
                   "cls, mask), e.g. pad=[PAD],eos=</s>, or a JSON object; over the preset's; "
                   "written to tokenizer_config.json and special_tokens_map.json; repeatable")
    add_scale_options(t)
    add_input_options(t)
    add_ray_options(t)
    t.set_defaults(command_name="train")

    c = sub.add_parser("count", help="count words only (the first stage of train)")
    c.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, directories, globs or URIs (as train's)")
    c.add_argument("--out", required=True, metavar="words.parquet",
                   help="the words table (word, count, first_seen), for train --from-counts")
    c.add_argument("--force", action="store_true", help=FORCE_HELP)
    add_train_options(c)
    add_scale_options(c, job="count")
    add_input_options(c)
    add_ray_options(c)
    c.set_defaults(command_name="count")

    e = sub.add_parser("encode", help="tokenize a dataset into a Parquet column of ids")
    e.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, directories, globs or URIs: one row per line or value")
    e.add_argument("--tokenizer", required=True, metavar="DIR|tokenizer.json|FILE.tiktoken",
                   help="a training output directory, a tokenizer.json (ours or HF's) or a "
                   "tiktoken vocabulary (with --pattern)")
    e.add_argument("--pattern", default=None, metavar="NAME|REGEX",
                   help="with a .tiktoken --tokenizer: its split pattern (gpt2, cl100k, o200k, "
                   "qwen2, llama3, gpt4, gpt4o, or one of their regexes)")
    e.add_argument("--special-tokens", type=_csv_list, default=None, metavar="A,B=ID,...",
                   help="with a .tiktoken --tokenizer: its special tokens (NAME=ID, or names "
                   "numbered after the last rank)")
    e.add_argument("--out", required=True, metavar="FILE.parquet|DIR",
                   help="the Parquet output (a directory of parts with --rows-per-file, "
                   "--max-file-size or --engine ray|spark)")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.add_argument("--keep-newlines", action="store_true",
                   help="keep each text line's line ending (default: stripped)")
    e.add_argument("--word-ids", action="store_true",
                   help="add a word_ids column: each token's word index (null for special "
                   "tokens), e.g. for whole-word masking; the same as word_ids in --columns")
    e.add_argument("--columns", type=_csv_list, default=None, metavar="A,B,...",
                   help="output columns: " + ", ".join(OUTPUT_COLUMNS) + " (default "
                        + ",".join(DEFAULT_COLUMNS) + "; ids always)")
    e.add_argument("--drop-text", action="store_true",
                   help="do not write the text column beside the ids")
    e.add_argument("--no-special-tokens", action="store_true",
                   help="skip the post-processor's special tokens (HF add_special_tokens=False)")
    e.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES, metavar="N",
                   help="refuse a sequence (line or value) longer than N bytes (default 8 MiB)")
    e.add_argument("--rows-per-file", type=int, default=None, metavar="N",
                   help="write --out as a directory of Parquet parts (part-00000.parquet, ...) "
                        "of at most N rows each, with a _SUCCESS marker written last")
    e.add_argument("--timings", action="store_true",
                   help="print the wall time of each stage (read, normalize, pre-tokenize, "
                        "dedupe, model, gather, post-process, write)")
    add_encode_dataset_options(e)
    add_truncation_options(e)
    add_input_options(e)
    e.add_argument("--engine", choices=("polars", "ray", "spark"), default="polars",
                   help="ray, spark: encode on Ray or Spark; --out is then a directory of "
                        "part files")
    add_ray_options(e)
    e.set_defaults(command_name="encode")

    q = sub.add_parser("sql", help="query a training directory's tables with DuckDB")
    q.add_argument("dir", metavar="DIR", help="a training output directory")
    q.add_argument("sql", metavar="SQL", nargs="?", default=None,
                   help="the query (statements separated by ;) or the path of a .sql file")
    q.add_argument("--query", default=None, metavar="NAME",
                   help="a ready analysis query by name: " + ", ".join(ready_queries()))
    q.add_argument("--format", choices=QUERY_FORMATS, default="table",
                   help="how the result is printed or written (default table)")
    q.add_argument("--output", default=None, metavar="FILE",
                   help="write the result to FILE instead of standard output")
    q.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a named query parameter ($NAME in the SQL); repeatable")
    q.add_argument("--force", action="store_true", help=FORCE_HELP)
    q.add_argument("--allow-external", action="store_true",
                   help="let the query read and write other files, attach databases and load "
                        "extensions (off by default: the query sees only DIR's tables)")
    q.set_defaults(command_name="sql")

    x = sub.add_parser("crosscheck", help="train with both engines and compare the tables")
    x.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="files, directories, globs or URIs (as train's)")
    x.add_argument("--from-counts", default=None, metavar="words.parquet",
                   help="train on a words table written by `count` instead of INPUT files")
    add_train_options(x)
    add_input_options(x)
    x.set_defaults(command_name="crosscheck")

    r = sub.add_parser("report", help="an HTML page of charts and metrics about a trained "
                       "vocabulary (needs the 'report' extra)")
    r.add_argument("dir", metavar="DIR", help="a training output directory")
    r.add_argument("--text", nargs="+", default=[], metavar="FILE",
                   help="held-out text to measure the tokenizer on (any input encode reads)")
    r.add_argument("--out", required=True, metavar="report.html",
                   help="the HTML page to write (offline: the chart library is inlined)")
    r.add_argument("--png", default=None, metavar="DIR", help="also write each chart as PNG")
    add_text_options(r)
    r.set_defaults(command_name="report")

    m = sub.add_parser("compare", help="metrics of several tokenizers side by side on the same "
                       "files, with parity and vocabulary overlap")
    m.add_argument("tokenizers", nargs="+", metavar="DIR|tokenizer.json",
                   help="the tokenizers to compare: training directories or tokenizer.json "
                   "files")
    m.add_argument("--text", nargs="+", required=True, metavar="FILE",
                   help="the text to measure every tokenizer on (any input encode reads)")
    m.add_argument("--out", default=None, metavar="compare.html",
                   help="write the HTML page (needs the 'report' extra)")
    m.add_argument("--format", choices=("json", "csv"), default=None,
                   help="print the metrics table instead (one row per tokenizer x file)")
    m.add_argument("--png", default=None, metavar="DIR", help="also write each chart as PNG")
    add_text_options(m)
    m.set_defaults(command_name="compare")
    return p
