"""Standard output in an encoding that cannot hold every character (`tokcolumnar.stdout`): a
result is printed whole, each character the encoding lacks as an escape (JSON's own in JSON),
never `internal error: UnicodeEncodeError` with nothing printed."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import cli_env, command
from tokcolumnar.cli import main

QUERY = "SELECT token, id FROM vocab ORDER BY id"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A model whose tokens are mostly not ASCII (Latin-1 letters, CJK, an emoji)."""
    d = tmp_path_factory.mktemp("stdout")
    text = d / "t.txt"
    text.write_text("café naïve résumé 日本語 東京 😀 plain\n" * 20, encoding="utf-8")
    out = d / "out"
    assert main(["train", str(text), "--out", str(out), "--vocab-size", "60", "--quiet"]) == 0
    return out


def _sql(model: Path, fmt: str, encoding: str) -> tuple[int, str, str]:
    """`sql` with standard output in `encoding`: (exit code, stdout decoded from it, stderr)."""
    proc = subprocess.run(command("sql", str(model), QUERY, "--format", fmt),
                          capture_output=True, timeout=300,
                          env=cli_env({"PYTHONIOENCODING": encoding}))
    return proc.returncode, proc.stdout.decode(encoding), proc.stderr.decode("utf-8", "replace")


def _escaped(token: str, encoding: str) -> str:
    return token.encode(encoding, "backslashreplace").decode(encoding)


@pytest.mark.duckdb
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_json_keeps_every_token_in_json_escapes(model, encoding):
    tokens = pl.read_parquet(model / "vocab.parquet").sort("id")["token"].to_list()
    assert any(not t.isascii() for t in tokens)
    rc, out, err = _sql(model, "json", encoding)
    assert rc == 0, err
    assert [json.loads(line)["token"] for line in out.splitlines()] == tokens


@pytest.mark.duckdb
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_text_formats_print_escapes(model, fmt, encoding):
    tokens = pl.read_parquet(model / "vocab.parquet").sort("id")["token"].to_list()
    rc, out, err = _sql(model, fmt, encoding)
    assert rc == 0, err
    assert "internal error" not in err
    want = [_escaped(t, encoding) for t in tokens]
    if fmt == "csv":
        assert pl.read_csv(io.StringIO(out))["token"].to_list() == want
        return
    assert "┌" not in out  # ASCII borders: the encoding has no box-drawing characters
    rows = [line for line in out.splitlines() if line.startswith("|") and "---" not in line]
    cells = [row.split("|")[1].strip() for row in rows[2:]]  # after the header's two lines
    assert cells == want
