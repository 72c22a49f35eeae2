"""Benchmark: `--preset bert` WordPiece training against HF `WordPieceTrainer` (BertNormalizer +
BertPreTokenizer, same special tokens and vocab size), in the same run.

Each run is a fresh subprocess; ours and HF's alternate so that machine load affects both alike.
For every run: wall time of the training call (files written included; interpreter start-up
and imports excluded), the child's CPU time, and its peak RSS (`ru_maxrss` from `wait4`).
Prints one line per run, then the medians and the ratios ours / HF.

    python scripts/bench_wordpiece.py [--corpus medium/en.txt] [--vocab-size 30000]
                                      [--runs 3] [--scoring likelihood|frequency] [--json F]
    python scripts/bench_wordpiece.py --quality [--corpus ...]...   # docs/wordpiece.md

`--quality` instead trains both scorings (`--preset bert`) on 90% of each corpus's lines and
reports, on the other 10% (the last lines, or every tenth with `--split interleaved`),
fertility (tokens per word, [CLS]/[SEP] not counted) and the unknown rate (share of words that
became [UNK]); words are BERT pre-tokens.

HF has no likelihood scoring: its `WordPieceTrainer` is BPE by pair frequency, so the default
compares our likelihood (PMI) trainer with the trainer BERT users actually run; `--scoring
frequency` compares like with like."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

OURS = r"""
import json, sys, time
import tokcolumnar as tc
path, out, vs, scoring = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter(); c0 = time.process_time()
r = tc.train(path, preset="bert", vocab_size=vs, wordpiece_scoring=scoring, out_dir=out,
             show_progress=False)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "vocab": r.vocab.height, "timings": r.timings}))
"""

HF = r"""
import json, sys, time
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
path, out, vs, scoring = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter(); c0 = time.process_time()
tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tok.normalizer = normalizers.BertNormalizer()
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
tok.train([path], trainers.WordPieceTrainer(vocab_size=vs, special_tokens=SPECIALS,
                                            show_progress=False))
