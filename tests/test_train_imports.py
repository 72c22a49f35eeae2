"""What a `train` run with the Polars engine and an `encode` run load: no DuckDB (only `--engine
duckdb` needs it) and no pandas (pyarrow imports it on its first conversion of NumPy input, and
on `to_numpy`, when it is installed: +42 MiB of peak RSS and ~0.2 CPU-s for nothing); `train` on
a text corpus no pyarrow either (~0.2 CPU-s and ~35 MiB of start-up: Polars does its work);
`encode` not pyarrow.compute (imported by pyarrow's `cast` and by Polars' construction of a
Series from a pyarrow array: 0.1-0.2 s of its start-up, see `buffers.series_from_arrow`).
Each command loads its own work only (`cli.commands`): `encode` not the training pipeline, the
export or the Ray and Spark glue, `train` not the encoder."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

from tests.support.corpora import corpus

pytestmark = pytest.mark.corpus

SCRIPT = """
import json, sys
from tokcolumnar.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": [m for m in ("duckdb", "pandas", "pyarrow",
                                                       "pyarrow.compute", "ray", "pyspark")
                                           if m in sys.modules],
                  "ours": sorted(m for m in sys.modules if m.startswith("tokcolumnar."))}))
"""


@pytest.mark.parametrize("preset", [None, "gpt2", "bert"])
def test_train_loads_neither_duckdb_nor_pandas_nor_pyarrow(tmp_path, preset):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, "train", str(corpus("small/en_botchan.txt")), "--out",
         str(out), "--vocab-size", "2000", "--quiet", *(["--preset", preset] if preset else [])],
        capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: result[k] for k in ("code", "loaded")} == {"code": 0, "loaded": []}
    assert "tokcolumnar.training.pipeline" in result["ours"]
    assert not {"tokcolumnar.encode.dataset", "tokcolumnar.distributed.ray_encode",
                "tokcolumnar.distributed.spark"} & set(result["ours"])
    assert (out / "tokenizer.json").exists()
    assert pl.read_parquet(out / "words.parquet")["tokens"].list.len().sum() > 0


@pytest.mark.parametrize("preset", ["gpt2", "bert"])
def test_encode_loads_neither_duckdb_nor_pandas_nor_pyarrow_compute(tmp_path, preset):
    """`encode` (BPE with long words cut into pieces, and WordPiece) writing Parquet."""
    text = corpus("small/zh_hongloumeng_300k.txt")
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "tokcolumnar", "train", str(text), "--out", str(out),
                    "--vocab-size", "5000", "--preset", preset, "--quiet"], check=True)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, "encode", str(text), "--tokenizer", str(out), "--out",
         str(tmp_path / "ids.parquet"), "--quiet"],
        capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert not {"duckdb", "pandas", "pyarrow.compute", "ray", "pyspark"} & set(result["loaded"])
    assert "tokcolumnar.encode.dataset" in result["ours"]
    assert not {"tokcolumnar.training.pipeline", "tokcolumnar.export",
                "tokcolumnar.distributed.ray_encode", "tokcolumnar.distributed.spark"} & set(
        result["ours"])
