"""Progress on stderr: log lines off a terminal (stderr a pipe), a redrawn line on a terminal
(a pty), nothing with --quiet; the units of sizes, rates and ETAs."""

from __future__ import annotations

import gzip
import io
import json
import os
import pty
import re
import select
import subprocess

import polars as pl
import pytest

from tests.support.cli import cli_env, command, run_cli
from tests.support.corpora import corpus
from tokcolumnar import progress
from tokcolumnar.cli import main
from tokcolumnar.progress import Progress, format_bytes, format_duration, format_rate


@pytest.fixture(autouse=True)
def not_quiet(monkeypatch):
    """Progress as a user gets it (the variable that silences it is not inherited)."""
    monkeypatch.delenv("TOKCOLUMNAR_QUIET", raising=False)


#: a line per update: every batch and every merge loop step writes one
EVERY = {"TOKCOLUMNAR_PROGRESS_EVERY": "0.000001"}

PERIODIC_MERGE = re.compile(r"merging: ([\d,]+) / ([\d,]+) merges \(\d+\.\d%\), [\d,]+ merges/s"
                            r"(, ETA \S+)?, pair count ([\d,]+)$")
DONE_MERGE = re.compile(r"merging: done, ([\d,]+) merges in \S+ \([\d,]+ merges/s\), "
                        r"last pair count ([\d,]+)$")


def num(s: str) -> int:
    return int(s.replace(",", ""))


def mb(n: int) -> str:
    """n bytes in MB as the lines show sizes between 10 and 100 MB, or under 10 MB."""
    return f"{n / 1e6:.1f} MB" if n >= 10e6 else f"{n / 1e6:.2f} MB"


# -- units -----------------------------------------------------------------------------------
def test_units():
    assert format_bytes(950) == "950 B"
    assert format_bytes(12_345) == "12.3 kB"
    assert format_bytes(274_488) == "274 kB"
    assert format_bytes(1_073_741_317) == "1.07 GB"
    assert format_bytes(5_243_136_324) == "5.24 GB"
    assert format_rate(21_349_000) == "21.3 MB/s"
    assert format_rate(500) == "0.5 kB/s"
    assert format_duration(0.4) == "0s"
    assert format_duration(45) == "45s"
    assert format_duration(725) == "12m05s"
    assert format_duration(7380) == "2h03m"


