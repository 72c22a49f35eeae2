"""Check the merge loop's memory estimate (`memory.merge_bytes`, what refuses or plans a run)
against what runs measure: for each words table, `tokcolumnar train --from-counts WORDS ARGS`
(no count, so the loop and the stages after it set the run's peak; the table is held through
the loop, where a run that counted drops it), then the estimate (`LIBRARY_WORK` + run.json's
`memory.loop_estimate`) beside the peak resident memory above the run's start
(`memory.peak_rss - memory.start_rss`) and their ratio. `--corpus` runs the whole command on a
corpus first (count included) and reports its peak too, then checks the estimate on the words
table it wrote.

    python scripts/check_memory_estimate.py --corpus /tmp/zh100.txt --preset gpt2 \\
        --vocab-size 30000
    python scripts/check_memory_estimate.py --words OUT/words.parquet --vocab-size 50000

Prints one JSON line per run (MB = 10^6 bytes)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tokcolumnar.memory import LIBRARY_WORK

MB = 1e6


def train(args: list[str], out: Path) -> dict:
    """Run `tokcolumnar train ARGS --out OUT --quiet`; its run.json."""
    cmd = [sys.executable, "-m", "tokcolumnar", "train", *args, "--out", str(out), "--quiet",
           "--force"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return json.loads((out / "run.json").read_text())


def report(kind: str, run: dict) -> dict:
    """The run's estimate beside what it measured (MB above the run's start): the estimate of
    the stages after the count is `LIBRARY_WORK` + `memory.loop_estimate` (the limit leaves the
    libraries' first work out); measured, the peak after the count when it passed the count's
    (else only the count's peak is known, and the loop's was lower)."""
    memory, stats = run["memory"], run["stats"]
    start = memory["start_rss"]
    after = {k: round((v - start) / MB, 1) for k, v in memory["peak_rss_after"].items()}
    count = memory["peak_rss_after"].get("count", start) - start
    peak = memory["peak_rss"] - start
    estimate = LIBRARY_WORK + memory["loop_estimate"]
    row = {"run": kind, "words": stats["words"], "on_disk": stats["merge_loop_on_disk"],
           "estimate_mb": round(estimate / MB, 1), "run_peak_mb": round(peak / MB, 1),
           "count_peak_mb": round(count / MB, 1)}
    if peak > count:
        row["estimate_over_measured"] = round(estimate / peak, 3)
    else:
        row["estimate_over_measured"] = None  # the count set the peak
    return {**row, "peak_after_stage_mb": after, "timings_s": run["timings_s"]}


def main() -> None:
    p = argparse.ArgumentParser()
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help="a text file: the whole run first, then its words")
    source.add_argument("--words", help="a words.parquet (or counts file)")
    args, train_args = p.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="check-estimate-") as tmp:
        words = args.words
        if args.corpus is not None:
            run = train([args.corpus, *train_args], Path(tmp) / "whole")
            print(json.dumps(report("whole", run)), flush=True)
            words = str(Path(tmp) / "whole" / "words.parquet")
        run = train(["--from-counts", words, *train_args], Path(tmp) / "from-counts")
        print(json.dumps(report("from-counts", run)), flush=True)


if __name__ == "__main__":
    main()
