"""`tokcolumnar train` on one corpus, single-process Polars against `--engine ray` (a new
local Ray), alternating rounds: wall, CPU seconds and peak RSS of the driver, of Ray's workers
and of Ray's own processes; the words tables and merges compared.

The driver's children (Ray's raylet, GCS, workers) are polled every 0.2 s through /proc; each
process's peak is its kernel high-water mark (VmHWM), so a poll cannot miss a peak, only a
process that lives under 0.2 s. Ray's workers are the processes whose title starts with
`ray::`; CPU seconds of every process are summed from /proc/PID/stat at its last poll.

    python scripts/bench_distributed.py /work/data/zipf_en_1g.txt --vocab-size 50000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> set[int]:
    """Every live process below `root` (by parent pid), `root` included."""
    parent_of: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent_of[int(entry)] = int(fields[1])
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parent_of.items():
            if parent == pid and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def sample(pid: int) -> tuple[str, float, float] | None:
    """(title, peak RSS MiB, CPU seconds) of one process, None when it is gone."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, StopIteration):
        return None
    return title, hwm / 1024, (int(stat[11]) + int(stat[12])) / CLOCK_TICKS


def measured_run(cmd: list[str]) -> dict[str, float]:
    """Run `cmd`, polling its process tree; the figures of the run."""
    seen: dict[int, tuple[str, float, float]] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            got = sample(pid)
            if got is not None:
                seen[pid] = got
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    driver = seen.get(proc.pid, ("", 0.0, 0.0))
    workers = [v for p, v in seen.items() if p != proc.pid and v[0].startswith("ray::")]
    others = [v for p, v in seen.items() if p != proc.pid and not v[0].startswith("ray::")]
    return {
        "wall": wall,
        "cpu": sum(v[2] for v in seen.values()),
        "driver_cpu": driver[2],
        "driver_mib": driver[1],
        "workers": len(workers),
        "workers_mib": sum(v[1] for v in workers),
        "max_worker_mib": max((v[1] for v in workers), default=0.0),
        "ray_mib": sum(v[1] for v in others),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--vocab-size", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench_distributed."))
    runs: dict[str, list[dict[str, float]]] = {"polars": [], "ray": []}
    for r in range(args.rounds):
        for engine in ("polars", "ray"):
            cmd = [sys.executable, "-m", "tokcolumnar", "train", args.corpus, "-q", "--force",
                   "--vocab-size", str(args.vocab_size), "--out", str(out / engine),
                   "--engine", engine]
            runs[engine].append(measured_run(cmd))
            print(f"round {r + 1} {engine}: {runs[engine][-1]}  load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)
    same = {name: (out / "polars" / name).read_bytes() == (out / "ray" / name).read_bytes()
            for name in ("words.parquet", "merges.txt", "vocab.json")
            if (out / "polars" / name).exists()}
    print("| engine | round | wall s | CPU s (all processes) | driver CPU s | driver peak MiB "
          "| workers | workers' peaks summed MiB | largest worker MiB | Ray's own processes MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for engine, rows in runs.items():
        for r, m in enumerate(rows, 1):
            print(f"| {engine} | {r} | {m['wall']:.1f} | {m['cpu']:.1f} | {m['driver_cpu']:.1f} | "
                  f"{m['driver_mib']:.0f} | {m['workers']:.0f} | {m['workers_mib']:.0f} | "
                  f"{m['max_worker_mib']:.0f} | {m['ray_mib']:.0f} |")
    print(f"identical outputs: {same}")


if __name__ == "__main__":
    main()