def test_rate_and_eta_from_the_clock(monkeypatch):
    # 250 of 1,000 merges after 10 s: 25 merges/s, 750 left -> 30 s
    clock = iter([100.0, 110.0, 120.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    monkeypatch.setenv("TOKCOLUMNAR_PROGRESS_EVERY", "5")
    out = io.StringIO()
    bar = Progress("merging", total=1000, unit="merges", enabled=True, stream=out)
    bar.update(250, pair=7)
    bar.close(400)
    assert out.getvalue().splitlines() == [
        "merging: 250 / 1,000 merges (25.0%), 25 merges/s, ETA 30s, pair count 7",
        "merging: done, 400 merges in 20s (20 merges/s), last pair count 7"]


def test_off_a_terminal_the_api_default_is_silent_and_a_line_waits_for_its_interval(
        monkeypatch):
    out = io.StringIO()
    Progress("merging", total=10, unit="merges", stream=out).close(10)  # enabled=None
    assert out.getvalue() == ""
    monkeypatch.delenv("TOKCOLUMNAR_PROGRESS_EVERY", raising=False)
    bar = Progress("merging", total=10, unit="merges", enabled=True, stream=out)
    for i in range(10):
        bar.update(i)  # well within 30 s: no line
    bar.close(10)  # and a stage shorter than the interval has no summary either
    assert out.getvalue() == ""
    assert progress.LOG_EVERY_S == 30


# -- off a terminal: log lines ----------------------------------------------------------------
@pytest.mark.corpus
def test_train_writes_log_lines_per_stage(tmp_path):
    src = corpus("small/en_shakespeare_500k.txt")
    out = tmp_path / "o"
    proc = run_cli("train", str(src), "--out", str(out), "--vocab-size", "600", env=EVERY)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    lines = proc.stderr.splitlines()
    counting = [x for x in lines if x.startswith("counting: ")]
    size = src.stat().st_size
    # one batch: its line, then the summary with the whole file
    assert counting[-1].startswith(f"counting: done, {format_bytes(size)} in ")
    assert counting[-1].endswith("/s)") and len(counting) >= 1
    assert format_bytes(size) == f"{size / 1e3:.0f} kB"
    merges = pl.read_parquet(out / "merges.parquet").sort("rank")
    stats = json.loads((out / "run.json").read_text())["stats"]
    periodic = [m for x in lines if (m := PERIODIC_MERGE.match(x))]
    assert len(periodic) > 10
    target = stats["vocab_size"] - stats["merges"]  # the vocabulary before merging ...
    assert {num(m.group(2)) for m in periodic} == {600 - target}  # ... leaves this many
    done = [num(m.group(1)) for m in periodic]
    assert done == sorted(done) and done[-1] <= stats["merges"]
    for m in periodic:  # the count of the pair just merged
        assert num(m.group(4)) == merges["count"][num(m.group(1)) - 1]
    summary = [m for x in lines if (m := DONE_MERGE.match(x))]
    assert len(summary) == 1
    assert num(summary[0].group(1)) == stats["merges"] == merges.height
    assert num(summary[0].group(2)) == merges["count"][-1]
    assert lines[-1].startswith("trained bpe vocab of 600 tokens")
    # stages in order: counting lines, then merging lines, then the result
    first_merge = next(i for i, x in enumerate(lines) if x.startswith("merging: "))
    assert all(not x.startswith("counting: ") for x in lines[first_merge:])


@pytest.mark.corpus
def test_wordpiece_merging_lines(tmp_path):
    src = corpus("small/en_botchan.txt")
    out = tmp_path / "o"
    proc = run_cli("train", str(src), "--out", str(out), "--model", "wordpiece",
                   "--vocab-size", "400", env=EVERY)
    assert proc.returncode == 0, proc.stderr
    merges = pl.read_parquet(out / "merges.parquet").sort("rank")
    periodic = [m for x in proc.stderr.splitlines() if (m := PERIODIC_MERGE.match(x))]
    assert periodic
    for m in periodic:
        assert num(m.group(4)) == merges["count"][num(m.group(1)) - 1]
    summary = [m for x in proc.stderr.splitlines() if (m := DONE_MERGE.match(x))]
    assert [num(m.group(1)) for m in summary] == [merges.height]


@pytest.mark.corpus
@pytest.mark.parametrize("kind", ["gzip", "parquet"])
@pytest.mark.parametrize("as_uri", [False, True])
def test_compressed_input_counts_compressed_bytes(tmp_path, kind, as_uri):
    # ~27 MB of text, ~10 MB gzipped or in Parquet: the total and every position are those of
    # the file on disk (Parquet's by the rows read, in 20 row groups); the same for its
    # file:// URI, read through an Arrow filesystem (no descriptor of ours to follow)
    text = corpus("medium/en.txt").read_bytes()
    if kind == "gzip":
        src = tmp_path / "en.txt.gz"
        src.write_bytes(gzip.compress(text, compresslevel=1))
    else:
        src = tmp_path / "en.parquet"
        lines = text.decode().splitlines()
        pl.DataFrame({"text": lines}).write_parquet(src, row_group_size=len(lines) // 20 + 1)
    size = src.stat().st_size
    assert size < len(text) / 2
    proc = run_cli("count", f"file://{src}" if as_uri else str(src), "--out",
                   str(tmp_path / "w.parquet"), env=EVERY)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("counting: ")]
    periodic = [re.match(r"counting: ([\d.]+) MB / ([\d.]+ MB) \(([\d.]+)%\), [\d.]+ [kM]B/s"
                         r"(, ETA \S+)?$", x) for x in lines[:-1]]
    assert len(periodic) >= 3 and all(periodic), lines
    assert {m.group(2) for m in periodic} == {mb(size)}
    read = [float(m.group(1)) for m in periodic]
    # positions of the file's bytes, not the text's (27 MB): the reader runs a few batches
    # ahead of the count (two counted at once, one drawn, one read ahead), which on this
    # 10 MB file is most of it by the first line, so only the bound and the order are checked
    assert read == sorted(read) and 0 < read[0] and read[-1] <= size / 1e6 + 0.05  # shown to 0.1 MB
    assert lines[-1].startswith(f"counting: done, {mb(size)} in ")


@pytest.mark.corpus
def test_standard_input_has_no_total_and_no_eta(tmp_path):
    src = corpus("small/en_botchan.txt")
    proc = subprocess.run(command("count", "-", "--out", str(tmp_path / "w.parquet")),
                          input=src.read_bytes(), capture_output=True, env=cli_env(EVERY))
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.decode().splitlines() if x.startswith("counting: ")]
    assert lines and all("/ " not in x and "ETA" not in x for x in lines), lines
    # the bytes read are the text's
    assert lines[-1].startswith(f"counting: done, {format_bytes(src.stat().st_size)} in ")


@pytest.mark.corpus
def test_encode_writes_bytes_and_rows(tmp_path):
    src = corpus("small/en_botchan.txt")
    tok = tmp_path / "tok"
    assert run_cli("train", str(src), "--out", str(tok), "--vocab-size", "400",
                   "-q").returncode == 0
    proc = run_cli("encode", str(src), "--tokenizer", str(tok), "--out",
                   str(tmp_path / "e.parquet"), env=EVERY)
    assert proc.returncode == 0, proc.stderr
    rows = pl.read_parquet(tmp_path / "e.parquet").height
    done = [x for x in proc.stderr.splitlines() if x.startswith("encoding: done, ")]
    assert done == [x for x in done if x.startswith(
        f"encoding: done, {format_bytes(src.stat().st_size)}, {rows:,} rows in ")] and done
    assert proc.stderr.splitlines()[-1] == f"encoded {rows:,} rows -> {tmp_path / 'e.parquet'}"


@pytest.mark.corpus
@pytest.mark.parametrize("quiet", ["--quiet", "-q"])
def test_quiet_is_silent(tmp_path, quiet):
    src = corpus("small/en_botchan.txt")
    tr = run_cli("train", str(src), "--out", str(tmp_path / "t"), "--vocab-size", "400", quiet,
                 env=EVERY)
    assert tr.returncode == 0 and tr.stderr == "", tr.stderr
    co = run_cli("count", str(src), "--out", str(tmp_path / "w.parquet"), quiet, env=EVERY)
    assert co.returncode == 0 and co.stderr == "", co.stderr
    en = run_cli("encode", str(src), "--tokenizer", str(tmp_path / "t"), "--out",
                 str(tmp_path / "e.parquet"), quiet, env=EVERY)
    assert en.returncode == 0 and en.stderr == "", en.stderr


def test_main_with_quiet_leaves_progress_on_for_later_commands(tmp_path, monkeypatch):
    # before: main([..., "--quiet"]) set TOKCOLUMNAR_QUIET for the rest of the process
    src = tmp_path / "c.txt"
    src.write_text("low lower newest widest\n" * 3, encoding="utf-8")
    assert main(["count", str(src), "--out", str(tmp_path / "w.parquet"), "--quiet"]) == 0
    assert "TOKCOLUMNAR_QUIET" not in os.environ
    monkeypatch.setenv("TOKCOLUMNAR_PROGRESS_EVERY", EVERY["TOKCOLUMNAR_PROGRESS_EVERY"])
    out = io.StringIO()
    Progress("merging", total=1, unit="merges", enabled=True, stream=out).close(1)
    assert out.getvalue().startswith("merging: done, 1 merges in ")


def test_an_error_after_progress_is_still_one_error_line(tmp_path):
    # a word over --max-word-chars is found while counting: no summary line for a failed stage
    src = tmp_path / "c.txt"
    src.write_text("ab " * 10 + "x" * 50 + "\n", encoding="utf-8")
    proc = run_cli("train", str(src), "--out", str(tmp_path / "o"), "--max-word-chars", "20")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [x for x in proc.stderr.splitlines()
                                        if x.startswith("tokcolumnar: error: ")]
    assert len(proc.stderr.splitlines()) == 1


# -- on a terminal: one redrawn line -----------------------------------------------------------
@pytest.mark.corpus
def test_terminal_line_is_redrawn(tmp_path):
    src = corpus("small/en_shakespeare_500k.txt")
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(command("train", str(src), "--out", str(tmp_path / "o"),
                                    "--vocab-size", "3000"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=secondary, env=cli_env())
    os.close(secondary)
    data = b""
    while True:  # read the terminal until the child closes it
        ready, _, _ = select.select([primary], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(primary, 1 << 16)
        except OSError:  # EIO: the child exited
            break
        if not chunk:
            break
        data += chunk
    os.close(primary)
    assert proc.wait(timeout=120) == 0
    text = data.decode()
    # each state starts by going back to the line's start and clearing it; a stage's last
    # state stays on its own line (ended by a newline; the terminal shows \r\n)
    assert "\r\x1b[Kcounting: done, " in text
    assert "\r\x1b[Kmerging: done, " in text
    states = text.split("\r\x1b[K")[1:]
    stages = [s.split(":")[0] for s in states]
    assert set(stages) == {"counting", "merging"}
    assert stages == sorted(stages)  # counting's states, then merging's
    for s in states:
        if ": done, " in s:
            assert re.search(r"\r?\n", s)
        else:
            assert "\n" not in s  # a redraw replaces the line, never adds one
    assert states[-1].rstrip().splitlines()[-1].startswith("trained bpe vocab of 3,000 tokens")
