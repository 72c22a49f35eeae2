#!/usr/bin/env python3
"""Benchmark matrix: tokcolumnar against HF `tokenizers` over corpora × modes, same input, same
run, alternating fresh processes; medians of `--rounds`; one table with wall time, peak RSS,
CPU time (user + system), their ratios (ours / HF), our stage split, whether the merges are
identical and the 1-minute load average when the row was measured.

    python scripts/bench_matrix.py                       # every small and medium file x 3 modes
    python scripts/bench_matrix.py --files small/en_botchan.txt,medium/zh.txt --modes gpt2
    python scripts/bench_matrix.py --big /data/zipf_en_1g.txt --modes whitespace --vocab-size 50000
    python scripts/bench_matrix.py --folder /data/many_small_files/ --modes whitespace

Modes: `whitespace` (HF `Whitespace` + `BpeTrainer`), `gpt2` (our `--preset gpt2`; HF
ByteLevel(add_prefix_space=False) + the 256-byte alphabet + `<|endoftext|>`), `bert` (our
`--preset bert`, likelihood WordPiece, against HF `WordPieceTrainer` with BertNormalizer +
BertPreTokenizer: the trainer BERT users run; merges are not comparable there), `jieba` /
`mecab` (our `--pre-tokenizer jieba|mecab` on the raw file; HF `WhitespaceSplit` + `BpeTrainer`
on the file pre-segmented by the reference segmenter, rjieba / MeCab, whose own time to cut
every line once is the column "segmenter alone"; needs tokcolumnar[zh] / [ja]). Files are
looked up under `$TOKCOLUMNAR_CORPORA` (default ../shared/corpora). `--markdown` prints the
table as Markdown (for the README).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from hf_reference import hf_train_command, merges_of  # HF's reference of each mode
from measure import run as run_child  # wall, CPU and peak RSS of one child process

ROOT = Path(__file__).resolve().parents[1]

# the reference segmenter cutting every line once (line ending and a "\r" before it left out,
# as our segmenters do), words joined by spaces: one output line per input line
SEGMENT_SCRIPT = r"""
import os, sys
mode, src, dst = sys.argv[1:4]
if mode == "jieba":
    import rjieba
    cut = lambda s: " ".join(rjieba.cut(s))
else:
    import fugashi, unidic_lite
    d = unidic_lite.DICDIR
    rc = os.path.join(d, "mecabrc")
    cut = fugashi.GenericTagger(f'-r "{rc}" -d "{d}" -Owakati').parse
with open(src, "rb") as f, open(dst, "w", encoding="utf-8") as g:
    for raw in f:
        g.write(cut(raw.decode("utf-8").rstrip("\n").removesuffix("\r")) + "\n")
"""

OUR_ARGS = {"whitespace": ["--pre-tokenizer", "whitespace"], "gpt2": ["--preset", "gpt2"],
            "bert": ["--preset", "bert"], "jieba": ["--pre-tokenizer", "jieba"],
            "mecab": ["--pre-tokenizer", "mecab"]}
SEGMENTERS = ("jieba", "mecab")
STAGES = ("count", "initial", "merge", "tables", "export")


def corpora_dir() -> Path:
    return Path(os.environ.get("TOKCOLUMNAR_CORPORA", ROOT.parent / "shared" / "corpora"))


def run(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system) of one child process. On a
    shared machine the CPU time is the fairer figure: wall time includes waiting for a core."""
    m = run_child(cmd)
    return m.wall, m.rss_mib, m.cpu


def hf_inputs(path: Path) -> list[str]:
    """HF takes a list of files: a folder becomes its files, in our (sorted) order."""
    if path.is_dir():
        return [str(p) for p in sorted(path.rglob("*")) if p.is_file()
                and not p.name.startswith(".")]
    return [str(path)]


