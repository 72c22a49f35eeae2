"""`tokcolumnar report` and `compare` through the command line: the HTML opened in real headless
Chromium (no console error, no request leaving the machine, every chart rendered with data
marks), the PNGs, `compare --format json|csv`, and the clean errors.

The page tests need the `report` extra and a Chromium binary. Without them they are skipped --
unless TOKCOLUMNAR_REQUIRE_CHROMIUM=1 (CI sets it), where a missing extra or browser fails."""

from __future__ import annotations

import csv
import io
import json
import os
import struct
from pathlib import Path

import pytest

from tests.support.browser import INSTALL_HINT, check_page, find_chromium
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import corpus

from .conftest import split_udhr

pytestmark = pytest.mark.corpus

REQUIRED = os.environ.get("TOKCOLUMNAR_REQUIRE_CHROMIUM", "") not in ("", "0")


def have_extra() -> bool:
    try:
        import altair  # noqa: F401
        import vl_convert  # noqa: F401
    except ImportError:
        return False
    return True


def needs_page_tools() -> None:
    """Skip (or with TOKCOLUMNAR_REQUIRE_CHROMIUM=1 fail) without the extra or a browser."""
    missing = []
    if not have_extra():
        missing.append("the report extra is not installed: pip install -e '.[report]'")
    if find_chromium() is None:
        missing.append(INSTALL_HINT)
    if missing:
        if REQUIRED:
            pytest.fail("; ".join(missing) + " (and TOKCOLUMNAR_REQUIRE_CHROMIUM is set)",
                        pytrace=False)
        pytest.skip("; ".join(missing))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def assert_rendered(result: dict, expected: int) -> None:
    assert result["errors"] == [], result["errors"]
    assert result["remote_requests"] == [], result["remote_requests"]
    assert result["error"] is None
    assert result["rendered"] == str(expected), result
    assert len(result["charts"]) == expected
    for chart in result["charts"]:
        assert chart["svg"] and chart["width"] > 100 and chart["height"] > 100, chart
        assert chart["marks"] > 0, chart  # data drawn, not only axes


REPORT_CHARTS = ["merge_count", "entering", "token_lengths", "scripts", "prefix_curve",
                 "metrics"]


def test_report_page_renders_in_chromium_and_pngs_are_written(tokdir, tmp_path: Path) -> None:
    needs_page_tools()
    d = tokdir("bpe")
    en, ru = corpus("small/en_taylorswift_wiki.txt"), corpus("small/ru_pushkin_300k.txt")
    out, png = tmp_path / "report.html", tmp_path / "png"
    proc = run_cli("report", str(d), "--text", str(en), str(ru), "--out", str(out),
                   "--png", str(png))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text(encoding="utf-8")
    # offline: no address of a script or style sheet outside the page
    assert "<script src" not in page and "cdn" not in page.lower().replace("cdna", "")
    # the dropped-characters warning: an English BPE without an unknown token on Russian
    assert "ru_pushkin_300k.txt: " in page and "could not be represented" in page
    assert "en_taylorswift_wiki.txt" in page and '"vocab_size"' not in page[:200]
    assert_rendered(check_page(out), len(REPORT_CHARTS))
    assert sorted(p.name for p in png.iterdir()) == sorted(f"{c}.png" for c in REPORT_CHARTS)
    for p in png.iterdir():
        w, h = png_size(p)
        assert w > 300 and h > 200 and p.stat().st_size > 10_000, (p, w, h)


