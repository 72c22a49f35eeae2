#!/usr/bin/env python3
"""Exactness check: `tokcolumnar encode` (the command's whole path, into Parquet) against HF
`Tokenizer.from_file(tokenizer.json).encode_batch(lines)` on every line of every input, for
each tokenizer given. Prints, per (tokenizer, file), the lines compared and the lines whose ids
(with --offsets: ids or offsets) differ (with the first one); exits 1 if any differs.

    python scripts/check_encode_hf.py --tokenizers DIR1,DIR2 [--offsets] FILE...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from tokenizers import Tokenizer as HFTokenizer

BATCH = 20000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--tokenizers", required=True, help="training directories, comma-separated")
    ap.add_argument("--offsets", action="store_true",
                    help="also compare the offsets column with HF's Encoding.offsets")
    args = ap.parse_args()
    repo = Path(__file__).resolve().parent.parent
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for tdir in args.tokenizers.split(","):
            hf = HFTokenizer.from_file(str(Path(tdir) / "tokenizer.json"))
            for src in args.inputs:
                out = Path(tmp) / "out.parquet"
                columns = ["--columns", "ids,offsets"] if args.offsets else []
                subprocess.run([sys.executable, "-m", "tokcolumnar", "encode", src,
                                "--tokenizer", tdir, "--out", str(out), "--force", "--quiet",
                                *columns], check=True, cwd=repo)
                df = pl.read_parquet(out)
                lines = df.get_column("text").to_list()
                ours = df.get_column("ids").to_list()
                if args.offsets:
                    ours = [(ids, [(o["start"], o["end"]) for o in offs]) for ids, offs in
                            zip(ours, df.get_column("offsets").to_list())]
                bad, first = 0, None
                for k in range(0, len(lines), BATCH):
                    theirs = [(e.ids, e.offsets) if args.offsets else e.ids
                              for e in hf.encode_batch(lines[k:k + BATCH])]
                    for j, (a, b) in enumerate(zip(ours[k:k + BATCH], theirs)):
                        if a != b:
                            bad += 1
                            first = first if first is not None else k + j
                failed += bad
                print(f"{Path(tdir).name:24s} {Path(src).name:28s} lines {len(lines):8,}  "
                      f"differ {bad:,}" + (f" (first: line {first + 1}: "
                                          f"{lines[first][:60]!r})" if bad else ""),
                      flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
