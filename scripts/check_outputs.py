"""Byte-identical outputs across a refactoring: train a fixed set of configurations and compare
the SHA-256 of every output file (all but `run.json`, which holds timings and paths) with a
stored list.

    python scripts/check_outputs.py record scripts/output_hashes.json   # before the change
    python scripts/check_outputs.py verify scripts/output_hashes.json   # after it

`scripts/output_hashes.json` was recorded before the package was reorganised into folders
(issue "layout"); the reorganised package gives the same bytes in all 72 cases.

Cases: every file of `corpora/small` and `corpora/medium/en.txt` × {whitespace, gpt2, bert,
subword-nmt} × {polars, duckdb} (`--engines`, `--only` to narrow). Each case runs the CLI in a
fresh process (`python -m tokcolumnar train ... --quiet`). The stored list names the package
versions it was made with: Parquet bytes depend on the Polars version that wrote them."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "whitespace": ["--pre-tokenizer", "whitespace"],
    "gpt2": ["--preset", "gpt2"],
    "bert": ["--preset", "bert"],
    "subword-nmt": ["--preset", "subword-nmt"],
}
VOCAB = {"small": {"subword-nmt": "2000", "default": "5000"},
         "medium": {"subword-nmt": "10000", "default": "30000"}}


def corpora_dir() -> Path:
    return Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))


def cases(engines: list[str], only: str | None) -> list[tuple[str, Path, str, list[str]]]:
    files = sorted((corpora_dir() / "small").glob("*.txt")) + [corpora_dir() / "medium" / "en.txt"]
    out = []
    for f in files:
        size = "medium" if f.parent.name == "medium" else "small"
        for name, args in CONFIGS.items():
            vocab = VOCAB[size].get(name, VOCAB[size]["default"])
            for engine in engines:
                key = f"{size}/{f.name}|{name}|{engine}"
                if only and only not in key:
                    continue
                out.append((key, f, engine, [*args, "--vocab-size", vocab]))
    return out


def run_case(path: Path, engine: str, args: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "tokcolumnar", "train", str(path), "--out", str(out),
               "--engine", engine, "--quiet", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": proc.stderr.strip()}
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(out.iterdir()) if p.name != "run.json"}


def versions() -> dict[str, str]:
    return {pkg: metadata.version(pkg) for pkg in ("polars", "pyarrow", "numpy", "duckdb")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["record", "verify"])
    ap.add_argument("hashes", type=Path)
    ap.add_argument("--engines", default="polars,duckdb")
    ap.add_argument("--only", default=None, help="run the cases whose key contains this text")
    args = ap.parse_args()
    engines = args.engines.split(",")
    todo = cases(engines, args.only)
    if not todo:
        print(f"no cases (corpora in {corpora_dir()}?)", file=sys.stderr)
        return 2
    stored = json.loads(args.hashes.read_text()) if args.mode == "verify" else None
    if stored and stored["versions"] != versions():
        print(f"note: hashes were made with {stored['versions']}, running {versions()}",
              file=sys.stderr)
    results: dict[str, dict[str, str]] = {}
    bad = 0
    for key, path, engine, extra in todo:
        t = time.perf_counter()
        results[key] = run_case(path, engine, extra)
        status = "ok"
        if stored is not None:
            want = stored["cases"].get(key)
            if want is None:
                status = "not in the stored list"
            elif want != results[key]:
                diff = sorted(k for k in set(want) | set(results[key])
                              if want.get(k) != results[key].get(k))
                status = f"DIFFERENT: {', '.join(diff)}"
                bad += 1
        elif "error" in results[key]:
            status = f"error: {results[key]['error']}"
        print(f"{key:<60} {time.perf_counter() - t:7.1f}s  {status}", flush=True)
    if args.mode == "record":
        if args.only and args.hashes.exists():  # re-record some cases, keep the others
            results = {**json.loads(args.hashes.read_text())["cases"], **results}
        args.hashes.write_text(json.dumps({"versions": versions(), "cases": results},
                                          indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(results)} cases -> {args.hashes}")
        return 0
    print(f"{len(results) - bad} of {len(results)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
