"""Our `--preset sentencepiece` Unigram against `spm_train --model_type=unigram`, same corpus,
same vocabulary size, every other option at SentencePiece's default (issue #32's exactness
table): the pieces in id order, the largest score difference, the piece-set Jaccard, and what
each run cost (wall, CPU seconds, peak RSS; the two runs alternate, one process each).

    python scripts/unigram_exactness.py medium/en.txt medium/zh.txt --sizes 8000 16000 32000
    python scripts/unigram_exactness.py small --sizes 4000   # every small corpus

A corpus is a path, or a name under $TOKCOLUMNAR_CORPORA (default ../shared/corpora); `small`
stands for every small corpus. SentencePiece runs with its default `num_threads` (16), the
float32 sums our trainer reproduces (docs/unigram.md, "Threads and float sums"); `--threads 2`
times it as the speed comparison does, where its sums, hence a few scores, differ. A corpus
with fewer possible pieces than the size is reported as SentencePiece's refusal, and ours.
`--rounds K` runs each K times, alternating, and shows the median run by wall time. Prints a
Markdown table; `--json FILE` keeps the rows."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import Measurement, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: The children import this checkout's tokcolumnar (installed or not).
CHILD_ENV = os.environ | {"PYTHONPATH": os.pathsep.join(
    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

SPM_CHILD = """
import sys, sentencepiece as spm
src, prefix, size, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spm.SentencePieceTrainer.train(input=src, model_prefix=prefix, vocab_size=size,
                               model_type="unigram", num_threads=threads, minloglevel=2)
"""


def corpora_root() -> Path:
    root = os.environ.get("TOKCOLUMNAR_CORPORA")
    return Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "corpora"


def expand(names: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in names:
        if name == "small":
            out += sorted((corpora_root() / "small").glob("*.txt"))
        elif Path(name).exists():
            out.append(Path(name))
        else:
            out.append(corpora_root() / name)
    return out


def pieces(model: Path) -> list[tuple[str, float]]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


def compare(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> dict:
    same_order = [p for p, _ in ours] == [p for p, _ in theirs]
    a, b = {p for p, _ in ours}, {p for p, _ in theirs}
    score_diff = (max(abs(x - y) for (_, x), (_, y) in zip(ours, theirs))
                  if same_order else None)
    return {"pieces": len(theirs), "identical_order": same_order,
            "max_score_diff": score_diff, "jaccard": len(a & b) / len(a | b)}


def one(path: Path, size: int, threads: int, work: Path, rounds: int = 1) -> dict:
    """One corpus and size: SentencePiece then ours, `rounds` times each, alternating."""
    spm_prefix = work / f"spm-{path.stem}-{size}"
    out = work / f"ours-{path.stem}-{size}"
    spm_cmd = [sys.executable, "-c", SPM_CHILD, str(path), str(spm_prefix), str(size),
               str(threads)]
    our_cmd = [sys.executable, "-m", "tokcolumnar", "train", str(path), "--preset",
               "sentencepiece", "--vocab-size", str(size), "--out", str(out), "--force", "-q"]
    spm_runs: list[Measurement] = []
    our_runs: list[Measurement] = []
    for _ in range(rounds):
        spm_runs.append(run(spm_cmd, check=False))
        our_runs.append(run(our_cmd, env=CHILD_ENV, check=False))
    # the median by wall time (a failed run sorts first, so that it is reported)
    theirs = sorted(spm_runs, key=lambda m: (m.failure is None, m.wall))[len(spm_runs) // 2]
    ours = sorted(our_runs, key=lambda m: (m.failure is None, m.wall))[len(our_runs) // 2]
    row = {"corpus": f"{path.parent.name}/{path.name}", "size": size,
           "spm": theirs._asdict() | {"stderr": theirs.failure},
           "ours": ours._asdict() | {"stderr": ours.failure}}
    if theirs.failure or ours.failure:
        row["result"] = f"spm: {theirs.failure or 'ok'}; ours: {ours.failure or 'ok'}"
        return row
    row |= compare(pieces(out / "tokenizer.model"), pieces(spm_prefix.with_suffix(".model")))
    row["result"] = ("identical" if row["identical_order"] and row["max_score_diff"] <= 1e-4
                     else "DIFFERENT")
    return row


def table(rows: list[dict]) -> str:
    lines = ["| corpus | size | result | Jaccard | max score diff | ours wall / CPU / RSS | "
             "spm wall / CPU / RSS |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        def cost(m: dict) -> str:
            return f"{m['wall']:.1f} s / {m['cpu']:.1f} s / {m['rss_mib']:.0f} MiB"
        diff = r.get("max_score_diff")
        lines.append(f"| {r['corpus']} | {r['size']:,} | {r['result']} | "
                     f"{r.get('jaccard', float('nan')):.4f} | "
                     f"{'-' if diff is None else f'{diff:.1e}'} | {cost(r['ours'])} | "
                     f"{cost(r['spm'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+")
    ap.add_argument("--sizes", type=int, nargs="+", default=[8000])
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each, alternating; the table shows the median by wall time")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="unigram-exact-") as d:
        for path in expand(args.corpora):
            for size in args.sizes:
                rows.append(one(path, size, args.threads, Path(d), args.rounds))
                print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