@pytest.mark.slow
def test_report_without_text_and_wordpiece(tokdir, tmp_path: Path) -> None:
    """No --text: the vocabulary charts only. WordPiece: the curve at grid points."""
    needs_page_tools()
    out = tmp_path / "r.html"
    proc = run_cli("report", str(tokdir("gpt2")), "--out", str(out), "--quiet")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert_rendered(check_page(out), 4)
    proc = run_cli("report", str(tokdir("bert")), "--text",
                   str(corpus("small/en_taylorswift_wiki.txt")), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert_rendered(check_page(out), 6)


def test_compare_page_on_parallel_text(tokdir, tmp_path: Path) -> None:
    needs_page_tools()
    files = split_udhr(corpus("small/udhr_multiscript.txt"), tmp_path)
    assert len(files) == 14
    out = tmp_path / "compare.html"
    proc = run_cli("compare", str(tokdir("gpt2")), str(tokdir("multi")), "--text",
                   *map(str, files[:6]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert_rendered(check_page(out), 2)


def test_the_checker_sees_a_broken_chart(tmp_path: Path) -> None:
    """The browser check itself: a chart whose spec Vega rejects gives a console error and
    no rendered flag."""
    needs_page_tools()
    from tokcolumnar.report.page import page

    bad = {"data": {"values": [{"a": 1}]}, "mark": "bar",
           "transform": [{"calculate": "datum.a +* (", "as": "b"}],
           "encoding": {"x": {"field": "b", "type": "quantitative"}}}
    good = {"data": {"values": [{"a": 1}]}, "mark": "bar",
            "encoding": {"x": {"field": "a", "type": "quantitative"}}}
    f = tmp_path / "bad.html"
    f.write_text(page("broken", {"good": good, "bad": bad}, []), encoding="utf-8")
    result = check_page(f, timeout=20)
    assert result["errors"] and result["rendered"] is None and result["error"], result


def metrics_rows(fmt: str, stdout: str) -> list[dict]:
    if fmt == "json":
        return json.loads(stdout)
    return list(csv.DictReader(io.StringIO(stdout)))


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_compare_prints_the_metrics_table(tokdir, tmp_path: Path, fmt: str) -> None:
    """One row per tokenizer x file with snake_case metric names; no extra needed."""
    files = split_udhr(corpus("small/udhr_multiscript.txt"), tmp_path)
    en, ru = files[0], files[5]
    proc = run_cli("compare", str(tokdir("bpe")), str(tokdir("gpt2") / "tokenizer.json"),
                   "--text", str(en), str(ru), "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    rows = metrics_rows(fmt, proc.stdout)
    assert [(r["tokenizer"], r["file"]) for r in rows] == [
        ("bpe", en.name), ("bpe", ru.name), ("tokenizer.json", en.name),
        ("tokenizer.json", ru.name)]
    for key in ("bytes_per_token", "chars_per_token", "fertility", "split_word_share",
                "unknown_rate", "unknown_char_share", "vocab_utilization",
                "renyi_efficiency", "parity"):
        assert all(key in r for r in rows), key
    assert float(rows[0]["parity"]) == 1.0 and float(rows[2]["parity"]) == 1.0
    # byte-level needs many more tokens for Cyrillic than for the English original
    assert float(rows[3]["parity"]) > 3
    # the English whitespace BPE drops the Cyrillic characters: said, not hidden
    assert float(rows[1]["unknown_char_share"]) > 0.9
    # and said on stderr, naming the tokenizer and the file (byte-level represents everything)
    notes = [line for line in proc.stderr.splitlines() if line.startswith("tokcolumnar: note:")]
    assert any(f"bpe, {ru.name}: 9" in line for line in notes), proc.stderr
    assert not any("tokenizer.json" in line for line in notes), proc.stderr
    assert float(rows[3]["unknown_char_share"]) == 0
    assert int(rows[0]["bytes"]) == len(en.read_bytes())


def test_errors_are_one_line(tokdir, tmp_path: Path) -> None:
    d = tokdir("bpe")
    text = corpus("small/en_taylorswift_wiki.txt")
    assert_clean_error(run_cli("report", str(tmp_path / "nope"), "--out",
                               str(tmp_path / "r.html")),
                       "not a training directory" if have_extra() else "tokcolumnar[report]")
    assert_clean_error(run_cli("compare", str(d), "--text", str(text)), "--out")
    assert_clean_error(run_cli("compare", str(d), "--text", str(tmp_path / "missing.txt"),
                               "--format", "csv"), "missing.txt")
    # an existing file we did not write is not replaced
    other = tmp_path / "mine.html"
    other.write_text("not ours")
    proc = run_cli("report", str(d), "--out", str(other))
    if have_extra():
        assert_clean_error(proc, "mine.html")
    assert other.read_text() == "not ours"


def test_missing_extra_is_one_line_naming_it(tokdir, tmp_path: Path) -> None:
    """Without Altair the page commands say which extra to install (exit 2)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "altair.py").write_text("raise ImportError('no altair here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          str(shadow), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("report", str(tokdir("bpe")), "--out", str(tmp_path / "r.html"), env=env)
    assert_clean_error(proc, "pip install 'tokcolumnar[report]'")
    assert not (tmp_path / "r.html").exists()
