"""Export: a training run -> its output directory (docs/architecture.md, "Outputs").

`build_tokenizer` assembles the trained `Tokenizer` object; `tokenizer.json` is its one
serialisation, and `vocab.json`, `merges.txt`, `codes.txt` and `vocab.txt` are written from it
when they can hold the vocabulary exactly (`inexact_side_files`, which also decides when
`tokenizer.json` itself cannot: it is then written as `tokenizer.tokcolumnar.json`). `export`
writes everything into a temporary directory that replaces the target only once all is
written, under the rules of `outputs` (what an output may replace)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from .config import TrainConfig
from .corpus.counts_file import counts_metadata
from .corpus.sources import Source, expand_inputs, file_digests
from .errors import TokcolumnarError, warn
from .hfconfig import transformers_files
from .llama2_export import (
    bpe_sentencepiece_file,
    llama2_decoder,
    llama2_normalizer,
    sentencepiece_merges,
)
from .llm_presets import llm_post_processor
from .memory import RunMemory
from .models.base import Model
from .models.bpe import BPEModel
from .models.wordpiece import WordPieceModel
from .outputs import output_dir, write_parquet
from .presets import BERT_PRESETS
from .text.decoders import (
    BPEDecoder,
    ByteFallbackDecoder,
    ByteLevelDecoder,
    Decoder,
    MetaspaceDecoder,
    SequenceDecoder,
    WordPieceDecoder,
)
from .text.normalizers import Normalizer
from .text.postprocessors import bert_template
from .text.pretokenizers import PreTokenizer, WholeSequence
from .text.segmenters import Segmenter
from .tiktoken_format import TIKTOKEN_FILE, tiktoken_ranks, tiktoken_record, tiktoken_text
from .tokenizer import OWN_TOKENIZER_FILE, AddedToken, Tokenizer
from .training.extend import extended_tokenizer
from .training.tables import WordsFile
from .unigram_export import normalizer_spec, sentencepiece_file, unigram_parts
from .version import package_version

# A token the line-based side files cannot hold exactly. merges.txt and codes.txt lines are
# `left right`: HF splits each line on " " and needs two parts, skips lines that start with
# "#version", and HF's, Python's (universal newlines) and subword-nmt's readers end a line at
# \n or \r. vocab.txt lines are one token each: lines end at \n or \r, and HF's reader drops
# trailing whitespace (Rust's `trim_end`, the same set as the regex `\s`).
PAIR_FILE_BREAKERS = r"[ \n\r]"
LINE_FILE_BREAKERS = r"[\n\r]|\s$"


@dataclass
class TrainResult:
    """Everything a run produced: the three tables, the settings and the stage timings."""

    config: TrainConfig
    #: the words table, or the file it was written to (a loop on disk: `tables.WordsFile`),
    #: read on first use of `words`
    words_table: pl.DataFrame | WordsFile
    merges: pl.DataFrame
    vocab: pl.DataFrame
    normalizer: Normalizer | None
    pretokenizer: PreTokenizer
    timings: dict[str, float] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    #: Bytes the count spilled to the work directory (0: it fitted in memory).
    spilled_bytes: int = 0
    #: What the run held of the memory (run.json's `memory`; None: not a run of `train`).
    memory: RunMemory | None = None
    #: --model unigram: one row per EM round (pieces before, after EM, after pruning).
    rounds: pl.DataFrame | None = None
    #: --model unigram: one row per piece dropped (round, reason, score, loss...).
    pruned: pl.DataFrame | None = None

    @property
    def loop_on_disk(self) -> bool:
        """The merge loop kept its state in files of the work directory (`ondisk`)."""
        plan = self.memory.plan if self.memory is not None else None
        return plan is not None and plan.disk

    @property
    def words(self) -> pl.DataFrame:
        """The words table: word, count, first_seen, tokens, ids."""
        if isinstance(self.words_table, WordsFile):
            self.words_table = self.words_table.load()
        return self.words_table

    @words.setter
    def words(self, table: pl.DataFrame) -> None:
        self.words_table = table

    @property
    def n_words(self) -> int:
        """The distinct words (the words table's height, without reading a `WordsFile`)."""
        return self.words_table.height

    @property
    def word_occurrences(self) -> int:
        """The sum of the words' counts (without reading a `WordsFile`)."""
        table = self.words_table
        if isinstance(table, WordsFile):
            return table.occurrences
        return int(table.get_column("count").sum()) if table.height else 0

    def tokenizer(self) -> Tokenizer:
        """The trained tokenizer (the one `tokenizer.json` holds)."""
        return build_tokenizer(self.config, self.vocab, self.merges)

    def save(self, out_dir: str | Path, force: bool = False) -> Path:
        """Write the output files into `out_dir` (see `train`'s `out_dir` for the rules)."""
        return export(self, out_dir, force=force)


def hf_merges(merges: pl.DataFrame) -> list[tuple[str, str]]:
    """Merges in HF order: a pair merged twice (HF does this when a token id is reused) keeps
    only its last rank, as HF's merge map does."""
    last = merges.group_by("left", "right").agg(pl.col("rank").max()).sort("rank")
    return list(zip(last.get_column("left").to_list(), last.get_column("right").to_list()))


def build_tokenizer(cfg: TrainConfig, vocab: pl.DataFrame, merges: pl.DataFrame) -> Tokenizer:
    """The tokenizer a training run made: its model with the settings' normalizer,
    pre-tokenizer, decoder, post-processor and special tokens. `tokenizer.json` is this
    object's serialisation (`Tokenizer.to_dict`)."""
    if cfg.model == "unigram":
        normalizer, _ = cfg.text_components()
        meta = vocab.filter(pl.col("kind") == "special").get_column("token").to_list()
        pieces = vocab.filter(pl.col("kind") == "piece")
        return Tokenizer.from_unigram(unigram_parts(
            pieces.get_column("token").to_list(), pieces.get_column("score").to_list(), meta,
            normalizer, byte_fallback=bool((vocab["kind"] == "byte").any())))
    ids = dict(zip(vocab.get_column("token").to_list(), vocab.get_column("id").to_list()))
    model: Model
    decoder: Decoder | None
    if cfg.model == "wordpiece":
        prefix = cfg.continuing_subword_prefix or "##"
        model = WordPieceModel(ids, unk_token=cfg.unk_token or "[UNK]",
                               continuing_subword_prefix=prefix)
        decoder = WordPieceDecoder(prefix=prefix, cleanup=True)
    elif cfg.extend is not None:  # the base's tokenizer with the extended model
        return extended_tokenizer(cfg, ids, hf_merges(merges))
    else:
        pairs = hf_merges(merges)
        if cfg.preset == "llama2":  # every pair of pieces by score (llama2_export)
            pairs = sentencepiece_merges(vocab.get_column("token").to_list(),
                                         vocab.get_column("kind").to_list())
        # fuse_unk as Llama 2 (and transformers' SentencePiece conversion) set it with byte
        # fallback: with all 256 byte pieces no character is unknown, so it never acts
        model = BPEModel(ids, pairs, cfg.continuing_subword_prefix, cfg.end_of_word_suffix,
                         cfg.end_of_word_token, cfg.unk_token,
                         fuse_unk=bool(cfg.byte_fallback), byte_fallback=bool(cfg.byte_fallback))
        decoder = None
        if cfg.preset == "llama2":
            decoder = llama2_decoder()
        elif cfg.pre_tokenizer == "byte-level":
            decoder = ByteLevelDecoder(add_prefix_space=True, trim_offsets=True, use_regex=True)
        elif cfg.end_of_word_suffix:
            decoder = BPEDecoder(suffix=cfg.end_of_word_suffix)
        elif cfg.byte_fallback:  # byte pieces back to their text (HF then joins with "")
            decoder = (SequenceDecoder([ByteFallbackDecoder(), MetaspaceDecoder()])
                       if cfg.pre_tokenizer == "metaspace" else ByteFallbackDecoder())
    post = llm_post_processor(cfg.preset, ids)
    if cfg.model == "wordpiece" and cfg.preset in BERT_PRESETS:
        post = bert_template(ids)
    specials = vocab.filter(pl.col("kind") == "special")
    added = [AddedToken(t, int(i)) for i, t in zip(specials.get_column("id").to_list(),
                                                   specials.get_column("token").to_list())
             if t in cfg.special_tokens]
    normalizer, pretokenizer = cfg.text_components()
    if cfg.preset == "llama2":  # its normalizers, no pre-tokenizer (docs/llama2.md)
        normalizer, pretokenizer = llama2_normalizer(), WholeSequence()
    return Tokenizer(model, normalizer, pretokenizer, decoder, post, added)


def _example(frame: pl.DataFrame, columns: tuple[str, ...]) -> str:
    return " + ".join(repr(frame.get_column(c).item(0)) for c in columns)


def hf_unreadable_merges(cfg: TrainConfig, merges: pl.DataFrame) -> pl.DataFrame:
    """The merges HF's BPE model would read as another token. HF makes the token of a merge
    `left right` as `left + right[len(prefix):]` when a continuing-subword prefix is set (it
    panics when `right` is shorter than the prefix), and `left + right` otherwise; a merge is
    read exactly only when that string is the merge's token (its right side then carries the
    prefix). With --end-of-word-token and a prefix, a merge onto the end-of-word token is not."""
    right = pl.col("right")
    prefix = cfg.continuing_subword_prefix
    if prefix is not None:
        hf_token = pl.when(right.str.starts_with(prefix)).then(
            pl.col("left") + right.str.slice(len(prefix))).otherwise(pl.lit(None))
    else:
        hf_token = pl.col("left") + right
    return merges.filter(hf_token.is_null() | (hf_token != pl.col("token")))


def inexact_side_files(result: TrainResult) -> dict[str, str]:
    """The one place deciding which output files a run cannot write so that their readers get
    its tokenizer back exactly, each with the reason (the file is then not written):
    `tokenizer.json` when HF's format cannot express the settings (--end-of-word-token) or
    reads a merge as another token (it is then written as OWN_TOKENIZER_FILE, for our loader);
    the line-based side files (`merges.txt` and, with --preset subword-nmt, `codes.txt` for
    BPE; `vocab.txt` for WordPiece) when a token breaks their lines or HF reads a merge of
    them as another token. `vocab.json` and the Parquet tables hold any token and are always
    written."""
    cfg = result.config
    out: dict[str, str] = {}
    if cfg.model == "bpe":
        m = result.merges.select("left", "right", "token")
        misread = hf_unreadable_merges(cfg, m)
        if cfg.end_of_word_token is not None:
            out["tokenizer.json"] = (
                f"HF's BPE has no end-of-word token (--end-of-word-token "
                f"{cfg.end_of_word_token!r}, a symbol after every word), so HF would encode "
                f"differently; the tokenizer is in {OWN_TOKENIZER_FILE} (tokcolumnar loads it)")
        elif misread.height:
            out["tokenizer.json"] = (
                f"HF reads {misread.height:,} merges as another token (e.g. "
                f"{_example(misread, ('left', 'right'))} with the prefix "
                f"{cfg.continuing_subword_prefix!r}); the tokenizer is in "
                f"{OWN_TOKENIZER_FILE} (tokcolumnar loads it)")
        bad = m.filter(pl.col("left").str.contains(PAIR_FILE_BREAKERS)
                       | pl.col("right").str.contains(PAIR_FILE_BREAKERS))
        if bad.height:
            reason = (f"{bad.height:,} merges have a token with a space or a line break (e.g. "
                      f"{_example(bad, ('left', 'right'))}), which its `left right` lines "
                      "cannot hold; tokenizer.json has every merge")
            out["merges.txt"] = reason
            if cfg.preset == "subword-nmt":
                out["codes.txt"] = reason
        elif misread.height:
            out["merges.txt"] = (f"HF reads {misread.height:,} merges as another token (e.g. "
                                 f"{_example(misread, ('left', 'right'))} with the prefix "
                                 f"{cfg.continuing_subword_prefix!r}); tokenizer.json has "
                                 "every merge")
        else:
            hidden = m.filter(pl.col("left").str.starts_with("#version"))
            if hidden.height:
                out["merges.txt"] = (f"the merge {_example(hidden, ('left', 'right'))} would be "
                                     "a line starting with '#version', which HF skips; "
                                     "tokenizer.json has every merge")
    elif cfg.model != "unigram":  # Unigram writes no line-based side file
        bad = result.vocab.filter(pl.col("token").str.contains(LINE_FILE_BREAKERS))
        if bad.height:
            out["vocab.txt"] = (f"{bad.height:,} tokens have a line break or end with whitespace "
                                f"(e.g. {_example(bad, ('token',))}), which its one-token lines "
                                "cannot hold (HF drops trailing whitespace); tokenizer.json has "
                                "the vocabulary")
    if "tokenizer.json" in out:  # the side files' reasons point to the tokenizer file we write
        out = {k: v.replace("tokenizer.json has", f"{OWN_TOKENIZER_FILE} has")
               for k, v in out.items()}
    return out


def fingerprint(src: Source, real_dirs: dict[str, str] | None = None) -> dict[str, Any]:
    """A local file input's record in `run.json`: its path resolved (symbolic links
    followed: a file that is no link as its directory's resolved path, `real_dirs` keeping
    them, one resolution per directory of a folder of many files), size, mtime and a hash of
    its first and last MiB (`sources.file_digests`, read once per run: the work directory's
    fingerprint shares it)."""
    path = str(src.path)
    try:
        link = os.lstat(path)
        if not stat.S_ISREG(link.st_mode) and not (
                stat.S_ISLNK(link.st_mode) and stat.S_ISREG(os.stat(path).st_mode)):
            return {"path": path}
        digests = file_digests(src)
    except (OSError, TokcolumnarError):
        return {"path": path}
    if stat.S_ISLNK(link.st_mode) or real_dirs is None:
        resolved = str(Path(path).resolve())
    else:
        parent, name = os.path.split(path)
        if parent not in real_dirs:
            real_dirs[parent] = str(Path(parent or ".").resolve())
        resolved = os.path.join(real_dirs[parent], name)
    return {"path": resolved, "bytes": digests.size, "mtime_ns": digests.mtime_ns,
            "head_tail_blake2b": digests.head_tail_blake2b}


def versions(pretokenizer: PreTokenizer | None = None) -> dict[str, str]:
    """The versions of the packages a run used (a segmenter's libraries too)."""
    out = {"tokcolumnar": package_version()}
    for pkg in ("polars", "pyarrow", "numpy", "duckdb"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    if isinstance(pretokenizer, Segmenter):
        out.update(pretokenizer.versions())
    return out


def export(result: TrainResult, out_dir: str | Path, force: bool = False) -> Path:
    """Write every output file of a training run into `out_dir`, replaced atomically (refused
    when `out_dir` holds something that is not ours: see `outputs.check_target`)."""
    with output_dir(out_dir, inputs=result.inputs, force=force) as tmp:
        write_outputs(result, tmp)
    return Path(out_dir)


def write_outputs(result: TrainResult, directory: Path) -> None:
    """Write every output file of a training run into an existing (empty) directory. A
    side file that cannot be written exactly (`inexact_side_files`) is left out, with the
    reason in `run.json` (`skipped_files`) and in a `TokcolumnarWarning`."""
    # the three tables are written by Polars in a thread (it releases the GIL) while this one
    # builds and serialises the JSON files (medium/en: ~0.06 of ~0.2 s overlapped)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokcolumnar-export") as pool:
        tables = pool.submit(_write_tables, result, directory)
        try:
            _write_json_files(result, directory)
        except BaseException:
            tables.exception()  # the tables' thread done before the error goes up
            raise
        tables.result()


#: The Parquet tables of a training run.
TABLE_FILES = ("merges.parquet", "vocab.parquet", "words.parquet")


def _write_tables(result: TrainResult, directory: Path) -> None:
    write_parquet(result.merges, directory / "merges.parquet", "merges")
    write_parquet(result.vocab, directory / "vocab.parquet", "vocab")
    table = result.words_table
    if isinstance(table, WordsFile):  # written whole already, marker and settings included
        if table.owned:  # the run's own file, in its work directory
            shutil.move(table.path, directory / "words.parquet")
            table.path, table.owned = directory / "words.parquet", False
        else:
            shutil.copyfile(table.path, directory / "words.parquet")
    else:
        write_parquet(table, directory / "words.parquet", "words",
                      counts_metadata(result.config))
    if result.rounds is not None:
        write_parquet(result.rounds, directory / "rounds.parquet", "rounds")
    if result.pruned is not None:
        write_parquet(result.pruned, directory / "pruned.parquet", "pruned")


def _write_json_files(result: TrainResult, directory: Path) -> None:
    """`tokenizer.json`, its side files (with transformers' `tokenizer_config.json` and
    `special_tokens_map.json`: `hfconfig`) and `run.json`."""
    cfg = result.config
    tokenizer = result.tokenizer()
    tokenizer_dict = tokenizer.to_dict()
    skipped = inexact_side_files(result)
    tokenizer_file = OWN_TOKENIZER_FILE if "tokenizer.json" in skipped else "tokenizer.json"
    # the files this run writes, named in run.json: a later `--force` run into the same
    # directory removes those of them it does not write itself, and nothing else (`outputs`)
    written = [tokenizer_file, *TABLE_FILES, "run.json"]
    if result.rounds is not None:
        written.append("rounds.parquet")
    if result.pruned is not None:
        written.append("pruned.parquet")
    _write_text(directory / tokenizer_file, None,
                json.dumps(tokenizer_dict, ensure_ascii=False))
    if tokenizer_file == "tokenizer.json":  # (transformers could not load the other one)
        for name, obj in transformers_files(cfg, tokenizer_dict).items():
            _write_text(directory / name, written,
                        json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    vocab = tokenizer_dict["model"]["vocab"]
    if cfg.model == "bpe":
        _write_text(directory / "vocab.json", written, json.dumps(vocab, ensure_ascii=False))
        if "merges.txt" not in skipped:
            lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in tokenizer_dict["model"]["merges"]]
            _write_text(directory / "merges.txt", written, "\n".join(lines) + "\n")
        if cfg.preset == "subword-nmt" and "codes.txt" not in skipped:
            codes = ["#version: 0.2"] + [
                f"{a} {b}" for a, b in zip(result.merges.get_column("left").to_list(),
                                           result.merges.get_column("right").to_list())]
            _write_text(directory / "codes.txt", written, "\n".join(codes) + "\n")
        if cfg.preset == "llama2":  # SentencePiece's own file, for its processor
            (directory / "tokenizer.model").write_bytes(bpe_sentencepiece_file(
                result.vocab.get_column("token").to_list(),
                result.vocab.get_column("kind").to_list()))
            written.append("tokenizer.model")
    elif cfg.model == "unigram":  # SentencePiece's own file, for its processor
        pieces = result.vocab.filter(pl.col("kind") == "piece")
        (directory / "tokenizer.model").write_bytes(sentencepiece_file(
            pieces.get_column("token").to_list(), pieces.get_column("score").to_list(),
            normalizer_spec(cfg.normalizer),
            byte_fallback=bool((result.vocab["kind"] == "byte").any())))
        written.append("tokenizer.model")
    elif "vocab.txt" not in skipped:
        tokens = sorted(vocab.items(), key=lambda kv: kv[1])
        _write_text(directory / "vocab.txt", written, "".join(t + "\n" for t, _ in tokens))
    tiktoken = _write_tiktoken(tokenizer, directory, written)
    run = {
        "tool": "tokcolumnar", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": cfg.to_dict(), "versions": versions(tokenizer.pre_tokenizer),
        "timings_s": {k: round(v, 4) for k, v in result.timings.items()},
        "inputs": input_fingerprints(result.inputs, cfg.format),
        "stats": {"words": result.n_words,
                  "word_occurrences": result.word_occurrences,
                  "merges": result.merges.height, "vocab_size": result.vocab.height,
                  "spilled_bytes": result.spilled_bytes,
                  "merge_loop_on_disk": result.loop_on_disk},
        **({"memory": result.memory.record()} if result.memory is not None else {}),
        "skipped_files": skipped,
        "files": sorted(written),
    }
    if tiktoken is not None:  # the pattern and special tokens tiktoken users need
        run["tiktoken"] = tiktoken
    _write_text(directory / "run.json", None, run_json_text(run))
    for name, reason in skipped.items():
        warn(f"{name} not written: {reason}")


def _write_tiktoken(tokenizer: Tokenizer, directory: Path, written: list[str]
                    ) -> dict[str, Any] | None:
    """`tokenizer.tiktoken` of a byte-level BPE that tiktoken can run (`tiktoken_format`);
    returns run.json's `tiktoken` record (None: not such a run). A vocabulary tiktoken cannot
    hold (a byte without a token: trained without the 256 bytes as initial alphabet) is not
    written, the record saying why (quietly: the user did not ask for tiktoken's file)."""
    record = tiktoken_record(tokenizer)
    if record is None:
        return None
    try:
        ranks = tiktoken_ranks(tokenizer)
    except TokcolumnarError as e:
        return {"file": None, "not_written": str(e)}
    _write_text(directory / TIKTOKEN_FILE, written, tiktoken_text(ranks))
    return record


#: Stands in `run.json`'s text for its list of inputs, written one input a line.
_INPUTS_HERE = "\x00inputs\x00"


def run_json_text(run: dict[str, Any]) -> str:
    """`run.json`'s text: indented, with each input's record on one line (a folder of 10,000
    inputs: `json` indents in Python, ~0.1 s for their 40,000 values, and encodes one line
    in C)."""
    inputs = run["inputs"]
    text = json.dumps({**run, "inputs": _INPUTS_HERE}, indent=2, ensure_ascii=False) + "\n"
    encode = json.JSONEncoder(ensure_ascii=False).encode  # one encoder for every line
    lines = ",\n".join("    " + encode(x) for x in inputs)
    return text.replace(json.dumps(_INPUTS_HERE), f"[\n{lines}\n  ]" if inputs else "[]", 1)


def _write_text(path: Path, written: list[str] | None, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    if written is not None:
        written.append(path.name)


def input_fingerprints(inputs: list[str], fmt: str | None) -> list[dict[str, Any]]:
    """`run.json`'s record of the inputs (informative: a failure records the paths only)."""
    if not inputs:
        return []
    real_dirs: dict[str, str] = {}
    try:
        return [fingerprint(s, real_dirs) if s.kind == "file" and s.uri is None
                else {"path": s.label}
                for s in expand_inputs(inputs, fmt)]
    except Exception:  # noqa: BLE001 - fingerprints are informative only
        return [{"path": p} for p in inputs]