def measure(label: str, path: Path, mode: str, vocab: int, rounds: int, tmp: Path) -> dict:
    ours_dir, hf_json = tmp / "ours", tmp / "hf.json"
    ours = [sys.executable, "-m", "tokcolumnar", "train", str(path), "--out", str(ours_dir),
            "--vocab-size", str(vocab), "--quiet", "--force", *OUR_ARGS[mode]]
    hf_in = hf_inputs(path)
    cut_s = cut_cpu = None
    if mode in SEGMENTERS:  # HF trains on the text the reference segmenter cut
        cuts = [run([sys.executable, "-c", SEGMENT_SCRIPT, mode, f, str(tmp / f"seg{i}.txt")])
                for i, f in enumerate(hf_in)]
        cut_s, cut_cpu = sum(c[0] for c in cuts), sum(c[2] for c in cuts)
        hf_in = [str(tmp / f"seg{i}.txt") for i in range(len(hf_in))]
    hf = hf_train_command(hf_in, vocab, "whitespace-split" if mode in SEGMENTERS else mode,
                          hf_json)
    res: dict[str, list[tuple[float, float, float]]] = {"ours": [], "hf": []}
    stages: list[dict[str, float]] = []
    for r in range(rounds):
        for name in (("ours", "hf") if r % 2 == 0 else ("hf", "ours")):  # alternate the order
            res[name].append(run(ours if name == "ours" else hf))
            if name == "ours":
                stages.append(json.loads((ours_dir / "run.json").read_text())["timings_s"])
    med = {n: tuple(statistics.median(x[i] for x in v) for i in range(3))
           for n, v in res.items()}
    same = None
    if mode != "bert":
        same = merges_of(ours_dir / "tokenizer.json") == merges_of(hf_json)
    split = {k: statistics.median(s.get(k, 0.0) for s in stages)
             for k in (*STAGES, "count_segmenter")}
    row = {"corpus": label, "mode": mode, "vocab": vocab, "hf_s": med["hf"][0],
           "hf_mib": med["hf"][1], "ours_s": med["ours"][0], "ours_mib": med["ours"][1],
           "hf_cpu": med["hf"][2], "ours_cpu": med["ours"][2],
           "wall": med["ours"][0] / med["hf"][0], "rss": med["ours"][1] / med["hf"][1],
           "cpu": med["ours"][2] / med["hf"][2], "load": os.getloadavg()[0],
           "stages": split, "identical": same, "segmenter_alone_s": cut_s,
           "segmenter_alone_cpu_s": cut_cpu}
    print(f"{label:<34} {mode:<10} hf {row['hf_s']:7.2f}s {row['hf_mib']:6.0f}M  ours "
          f"{row['ours_s']:7.2f}s {row['ours_mib']:6.0f}M  wall {row['wall']:5.2f}x  rss "
          f"{row['rss']:5.2f}x  cpu {row['ours_cpu']:6.2f}s/{row['hf_cpu']:6.2f}s "
          f"{row['cpu']:5.2f}x  load {row['load']:.1f}  merges identical: {same}"
          + (f"  segmenter alone {cut_s:.2f}s (cpu {cut_cpu:.2f}s), ours "
             f"{split['count_segmenter']:.2f}s of it in count" if cut_s is not None else ""),
          flush=True)
    return row


def table(rows: list[dict], markdown: bool) -> str:
    head = ["corpus", "mode", "HF", "tokcolumnar", "wall", "peak RSS", "CPU (ours / HF)",
            "count / initial / merge / tables / export (s)", "merges = HF", "load",
            "segmenter alone"]
    lines = []
    for r in rows:
        st = " / ".join(f"{r['stages'][k]:.2f}" for k in STAGES)
        same = "—" if r["identical"] is None else ("yes" if r["identical"] else "**NO**")
        lines.append([r["corpus"], r["mode"], f"{r['hf_s']:.2f} s, {r['hf_mib']:.0f} MiB",
                      f"{r['ours_s']:.2f} s, {r['ours_mib']:.0f} MiB", f"{r['wall']:.2f}x",
                      f"{r['rss']:.2f}x",
                      f"{r['ours_cpu']:.2f} / {r['hf_cpu']:.2f} s = {r['cpu']:.2f}x", st, same,
                      f"{r['load']:.1f}",
                      "—" if r.get("segmenter_alone_s") is None
                      else f"{r['segmenter_alone_s']:.2f} s (ours: "
                      f"{r['stages']['count_segmenter']:.2f} s in count)"])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(x) + " |" for x in lines]
        return "\n".join(out)
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(x, widths))
                     for x in [head, *lines])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default=None,
                    help="comma-separated paths under the corpora folder (default: every small "
                         "and medium .txt, unless --big or --folder is given)")
    ap.add_argument("--modes", default="whitespace,gpt2,bert")
    ap.add_argument("--vocab-size", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big", action="append", default=[], help="a large corpus file (repeatable)")
    ap.add_argument("--folder", action="append", default=[],
                    help="a folder of many files, read as one corpus (repeatable)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()

    base = corpora_dir()
    if args.files is not None:
        targets = [(f, base / f) for f in args.files.split(",") if f]
    elif args.big or args.folder:
        targets = []
    else:
        targets = [(f"{p.parent.name}/{p.name}", p) for sub in ("small", "medium")
                   for p in sorted((base / sub).glob("*.txt"))]
    targets += [(Path(b).name, Path(b)) for b in args.big]
    targets += [(Path(d).name + "/ (folder)", Path(d)) for d in args.folder]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tokcolumnar-matrix-") as tmp:
        for label, path in targets:
            for mode in args.modes.split(","):
                rows.append(measure(label, path, mode, args.vocab_size, args.rounds, Path(tmp)))
                if args.json:  # after every row: a long matrix that fails keeps what it measured
                    Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    print()
    print(table(rows, args.markdown))


if __name__ == "__main__":
    main()
