"""Exporters: a `TrainResult` -> the output directory (DESIGN.md §2). `export` writes every file
into a temporary directory that replaces the target only once all are written, under the rules
of `outputs` (what an output may replace)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from .errors import warn
from .outputs import output_dir, write_parquet

# A token the line-based side files cannot hold exactly. merges.txt and codes.txt lines are
# `left right`: HF splits each line on " " and needs two parts, skips lines that start with
# "#version", and HF's, Python's (universal newlines) and subword-nmt's readers end a line at
# \n or \r. vocab.txt lines are one token each: lines end at \n or \r, and HF's reader drops
# trailing whitespace (Rust's `trim_end`, the same set as the regex `\s`).
PAIR_FILE_BREAKERS = r"[ \n\r]"
LINE_FILE_BREAKERS = r"[\n\r]|\s$"

BYTE_LEVEL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                      "use_regex": True}


def hf_merges(merges: pl.DataFrame) -> list[tuple[str, str]]:
    """Merges in HF order: a pair merged twice (HF does this when a token id is reused) keeps
    only its last rank, as HF's merge map does."""
    last = merges.group_by("left", "right").agg(pl.col("rank").max()).sort("rank")
    return list(zip(last.get_column("left").to_list(), last.get_column("right").to_list()))


def vocab_dict(vocab: pl.DataFrame) -> dict[str, int]:
    return dict(zip(vocab.get_column("token").to_list(), vocab.get_column("id").to_list()))


def decoder_json(result: Any) -> dict[str, Any] | None:
    cfg = result.config
    if cfg.model == "wordpiece":
        return {"type": "WordPiece", "prefix": cfg.continuing_subword_prefix or "##",
                "cleanup": True}
    if cfg.pre_tokenizer == "byte-level":
        return dict(BYTE_LEVEL_DECODER)
    if cfg.end_of_word_suffix:
        return {"type": "BPEDecoder", "suffix": cfg.end_of_word_suffix}
    return None


def model_json(result: Any) -> dict[str, Any]:
    cfg = result.config
    vocab = vocab_dict(result.vocab)
    if cfg.model == "wordpiece":
        from .wordpiece_trainer import wordpiece_model_json

        return wordpiece_model_json(result, vocab)
    return {
        "type": "BPE", "dropout": None, "unk_token": cfg.unk_token,
        "continuing_subword_prefix": cfg.continuing_subword_prefix,
        "end_of_word_suffix": cfg.end_of_word_suffix, "fuse_unk": False, "byte_fallback": False,
        "ignore_merges": False, "vocab": vocab,
        "merges": [[a, b] for a, b in hf_merges(result.merges)],
    }


def tokenizer_json(result: Any) -> dict[str, Any]:
    """The HF `tokenizer.json` object for a training result."""
    cfg = result.config
    vocab = result.vocab
    specials = vocab.filter(pl.col("kind") == "special")
    added = [{"id": int(i), "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, t in zip(specials.get_column("id").to_list(),
                             specials.get_column("token").to_list())
             if t in cfg.special_tokens]
    post = None
    if cfg.model == "wordpiece" and cfg.preset == "bert":
        from .postprocessors import bert_template

        post = bert_template(vocab_dict(vocab)).to_hf()
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": result.normalizer.to_hf() if result.normalizer else None,
        "pre_tokenizer": result.pretokenizer.to_hf(),
        "post_processor": post,
        "decoder": decoder_json(result),
        "model": model_json(result),
    }


def _example(frame: pl.DataFrame, columns: tuple[str, ...]) -> str:
    return " + ".join(repr(frame.get_column(c).item(0)) for c in columns)


