"""`--engine ray` (and `--engine spark`) on the command line: the same outputs as the
single-machine commands, and one-line errors when Ray or Spark is missing or the options do not
fit."""

from __future__ import annotations

import importlib.util
import os

import polars as pl
import pytest

from tests.support.cli import ROOT, error_line, run_cli
from tests.support.corpora import corpus
from tests.support.markers import SLOW_ONLY

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed (pip install 'tokcolumnar[ray]')")
#: Each run starts its own local Ray: 2 CPUs, quiet.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DATA_LOG_LEVEL": "ERROR"}


def _without(package: str, tmp_path) -> tuple[object, dict[str, str]]:
    """A small corpus and an environment in which importing `package` fails."""
    fake = tmp_path / "site" / package
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(f"raise ImportError('No module named {package}')\n")
    src = tmp_path / "a.txt"
    src.write_text("a b c\n")
    return src, {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}


def test_missing_ray_is_one_line_saying_how_to_install(tmp_path):
    src, env = _without("ray", tmp_path)
    for args in (["count", str(src), "--out", str(tmp_path / "w.parquet"), "--engine", "ray"],
                 ["train", str(src), "--out", str(tmp_path / "t"), "--engine", "ray"],
                 ["encode", str(src), "--tokenizer", str(src), "--out",
                  str(tmp_path / "e"), "--engine", "ray"]):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 2
        assert error_line(proc.stderr) == ("tokcolumnar: error: --engine ray needs Ray: "
                                           "pip install 'tokcolumnar[ray]'")
    assert not (tmp_path / "w.parquet").exists() and not (tmp_path / "t").exists()


def test_missing_spark_is_one_line_saying_how_to_install(tmp_path):
    src, env = _without("pyspark", tmp_path)
    for args in (["count", str(src), "--out", str(tmp_path / "w.parquet"), "--engine", "spark"],
                 ["encode", str(src), "--tokenizer", str(src), "--out",
                  str(tmp_path / "e"), "--engine", "spark"]):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 2
        assert error_line(proc.stderr) == (
            "tokcolumnar: error: --engine spark needs Spark: pip install 'tokcolumnar[spark]' "
            "(and Java 17 or later)")


def test_ray_address_needs_the_ray_engine(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("a b c\n")
    proc = run_cli("count", str(src), "--out", str(tmp_path / "w.parquet"), "--ray-address",
                   "auto")
    assert proc.returncode == 2
    assert error_line(proc.stderr) == "tokcolumnar: error: --ray-address needs --engine ray"


@needs_ray
@pytest.mark.slow
@pytest.mark.corpus
def test_count_train_and_encode_on_ray_match_the_single_machine_commands(tmp_path):
    src = str(corpus("small/en_botchan.txt"))
    outs = {}
    for engine in ("polars", "ray"):
        count = run_cli("count", src, "--out", str(tmp_path / f"{engine}.parquet"),
                        "--engine", engine, "--quiet", env=RAY_ENV)
        assert count.returncode == 0 and count.stderr == "", count.stderr
        tr = run_cli("train", src, "--out", str(tmp_path / engine), "--engine", engine,
                     "--vocab-size", "600", "--quiet", env=RAY_ENV)
        assert tr.returncode == 0 and tr.stderr == "", tr.stderr
        outs[engine] = pl.read_parquet(tmp_path / f"{engine}.parquet")
    assert outs["ray"].equals(outs["polars"])
    assert (tmp_path / "ray" / "tokenizer.json").read_bytes() == (
        tmp_path / "polars" / "tokenizer.json").read_bytes()
    single = run_cli("encode", src, "--tokenizer", str(tmp_path / "polars"), "--out",
                     str(tmp_path / "enc.parquet"), "--quiet")
    assert single.returncode == 0, single.stderr
    on_ray = run_cli("encode", src, "--tokenizer", str(tmp_path / "polars"), "--out",
                     str(tmp_path / "enc"), "--engine", "ray", env=RAY_ENV)
    assert on_ray.returncode == 0, on_ray.stderr
    assert on_ray.stderr.strip().endswith(f"-> {tmp_path / 'enc'}")
    parts = sorted((tmp_path / "enc").glob("part-*.parquet"))
    assert parts and pl.concat([pl.read_parquet(p) for p in parts]).equals(
        pl.read_parquet(tmp_path / "enc.parquet"))


@needs_ray
@pytest.mark.slow
@pytest.mark.corpus
@SLOW_ONLY  # a minute or more of Ray start-up and scheduling: docs/testing.md
def test_ray_commands_read_file_uris_as_local_paths(tmp_path):
    # a file:// glob on Ray: the single-machine words and ids of the local files
    (tmp_path / "in").mkdir()
    for name in ("en_botchan.txt", "udhr_multiscript.txt"):
        (tmp_path / "in" / name).write_bytes(corpus(f"small/{name}").read_bytes())
    local, uri = str(tmp_path / "in"), f"file://{tmp_path / 'in'}/*.txt"
    one = run_cli("count", local, "--out", str(tmp_path / "one.parquet"), "--quiet")
    assert one.returncode == 0, one.stderr
    on_ray = run_cli("count", uri, "--out", str(tmp_path / "ray.parquet"), "--engine", "ray",
                     "--quiet", env=RAY_ENV)
    assert on_ray.returncode == 0, on_ray.stderr
    assert pl.read_parquet(tmp_path / "ray.parquet").equals(
        pl.read_parquet(tmp_path / "one.parquet"))
    tr = run_cli("train", local, "--out", str(tmp_path / "tok"), "--vocab-size", "2000",
                 "--quiet")
    assert tr.returncode == 0, tr.stderr
    one = run_cli("encode", local, "--tokenizer", str(tmp_path / "tok"), "--out",
                  str(tmp_path / "enc.parquet"), "--quiet")
    assert one.returncode == 0, one.stderr
    on_ray = run_cli("encode", uri, "--tokenizer", str(tmp_path / "tok"), "--out",
                     str(tmp_path / "enc"), "--engine", "ray", "--quiet", env=RAY_ENV)
    assert on_ray.returncode == 0, on_ray.stderr
    parts = sorted((tmp_path / "enc").glob("part-*.parquet"))
    assert parts and pl.concat([pl.read_parquet(p) for p in parts]).equals(
        pl.read_parquet(tmp_path / "enc.parquet"))
