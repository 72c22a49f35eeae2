"""encode's options are checked in one place, `encode.config.EncodeConfig`: the CLI maps its
flags to one and raises nothing itself, and the Python API refuses what the CLI refuses, with
the same message."""

from __future__ import annotations

import ast
import inspect

import pytest

from tokcolumnar.cli import commands
from tokcolumnar.encode import dataset
from tokcolumnar.encode.config import EncodeConfig
from tokcolumnar.errors import TokcolumnarError


def test_the_cli_checks_no_encode_option_itself():
    tree = ast.parse(inspect.getsource(commands.cmd_encode))
    raises = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    assert not raises, f"cmd_encode checks options itself: {raises}"


def test_encode_files_checks_no_option_before_the_run():
    """encode_files' body raises only on what the options cannot say (the tokenizer, the
    input), and on options given twice (config and keywords) or for another engine."""
    tree = ast.parse(inspect.getsource(dataset.encode_files))
    texts = [ast.unparse(n.exc) for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    allowed = ("either as config or as keywords", "encodes with Polars", "fill no block",
               "contains no rows")
    assert [t for t in texts if not any(a in t for a in allowed)] == []


BAD = [
    (dict(stride=2), "--stride needs --max-length"),
    (dict(truncation="left"), "--truncation needs --max-length"),
    (dict(rows_per_file=0), "--rows-per-file must be at least 1, got 0"),
    (dict(rows_per_file=2, max_file_size="1MB"),
     "give either --rows-per-file or --max-file-size, not both"),
    (dict(max_length=8, pack=16), "--max-length does not go with --pack"),
    (dict(pack_drop_last=True), "--pack-drop-last goes with --pack N"),
    (dict(columns=["n_tokens"]), "--columns must include ids"),
    (dict(keep_columns="all,a"), "--keep-columns all keeps every column: give it alone"),
    (dict(max_line_bytes=0), "--max-line-bytes must be at least 1, got 0"),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_the_python_api_refuses_as_the_config_does(options, message, tmp_path):
    with pytest.raises(TokcolumnarError, match=message.replace("-", r"\-")):
        EncodeConfig(**options)
    src = tmp_path / "in.txt"
    src.write_text("a b\n", encoding="utf-8")
    with pytest.raises(TokcolumnarError, match=message.replace("-", r"\-")):
        dataset.encode_files(str(tmp_path / "no-tokenizer"), [str(src)],
                             str(tmp_path / "out.parquet"), progress=False, **options)
    assert not (tmp_path / "out.parquet").exists()


def test_config_and_keywords_are_not_mixed(tmp_path):
    with pytest.raises(TokcolumnarError, match="either as config or as keywords"):
        dataset.encode_files("t", ["x"], str(tmp_path / "o.parquet"), pack=4,
                             config=EncodeConfig())


def test_other_engines_take_only_their_options():
    with pytest.raises(TokcolumnarError, match="--stats is not available with --engine ray"):
        EncodeConfig(engine="ray", stats=True)
    assert EncodeConfig(engine="spark").engine == "spark"
