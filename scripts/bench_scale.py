#!/usr/bin/env python3
"""Scale table: train whitespace BPE (50k) with tokcolumnar and with HF `tokenizers`
(BpeTrainer) on prefixes of one large corpus — 100 MB, 1 GB, 5 GB by default — and report, per
size and tool: wall, CPU seconds (user + system), peak RSS, distinct words, spilled bytes,
merges/s, whether the merges are identical, and how HF failed when it did.

    python scripts/bench_scale.py /work/data/zipf_5g.txt --sizes 100MB,1GB
    python scripts/bench_scale.py /work/data/zipf_5g.txt --sizes 5GB --memory-limit 1.5GB

Prefixes are cut at a line boundary (the first SIZE bytes, then up to the end of that line) and
written once beside the corpus (`--prefix-dir`), reused when present with the same size. Each run
is a fresh process measured by `measure.run`; ours reads its figures from run.json (distinct
words, merges, the merge stage's time; spilled bytes when the run records them, else "—").
HF reports no merge-phase time, so its merges/s is "—". Run it under `nice -n 10` on a shared
machine and quote CPU seconds: the load average is printed beside each row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hf_reference import hf_train_command, merges_of  # HF's reference of each mode
from measure import Measurement, run

UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "B": 1}


def parse_size(text: str) -> int:
    """`100MB`, `1GB`, `1.5GB` -> bytes (decimal units, as the table's labels)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?B)\s*", text.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 100MB, 1GB)")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def prefix(corpus: Path, nbytes: int, label: str, out_dir: Path) -> Path:
    """The first `nbytes` of `corpus` and the rest of that line, as a file in `out_dir` (the
    whole corpus when it is not larger)."""
    size = corpus.stat().st_size
    if nbytes >= size:
        return corpus
    with corpus.open("rb") as f:
        f.seek(nbytes)
        tail = f.read(1 << 20)
    cut = nbytes + (tail.index(b"\n") + 1 if b"\n" in tail else len(tail))
    path = out_dir / f"{corpus.stem}_{label}{corpus.suffix}"
    if path.exists() and path.stat().st_size == cut:
        return path
    tmp = path.with_name(path.name + ".part")
    with corpus.open("rb") as src, tmp.open("wb") as dst:
        left = cut
        while left:
            block = src.read(min(left, 16 << 20))
            dst.write(block)
            left -= len(block)
    tmp.replace(path)
    return path


def find_spilled(run_json: Any) -> int | None:
    """The spilled bytes a run.json records (any numeric key naming `spill` and bytes), else
    None (runs before the spill existed)."""
    if isinstance(run_json, dict):
        for key, value in run_json.items():
            if "spill" in key and "byte" in key and isinstance(value, int | float):
                return int(value)
            found = find_spilled(value)
            if found is not None:
                return found
    return None


def mib(x: float) -> str:
    return f"{x:,.0f} MiB"


def measure_size(path: Path, label: str, vocab: int, memory_limit: str | None, hf: bool,
                 tmp: Path, normalizer: str = "none", max_words: int | None = None,
                 unlimited_twin: bool = False) -> dict[str, Any]:
    ours_dir, hf_json = tmp / f"ours_{label}", tmp / f"hf_{label}.json"
    ours_cmd = [sys.executable, "-m", "tokcolumnar", "train", str(path), "--out", str(ours_dir),
                "--vocab-size", str(vocab), "--pre-tokenizer", "whitespace", "--quiet",
                "--force", "--normalizer", normalizer] \
        + (["--max-words", str(max_words)] if max_words else [])
    limited = ours_cmd + (["--memory-limit", memory_limit] if memory_limit else [])
    row: dict[str, Any] = {"size": label, "bytes": path.stat().st_size}
    if unlimited_twin and memory_limit:  # the same run without the limit, for its merges
        twin_dir = tmp / f"twin_{label}"
        twin = run([*ours_cmd[:6], str(twin_dir), *ours_cmd[7:]], check=False)
        row["unlimited"] = result_of(twin)
        if twin.returncode == 0:
            row["unlimited"]["merges_list"] = merges_of(twin_dir / "tokenizer.json")
        shutil.rmtree(twin_dir, ignore_errors=True)
        row["unlimited"]["load"] = os.getloadavg()
    ours = run(limited, check=False)
    row["ours"] = result_of(ours)
    ours_merges = None
    if ours.returncode == 0:
        info = json.loads((ours_dir / "run.json").read_text())
        merge_s = info["timings_s"].get("merge")
        row["ours"].update(words=info["stats"]["words"], merges=info["stats"]["merges"],
                           spilled_bytes=find_spilled(info),
                           merges_per_s=info["stats"]["merges"] / merge_s if merge_s else None,
                           timings_s=info["timings_s"])
        ours_merges = merges_of(ours_dir / "tokenizer.json")
        if "unlimited" in row:
            twin_merges = row["unlimited"].pop("merges_list", None)
            row["identical_to_unlimited"] = ours_merges == twin_merges
    row["ours"]["load"] = os.getloadavg()
    if hf:
        hf_run = run(hf_train_command([path], vocab, "whitespace", hf_json, normalizer),
                     check=False)
        row["hf"] = result_of(hf_run)
        if hf_run.returncode == 0:
            hf_merges = merges_of(hf_json)
            row["hf"]["merges"] = len(hf_merges)
            row["identical"] = None if ours_merges is None else ours_merges == hf_merges
        row["hf"]["load"] = os.getloadavg()
    shutil.rmtree(ours_dir, ignore_errors=True)
    hf_json.unlink(missing_ok=True)
    return row


def result_of(m: Measurement) -> dict[str, Any]:
    return {"wall_s": m.wall, "cpu_s": m.cpu, "peak_rss_mib": m.rss_mib, "failure": m.failure}


def table_rows(row: dict[str, Any]) -> list[str]:
    """Markdown lines for one size: ours, then HF."""
    lines = []
    for tool in ("ours", "hf"):
        r = row.get(tool)
        if r is None:
            continue
        name = "tokcolumnar" if tool == "ours" else "HF BpeTrainer"
        load = "/".join(f"{x:.1f}" for x in r["load"])
        if r["failure"]:
            lines.append(f"| {row['size']} | {name} | failed: {r['failure']} after "
                         f"{r['wall_s']:.0f} s | {r['cpu_s']:.0f} s | {mib(r['peak_rss_mib'])} "
                         f"| — | — | — | — | {load} |")
            continue
        words = f"{r['words']:,}" if "words" in r else "—"
        spilled = r.get("spilled_bytes")
        spill = "—" if spilled is None else f"{spilled / 2**20:,.0f} MiB"
        rate = f"{r['merges_per_s']:,.0f}" if r.get("merges_per_s") else "—"
        same = {None: "—", True: "yes", False: "**no**"}[row.get("identical")]
        lines.append(f"| {row['size']} | {name} | {r['wall_s']:.0f} s | {r['cpu_s']:.0f} s | "
                     f"{mib(r['peak_rss_mib'])} | {words} | {spill} | {rate} | "
                     f"{same if tool == 'ours' else '—'} | {load} |")
    twin = row.get("unlimited")
    if twin is not None:
        load = "/".join(f"{x:.1f}" for x in twin["load"])
        same = {None: "—", True: "yes", False: "**no**"}[row.get("identical_to_unlimited")]
        lines.append(f"| {row['size']} | tokcolumnar, no --memory-limit | {twin['wall_s']:.0f} s "
                     f"| {twin['cpu_s']:.0f} s | {mib(twin['peak_rss_mib'])} | | | | merges = "
                     f"limited run: {same} | {load} |")
    return lines


HEADER = ("| corpus | tool | wall | CPU (user+sys) | peak RSS | distinct words | spilled | "
          "merges/s (merge loop) | merges = HF | load avg (1/5/15 min) |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--sizes", default="100MB,1GB,5GB", help="comma-separated prefix sizes")
    ap.add_argument("--vocab-size", type=int, default=50000)
    ap.add_argument("--memory-limit", default=None, metavar="SIZE",
                    help="passed to tokcolumnar train --memory-limit")
    ap.add_argument("--normalizer", choices=("none", "bert"), default="none",
                    help="bert: ours --normalizer bert, HF BertNormalizer(lowercase=False) — "
                         "Chinese characters become words of their own")
    ap.add_argument("--max-words", type=int, default=None, metavar="N",
                    help="passed to tokcolumnar train --max-words (the approximation)")
    ap.add_argument("--unlimited-twin", action="store_true",
                    help="also train without --memory-limit and say whether the merges match")
    ap.add_argument("--no-hf", action="store_true", help="time tokcolumnar only")
    ap.add_argument("--prefix-dir", type=Path, default=None,
                    help="where the prefixes are written (default: beside the corpus)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()

    labels = [s.strip() for s in args.sizes.split(",") if s.strip()]
    prefix_dir = args.prefix_dir or args.corpus.parent
    tmp = Path(tempfile.mkdtemp(prefix="tokcolumnar-scale-"))
    rows = []
    print(HEADER, flush=True)
    try:
        for label in labels:
            path = prefix(args.corpus, parse_size(label), label, prefix_dir)
            row = measure_size(path, label, args.vocab_size, args.memory_limit,
                               not args.no_hf, tmp, args.normalizer, args.max_words,
                               args.unlimited_twin)
            rows.append(row)
            print("\n".join(table_rows(row)), flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
