"""Test tiers and shared settings.

- Markers (registered in pyproject.toml): `slow` (left out of the fast tier, `python -m pytest
  -m "not slow"`), `duckdb` (runs the DuckDB engine or SQL), `corpus` (reads the real corpora,
  see tests/support/corpora.py). A test that reads a corpus or runs DuckDB without its marker
  fails (tests/support/markers.py).
- Hypothesis profiles: `ci` (thorough: the full run) and `dev` (fewer examples: loaded when the
  run leaves out the slow tests). `HYPOTHESIS_PROFILE=ci|dev` (or `--hypothesis-profile`)
  chooses explicitly.
- The package under test is this checkout's `tokcolumnar`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import markers

ROOT = Path(__file__).resolve().parents[1]

# `ci` runs 50 examples a test, the unit a test may scale (tests/support/examples.py): half
# Hypothesis' default, for CI's 45-minute budget on two cores (the full run's 90 property tests
# took ~6 of its 50 minutes with 100); `dev` runs 10.
_COMMON = {"deadline": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much]}
settings.register_profile("ci", max_examples=50, **_COMMON)
settings.register_profile("dev", max_examples=10, **_COMMON)


def _check_package_under_test() -> None:
    """The tests must import this checkout's package. An editable install of another checkout
    (setuptools' finder on sys.meta_path) would also serve modules that exist only there (a
    module removed here would still import): drop such finders."""
    import tokcolumnar

    here = Path(tokcolumnar.__file__).resolve().parent
    if here != ROOT / "tokcolumnar":
        raise pytest.UsageError(f"the tests import tokcolumnar from {here}, not from this "
                                f"checkout ({ROOT}): run them from {ROOT} or set PYTHONPATH")
    for finder in list(sys.meta_path):
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict) and "tokcolumnar" in mapping and (
                Path(mapping["tokcolumnar"]).resolve() != here):
            sys.meta_path.remove(finder)


def _guard_duckdb() -> None:
    """`duckdb.connect` fails a test that is not marked `duckdb`."""
    try:
        import duckdb
    except ImportError:  # the package requires DuckDB; its tests will say so
        return
    connect = duckdb.connect

    def guarded(*args, **kwargs):
        markers.require("duckdb", "runs DuckDB")
        return connect(*args, **kwargs)

    duckdb.connect = guarded


def pytest_configure(config: pytest.Config) -> None:
    profile = config.getoption("hypothesis_profile", None) or os.environ.get(
        "HYPOTHESIS_PROFILE")
    if not profile:
        markexpr = config.getoption("markexpr", "") or ""
        profile = "dev" if "not slow" in " ".join(markexpr.split()) else "ci"
    settings.load_profile(profile)
    _check_package_under_test()
    _guard_duckdb()
    if not hasattr(config, "workerinput"):  # the controller, before any worker starts
        _compile_package()


def _compile_package() -> None:
    """Write the package's bytecode once, before the tests start the command line hundreds of
    times: with PYTHONDONTWRITEBYTECODE set (as in some CI environments) no process writes it,
    and each `python -m tokcolumnar` compiled every module it imports again (~0.2 CPU-s)."""
    import compileall

    import tokcolumnar

    compileall.compile_dir(str(Path(tokcolumnar.__file__).parent), quiet=1)


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {settings.get_current_profile_name()}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    markers.CURRENT = frozenset(m.name for m in item.iter_markers())
    try:
        yield
    finally:
        markers.CURRENT = None


@pytest.fixture
def small_disk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A real file system of 512 KiB (or the size given as the fixture's parameter): a tmpfs,
    which needs root (a full disk, for the tests of what a run leaves behind)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    size = getattr(request, "param", "512k")
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)
