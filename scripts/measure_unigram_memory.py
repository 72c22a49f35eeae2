"""Measure where the Unigram trainer's memory goes (docs/unigram.md, "Memory"): runs `tokcolumnar
train ARGS...` in this process (as the command line does: same allocator settings) with the
RSS sampled every 2 ms on a thread, and prints, per stage (reading and normalizing, required
characters, rare characters, word tokens, seeds, the words table, the trie, the lattices'
build, each EM iteration and pruning round, the final cut, the result tables), its largest RSS
and the RSS when it ended; with `--structures`, the bytes of the trainer's long-lived arrays
(the lattices' orders) as built; with `--traced`, each stage's largest bytes held by NumPy
arrays and Python objects (`tracemalloc`: live data, without the allocator's retained free
memory and without Polars' own allocations).

    PYTHONPATH=. python scripts/measure_unigram_memory.py train --preset sentencepiece \\
        --vocab-size 32000 ../shared/corpora/medium/en.txt --out /tmp/out -q \\
        [--structures] [--traced]"""

from __future__ import annotations

import sys
import tracemalloc

from rss_sampler import StageSampler, rss_bytes


class StagePeaks(StageSampler):
    """The largest RSS of each stage (`rss_sampler`), with the RSS when each last ended."""

    def __init__(self) -> None:
        self.after: dict[str, int] = {}
        self.traced: dict[str, int] = {}  # with --traced: the largest NumPy/Python bytes
        self.tracing = tracemalloc.is_tracing()
        super().__init__()

    def wrap(self, owner, attr: str, name: str, counted: bool = False) -> None:  # noqa: ANN001
        fn = getattr(owner, attr)
        calls = [0]

        def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            calls[0] += 1
            label = f"{name}#{calls[0]}" if counted else name
            outer, self.stage = self.stage, label
            self.enter(label)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave(label, outer)
        setattr(owner, attr, run)

    def enter(self, label: str) -> None:
        self.peaks.setdefault(label, rss_bytes())
        if self.tracing:
            self.traced["(outer)"] = max(self.traced.get("(outer)", 0),
                                         tracemalloc.get_traced_memory()[1])
            tracemalloc.reset_peak()

    def leave(self, label: str, outer: str) -> None:
        self.after[label] = rss_bytes()
        self.stage = outer
        if self.tracing:
            self.traced[label] = max(self.traced.get(label, 0), tracemalloc.get_traced_memory()[1])

    def report(self) -> None:
        self.stop()
        mib = 1 << 20
        print(f"{'stage':32} {'peak MiB':>9} {'end MiB':>9} {'traced':>9}", file=sys.stderr)
        for k, v in self.peaks.items():
            t = f"{self.traced[k] / mib:9.0f}" if k in self.traced else ""
            print(f"{k:32} {v / mib:9.0f} {self.after.get(k, 0) / mib:9.0f} {t}",
                  file=sys.stderr)


def structures(base) -> None:  # noqa: ANN001 - training.unigram_lattice.LatticeBase
    mib = 1 << 20
    for name in ("begin", "forward", "backward"):
        o = getattr(base, name)
        sizes = {f: getattr(o, f).nbytes for f in ("start", "length", "code", "cuts", "w")
                 if getattr(o, f) is not None}
        print(f"  {name}: {len(o.start):,} nodes, "
              + ", ".join(f"{f} {b / mib:.0f}" for f, b in sizes.items())
              + f" = {sum(sizes.values()) / mib:.0f} MiB", file=sys.stderr)
    print(f"  pos_off+nchar: {(base.pos_off.nbytes + base.nchar.nbytes) / mib:.0f} MiB, "
          f"{len(base.nchar):,} strings, {int(base.pos_off[-1]):,} positions", file=sys.stderr)


def main() -> None:
    argv = [a for a in sys.argv[1:] if a not in ("--structures", "--traced")]
    show = "--structures" in sys.argv
    if "--traced" in sys.argv:
        tracemalloc.start()
    from tokcolumnar import cli
    from tokcolumnar.training import unigram as u
    from tokcolumnar.training import unigram_lattice as ul
    from tokcolumnar.training import unigram_pipeline as up

    peaks = StagePeaks()
    peaks.wrap(up, "_unigram_tables", "unigram tables")
    peaks.wrap(up.UnigramModel, "tokenize_flat", "tables: tokenize_flat")
    peaks.wrap(up, "read_lines", "read_lines")
    peaks.wrap(up, "load_sentences", "load_sentences")
    peaks.wrap(up, "train_unigram", "train_unigram")
    peaks.wrap(up, "word_tokens", "tables: word_tokens")
    peaks.wrap(up, "words_table", "tables: words_table")
    for attr in ("required_characters", "replace_rare", "word_tokens", "seed_pieces",
                 "prune_unreachable", "finalize"):
        peaks.wrap(u, attr, attr)
    for attr in ("e_step", "m_step", "prune"):
        peaks.wrap(u, attr, attr, counted=True)
    peaks.wrap(u.SeedTrie, "build", "SeedTrie.build")
    build = ul.LatticeBase.build.__func__
    calls = [0]

    def staged_build(cls, strings, trie, begin=True, folds="both"):  # noqa: ANN001, ANN202
        calls[0] += 1
        label = f"LatticeBase.build#{calls[0]}({folds})"
        outer, peaks.stage = peaks.stage, label
        peaks.enter(label)
        try:
            base = build(cls, strings, trie, begin, folds)
            if show:
                print(f"{label}:", file=sys.stderr)
                structures(base)
            return base
        finally:
            peaks.leave(label, outer)
    ul.LatticeBase.build = classmethod(staged_build)
    try:
        code = cli.main(argv)
    finally:
        peaks.report()
    sys.exit(code)


if __name__ == "__main__":
    main()