tok.save(out + "/tokenizer.json")
tok.model.save(out)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "vocab": tok.get_vocab_size()}))
""".replace("SPECIALS", repr(SPECIALS))


def run_measured(code: str, args: list[str]) -> dict:
    """Run a child and read its own peak RSS with wait4 (before anything else reaps it)."""
    env = {**os.environ, "TOKCOLUMNAR_QUIET": "1"}
    with tempfile.TemporaryFile("w+") as fout, tempfile.TemporaryFile("w+") as ferr:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=fout, stderr=ferr,
                                env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        fout.seek(0)
        ferr.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"benchmark child failed:\n{ferr.read()}")
        res = json.loads(fout.read().strip().splitlines()[-1])
    res["rss_mib"] = usage.ru_maxrss / 1024
    return res


def quality(paths: list[Path], vocab_size: int, out_json: str | None, split: str) -> int:
    import time

    import polars as pl

    import tokcolumnar as tc
    from tokcolumnar.models.wordpiece import WordPieceModel

    rows = []
    with tempfile.TemporaryDirectory(prefix="wp_quality_") as tmp:
        for path in paths:
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            if split == "tail":  # the last 10% of the file: later chapters / other works
                cut = len(lines) * 9 // 10
                train_lines, test_lines = lines[:cut], lines[cut:]
            else:  # every tenth line
                train_lines = [x for i, x in enumerate(lines) if i % 10 != 9]
                test_lines = [x for i, x in enumerate(lines) if i % 10 == 9]
            train_f, test_f = Path(tmp) / f"{path.stem}.train", Path(tmp) / f"{path.stem}.test"
            train_f.write_text("".join(train_lines), encoding="utf-8")
            test_f.write_text("".join(test_lines), encoding="utf-8")
            test_words = tc.count_words(str(test_f), preset="bert")
            train_words = tc.count_words(str(train_f), preset="bert")
            counts = test_words.get_column("count").cast(pl.Float64)
            total = float(counts.sum())
            oov_words = test_words.join(train_words.select("word"), on="word", how="anti")
            for scoring in ("likelihood", "frequency"):
                t0 = time.perf_counter()
                r = tc.train(from_counts=train_words, preset="bert", vocab_size=vocab_size,
                             wordpiece_scoring=scoring, show_progress=False)
                wall = time.perf_counter() - t0
                vocab = dict(zip(r.vocab["token"].to_list(), r.vocab["id"].to_list()))
                model = WordPieceModel(vocab)
                ids = model.encode_words(test_words.get_column("word"))
                n = ids.list.len().cast(pl.Float64)
                unk = (ids.list.len() == 1) & (ids.list.first() == vocab["[UNK]"])
                whole = (ids.list.len() == 1) & ~unk
                oov_ids = model.encode_words(oov_words.get_column("word"))
                oov_c = oov_words.get_column("count").cast(pl.Float64)
                row = {
                    "corpus": path.name, "split": split, "scoring": scoring,
                    "train_lines": len(train_lines), "test_lines": len(test_lines),
                    "test_words": int(total),
                    "vocab": r.vocab.height, "train_s": round(wall, 2),
                    "fertility": float((n * counts).sum()) / total,
                    "unk_rate": float(counts.filter(unk).sum()) / total,
                    "whole_word_rate": float(counts.filter(whole).sum()) / total,
                    "oov_word_share": float(oov_c.sum()) / total,
                    "oov_fertility": (float((oov_ids.list.len().cast(pl.Float64)
                                              * oov_c).sum()) / float(oov_c.sum())
                                      if oov_c.len() else 0.0),
                    "mean_token_chars": float(r.vocab.filter(pl.col("kind") == "merge")
                                              .get_column("token").str.replace("^##", "")
                                              .str.len_chars().mean() or 0.0),
                }
                rows.append(row)
                print(f"{row['corpus']:8s} {scoring:10s} fertility {row['fertility']:.3f}  "
                      f"unk {100 * row['unk_rate']:.3f}%  whole words "
                      f"{100 * row['whole_word_rate']:.1f}%  unseen-word fertility "
                      f"{row['oov_fertility']:.2f} ({100 * row['oov_word_share']:.1f}% of "
                      f"words)  train {wall:.1f}s", flush=True)
    if out_json:
        Path(out_json).write_text(json.dumps(rows, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=None,
                    help="path, or relative to $TOKCOLUMNAR_CORPORA (../shared/corpora); "
                         "comma-separated for --quality (default medium/en.txt)")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scoring", choices=["likelihood", "frequency"], default="likelihood")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--quality", action="store_true",
                    help="fertility / unknown rate on held-apart text (default corpora: "
                         "medium/{en,ru,zh,ja}.txt)")
    ap.add_argument("--split", choices=["tail", "interleaved"], default="tail",
                    help="--quality: hold out the last 10%% of lines (default) or every "
                         "tenth line")
    a = ap.parse_args()
    corpora = Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))
    names = (a.corpus or "medium/en.txt,medium/ru.txt,medium/zh.txt,medium/ja.txt"
             if a.quality else a.corpus or "medium/en.txt").split(",")
    paths = [Path(c) if Path(c).exists() else corpora / c for c in names]
    for path in paths:
        if not path.exists():
            print(f"corpus {path} not found (set TOKCOLUMNAR_CORPORA)", file=sys.stderr)
            return 2
    if a.quality:
        return quality(paths, a.vocab_size, a.json, a.split)
    path = paths[0]
    results: dict[str, list[dict]] = {"ours": [], "hf": []}
    with tempfile.TemporaryDirectory(prefix="bench_wp_") as tmp:
        for i in range(a.runs):
            for name, code in (("ours", OURS), ("hf", HF)) if i % 2 == 0 else (
                    ("hf", HF), ("ours", OURS)):
                out = Path(tmp) / f"{name}{i}"
                out.mkdir()
                r = run_measured(code, [str(path), str(out), str(a.vocab_size), a.scoring])
                results[name].append(r)
                extra = ""
                if "timings" in r:
                    extra = "  " + " ".join(f"{k}={v:.2f}" for k, v in r["timings"].items())
                print(f"run {i} {name:4s} wall {r['wall']:6.2f}s  cpu {r['cpu']:6.2f}s  "
                      f"peak RSS {r['rss_mib']:7.1f} MiB  vocab {r['vocab']}{extra}",
                      flush=True)
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("wall", "cpu", "rss_mib")}
           for k, v in results.items()}
    print(f"\n{path.name}, vocab {a.vocab_size}, ours={a.scoring} vs HF WordPieceTrainer "
          f"(median of {a.runs}):")
    for k in ("ours", "hf"):
        print(f"  {k:4s} wall {med[k]['wall']:6.2f}s  cpu {med[k]['cpu']:6.2f}s  "
              f"peak RSS {med[k]['rss_mib']:7.1f} MiB")
    ratio = {m: med["ours"][m] / med["hf"][m] for m in ("wall", "cpu", "rss_mib")}
    print(f"  ratio ours/HF: wall {ratio['wall']:.2f}x  cpu {ratio['cpu']:.2f}x  "
          f"peak RSS {ratio['rss_mib']:.2f}x")
    if a.json:
        Path(a.json).write_text(json.dumps({"corpus": str(path), "vocab_size": a.vocab_size,
                                            "scoring": a.scoring, "runs": results,
                                            "median": med, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
