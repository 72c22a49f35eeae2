"""Interleave text files at line boundaries, a block of each in turn, so that every prefix of
the output holds all of them in proportion: issue 30's 5 GB mix is

    python ../shared/scripts/gen_zipf_corpus.py en en4g.txt 4000 --seed 7
    python ../shared/scripts/gen_zipf_corpus.py zh zh1g.txt 1000 --seed 7
    python scripts/interleave_corpora.py mix5g.txt en4g.txt:4MiB zh1g.txt:1MiB

(4 MiB of English, then 1 MiB of Chinese, ...; a block ends at the first line end at or after
its size; once a file runs out the others go on). Bytes are copied as they are.
"""

from __future__ import annotations

import argparse
import sys

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_source(text: str) -> tuple[str, int]:
    """`PATH:SIZE` (SIZE in bytes or with KiB/MiB/GiB) -> (path, bytes)."""
    path, _, size = text.rpartition(":")
    for unit, scale in UNITS.items():
        if size.endswith(unit):
            return path, int(float(size[:-len(unit)]) * scale)
    return path, int(size)


def interleave(out_path: str, sources: list[tuple[str, int]]) -> int:
    """Write the interleaved blocks to `out_path`; returns the bytes written."""
    files = [open(path, "rb") for path, _ in sources]  # noqa: SIM115 (closed below)
    sizes = [size for _, size in sources]
    written = 0
    try:
        with open(out_path, "wb") as out:
            live = list(range(len(files)))
            while live:
                for i in list(live):
                    block = files[i].read(sizes[i])
                    if block and not block.endswith(b"\n"):
                        block += files[i].readline()  # up to the line's end
                    if not block:
                        live.remove(i)
                        continue
                    out.write(block)
                    written += len(block)
    finally:
        for f in files:
            f.close()
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("sources", nargs="+", help="PATH:BLOCK_SIZE, e.g. en.txt:4MiB")
    a = ap.parse_args()
    n = interleave(a.out, [parse_source(s) for s in a.sources])
    print(f"{a.out}: {n:,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
