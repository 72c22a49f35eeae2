"""Exporters: a `TrainResult` -> the output directory (DESIGN.md §2), written atomically: every
file goes into a temporary directory that replaces the target only once all are written."""

from __future__ import annotations

import hashlib
import json
import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from .atomic import atomic_dir

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


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    df.write_parquet(path, compression="zstd", statistics=True)


def export(result: Any, out_dir: str | Path) -> Path:
    """Write every output file of a training run into `out_dir` (replaced atomically)."""
    from .corpus import expand_inputs

    cfg = result.config
    tok_json = tokenizer_json(result)
    inputs: list[dict[str, Any]] = []
    if result.inputs:
        try:
            inputs = [fingerprint(str(s.path)) if s.kind == "file" else {"path": s.label}
                      for s in expand_inputs(result.inputs, cfg.format)]
        except Exception:  # noqa: BLE001 - fingerprints are informative only
            inputs = [{"path": p} for p in result.inputs]
    with atomic_dir(out_dir) as tmp:
        write_parquet(result.merges, tmp / "merges.parquet")
        write_parquet(result.vocab, tmp / "vocab.parquet")
        write_parquet(result.words, tmp / "words.parquet")
        (tmp / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False),
                                            encoding="utf-8")
        vocab = tok_json["model"]["vocab"]
        if cfg.model == "bpe":
            (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False),
                                            encoding="utf-8")
            lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in tok_json["model"]["merges"]]
            (tmp / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
            if cfg.preset == "subword-nmt":
                codes = ["#version: 0.2"] + [
                    f"{a} {b}" for a, b in zip(result.merges.get_column("left").to_list(),
                                               result.merges.get_column("right").to_list())]
                (tmp / "codes.txt").write_text("\n".join(codes) + "\n", encoding="utf-8")
        else:
            tokens = sorted(vocab.items(), key=lambda kv: kv[1])
            (tmp / "vocab.txt").write_text("".join(t + "\n" for t, _ in tokens),
                                           encoding="utf-8")
        run = {
            "tool": "tokcolumnar", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "settings": cfg.to_dict(), "versions": versions(),
            "timings_s": {k: round(v, 4) for k, v in result.timings.items()},
            "inputs": inputs,
            "stats": {"words": result.words.height,
                      "word_occurrences": int(result.words.get_column("count").sum()),
                      "merges": result.merges.height, "vocab_size": result.vocab.height},
        }
        (tmp / "run.json").write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    return Path(out_dir)
