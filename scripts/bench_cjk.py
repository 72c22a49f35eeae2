#!/usr/bin/env python3
"""Per-character vs word segmentation for Chinese and Japanese on held-apart text (README,
"Chinese and Japanese: characters or words"). Needs the extras tokcolumnar[zh] and [ja].

    python scripts/bench_cjk.py                     # medium/zh.txt and medium/ja.txt
    python scripts/bench_cjk.py --corpus medium/zh.txt --vocab-size 30000 --json out.json

Each configuration is trained (WordPiece) on the first 90% of the corpus's lines and measured on
the last 10%, whose words are counted by the configuration's own normalizer and pre-tokenizer:

* tokens / 100 chars: tokens per 100 non-space characters of the held-apart text (words and
  characters are not comparable units, characters are);
* [UNK] tokens: share of the tokens that are the unknown token;
* chars in [UNK]: share of the characters that end up inside an [UNK] (WordPiece makes a whole
  word [UNK] when one of its characters is unknown, so longer words lose more text);
* one-token words: share of the pre-tokenizer's words that are one (known) token;
* --scoring: WordPiece's `likelihood` (the seeds' score, default) and `frequency` (HF's
  WordPieceTrainer is BPE by frequency);
* count s: the time of counting the training part (normalize + pre-tokenize, jieba / MeCab
  included), and train s: the merges.

Configurations: `bert` (--preset bert: BERT's normalizer spaces out every CJK ideograph, so
Chinese is per character), `bert-zh-wwm` (jieba words, HMM off = --cjk-split chars), the same
with --cjk-split words (HMM on), `bert-ja` (MeCab, NFKC, cased)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import polars as pl

import tokcolumnar as tc
from tokcolumnar.models.wordpiece import WordPieceModel

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "zh": [("bert (characters)", {"preset": "bert"}),
           ("bert-zh-wwm (jieba, --cjk-split chars)", {"preset": "bert-zh-wwm"}),
           ("bert-zh-wwm --cjk-split words (jieba HMM)", {"preset": "bert-zh-wwm",
                                                          "cjk_split": "words"})],
    "ja": [("bert (kanji as characters)", {"preset": "bert"}),
           ("bert-ja (MeCab words)", {"preset": "bert-ja"})],
}


def corpora_dir() -> Path:
    return Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))


def measure(path: Path, label: str, options: dict, vocab_size: int, tmp: Path,
            scoring: str) -> dict:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = len(lines) * 9 // 10  # the last 10% of the file: later chapters / other works
    train_f, test_f = tmp / f"{path.stem}.train", tmp / f"{path.stem}.test"
    train_f.write_text("".join(lines[:cut]), encoding="utf-8")
    test_f.write_text("".join(lines[cut:]), encoding="utf-8")
    t0 = time.perf_counter()
    train_words = tc.count_words(str(train_f), show_progress=False, **options)
    count_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = tc.train(from_counts=train_words, vocab_size=vocab_size, show_progress=False,
                 wordpiece_scoring=scoring, **options)
    train_s = time.perf_counter() - t0
    test_words = tc.count_words(str(test_f), show_progress=False, **options)
    vocab = dict(zip(r.vocab["token"].to_list(), r.vocab["id"].to_list()))
    ids = WordPieceModel(vocab).encode_words(test_words.get_column("word"))
    counts = test_words.get_column("count").cast(pl.Float64)
    chars = test_words.get_column("word").str.len_chars().cast(pl.Float64) * counts
    n = ids.list.len().cast(pl.Float64) * counts
    unk_id = vocab["[UNK]"]
    unk_tokens = ids.list.eval((pl.element() == unk_id).cast(pl.Float64)).list.sum() * counts
    has_unk = ids.list.contains(unk_id)
    one = (ids.list.len() == 1) & ~has_unk
    row = {"corpus": path.name, "config": label, "scoring": scoring, "vocab": r.vocab.height,
           "train_words_distinct": train_words.height,
           "tokens_per_100_chars": 100 * float(n.sum()) / float(chars.sum()),
           "unk_token_rate": float(unk_tokens.sum()) / float(n.sum()),
           "unk_char_rate": float(chars.filter(has_unk).sum()) / float(chars.sum()),
           "one_token_words": float(counts.filter(one).sum()) / float(counts.sum()),
           "count_s": round(count_s, 2), "train_s": round(train_s, 2)}
    print(f"{path.name:8s} {label:44s} {scoring:10s} tokens/100 chars "
          f"{row['tokens_per_100_chars']:6.2f}  "
          f"[UNK] tokens {100 * row['unk_token_rate']:.3f}%  chars in [UNK] "
          f"{100 * row['unk_char_rate']:.3f}%  one-token words "
          f"{100 * row['one_token_words']:.1f}%  distinct words {train_words.height:,}  "
          f"count {count_s:.1f}s train {train_s:.1f}s", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="medium/zh.txt,medium/ja.txt",
                    help="comma-separated paths under the corpora folder")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--scoring", default="likelihood,frequency",
                    help="WordPiece scorings to train (comma-separated)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cjk_quality_") as tmp:
        for rel in a.corpus.split(","):
            path = corpora_dir() / rel
            lang = "ja" if "ja" in path.stem else "zh"
            for label, options in CONFIGS[lang]:
                for scoring in a.scoring.split(","):
                    rows.append(measure(path, label, options, a.vocab_size, Path(tmp),
                                        scoring))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
