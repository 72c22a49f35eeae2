"""The file to give `spark-submit`: the tokcolumnar command line, run in the driver Spark
starts (its session is then the one `--engine spark` uses).

    spark-submit --master 'local[2]' "$(python -m tokcolumnar.distributed.spark_job)" \\
        count --engine spark corpus/ --out words.parquet

Run as a module (`python -m`), it prints its own path, for the line above."""

from __future__ import annotations

import os
import sys


def main() -> int:
    if __spec__ is not None:  # python -m: the path to give spark-submit
        print(os.path.abspath(__file__))
        return 0
    # run as a file, Python put this folder first on the path, where `ray.py` would hide Ray
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    from tokcolumnar.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