def inexact_side_files(result: Any) -> dict[str, str]:
    """Which of the run's line-based side files (`merges.txt` and, with --preset subword-nmt,
    `codes.txt` for BPE; `vocab.txt` for WordPiece) cannot be written so that their readers get
    the tokens back exactly, each with the reason. `tokenizer.json`, `vocab.json` and the
    Parquet tables hold any token and are always written."""
    cfg = result.config
    out: dict[str, str] = {}
    if cfg.model == "bpe":
        m = result.merges.select("left", "right")
        bad = m.filter(pl.col("left").str.contains(PAIR_FILE_BREAKERS)
                       | pl.col("right").str.contains(PAIR_FILE_BREAKERS))
        if bad.height:
            reason = (f"{bad.height:,} merges have a token with a space or a line break (e.g. "
                      f"{_example(bad, ('left', 'right'))}), which its `left right` lines "
                      "cannot hold; tokenizer.json has every merge")
            out["merges.txt"] = reason
            if cfg.preset == "subword-nmt":
                out["codes.txt"] = reason
        else:
            hidden = m.filter(pl.col("left").str.starts_with("#version"))
            if hidden.height:
                out["merges.txt"] = (f"the merge {_example(hidden, ('left', 'right'))} would be "
                                     "a line starting with '#version', which HF skips; "
                                     "tokenizer.json has every merge")
    else:
        bad = result.vocab.filter(pl.col("token").str.contains(LINE_FILE_BREAKERS))
        if bad.height:
            out["vocab.txt"] = (f"{bad.height:,} tokens have a line break or end with whitespace "
                                f"(e.g. {_example(bad, ('token',))}), which its one-token lines "
                                "cannot hold (HF drops trailing whitespace); tokenizer.json has "
                                "the vocabulary")
    return out


def fingerprint(path: str) -> dict[str, Any]:
    """Size, mtime and a hash of the first and last MiB (cheap on large corpora)."""
    p = Path(path)
    if not p.is_file():
        return {"path": path}
    st = p.stat()
    h = hashlib.blake2b(digest_size=16)
    with open(p, "rb") as f:
        h.update(f.read(1 << 20))
        if st.st_size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read())
    return {"path": str(p.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns,
            "head_tail_blake2b": h.hexdigest()}


def versions() -> dict[str, str]:
    out = {}
    for pkg in ("tokcolumnar", "polars", "pyarrow", "numpy", "duckdb"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def export(result: Any, out_dir: str | Path, force: bool = False) -> Path:
    """Write every output file of a training run into `out_dir`, replaced atomically (refused
    when `out_dir` holds something that is not ours: see `outputs.check_target`)."""
    with output_dir(out_dir, inputs=result.inputs, force=force) as tmp:
        write_outputs(result, tmp)
    return Path(out_dir)


def write_outputs(result: Any, directory: Path) -> None:
    """Write every output file of a training run into an existing (empty) directory. A
    side file that cannot be written exactly (`inexact_side_files`) is left out, with the
    reason in `run.json` (`skipped_files`) and in a `TokcolumnarWarning`."""
    from .corpus import expand_inputs

    cfg = result.config
    tok_json = tokenizer_json(result)
    skipped = inexact_side_files(result)
    inputs: list[dict[str, Any]] = []
    if result.inputs:
        try:
            inputs = [fingerprint(str(s.path)) if s.kind == "file" else {"path": s.label}
                      for s in expand_inputs(result.inputs, cfg.format)]
        except Exception:  # noqa: BLE001 - fingerprints are informative only
            inputs = [{"path": p} for p in result.inputs]
    write_parquet(result.merges, directory / "merges.parquet", "merges")
    write_parquet(result.vocab, directory / "vocab.parquet", "vocab")
    write_parquet(result.words, directory / "words.parquet", "words")
    (directory / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False),
                                              encoding="utf-8")
    vocab = tok_json["model"]["vocab"]
    if cfg.model == "bpe":
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False),
                                              encoding="utf-8")
        if "merges.txt" not in skipped:
            lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in tok_json["model"]["merges"]]
            (directory / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if cfg.preset == "subword-nmt" and "codes.txt" not in skipped:
            codes = ["#version: 0.2"] + [
                f"{a} {b}" for a, b in zip(result.merges.get_column("left").to_list(),
                                           result.merges.get_column("right").to_list())]
            (directory / "codes.txt").write_text("\n".join(codes) + "\n", encoding="utf-8")
    elif "vocab.txt" not in skipped:
        tokens = sorted(vocab.items(), key=lambda kv: kv[1])
        (directory / "vocab.txt").write_text("".join(t + "\n" for t, _ in tokens),
                                             encoding="utf-8")
    run = {
        "tool": "tokcolumnar", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": cfg.to_dict(), "versions": versions(),
        "timings_s": {k: round(v, 4) for k, v in result.timings.items()},
        "inputs": inputs,
        "stats": {"words": result.words.height,
                  "word_occurrences": int(result.words.get_column("count").sum()),
                  "merges": result.merges.height, "vocab_size": result.vocab.height},
        "skipped_files": skipped,
    }
    (directory / "run.json").write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    for name, reason in skipped.items():
        warn(f"{name} not written: {reason}")
