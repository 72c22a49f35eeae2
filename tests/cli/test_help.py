"""CLI polish (issue 28, item 3): every option of every sub-command has a description,
`--version` prints the version, special tokens may be given one by one (`--special-token`,
which may hold a comma)."""

from __future__ import annotations

import argparse
import json

import pytest

import tokcolumnar
from tests.support.cli import assert_clean_error, run_cli
from tests.support.corpora import PRIMER
from tokcolumnar.cli.parser import build_parser
from tokcolumnar.version import package_version


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """The program's parser and each sub-command's (sub-commands of sub-commands too)."""
    found = [("tokcolumnar", build_parser())]
    for name, parser in found:  # (grows while it is walked)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend((f"{name} {sub}", p) for sub, p in action.choices.items())
    return found


def test_every_subcommand_is_walked():
    names = {name for name, _ in _parsers()}
    assert {"tokcolumnar train", "tokcolumnar count", "tokcolumnar encode", "tokcolumnar sql",
            "tokcolumnar crosscheck", "tokcolumnar report",
            "tokcolumnar compare"} <= names


@pytest.mark.parametrize("name, parser", _parsers(), ids=lambda x: x if isinstance(x, str)
                         else "")
def test_every_option_has_help(name, parser):
    missing = [action.option_strings[0] if action.option_strings else action.dest
               for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction)
               and (not action.help or action.help == argparse.SUPPRESS
                    or not action.help.strip())]
    assert not missing, f"{name}: no help text for {', '.join(missing)}"


def test_every_subcommand_has_help():
    for _, parser in _parsers():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                described = {a.dest for a in action._choices_actions if a.help}
                assert described == set(action.choices), set(action.choices) - described


def test_help_runs_for_every_subcommand():
    """`--help` formats (a `%` in a help text would break argparse's formatting)."""
    for name, parser in _parsers():
        text = parser.format_help()
        assert "usage:" in text, name


def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tokcolumnar {tokcolumnar.__version__}"
    assert proc.stderr == ""


def test_version_of_a_checkout_is_its_own():
    """Run from this checkout (not installed in the test environment, or installed from
    another copy): the checkout's `__version__`."""
    assert package_version() == tokcolumnar.__version__


class _Dist:
    version = "9.9.9"

    def __init__(self, root):
        self.root = root

    def locate_file(self, path):
        return self.root / path


def test_version_of_an_installed_copy(monkeypatch, tmp_path):
    """An installed distribution's version is used when it is the copy running, and only
    then (another copy installed beside a checkout has another version)."""
    from importlib import metadata
    from pathlib import Path

    here = Path(tokcolumnar.__file__).resolve().parents[1]
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(here))
    assert package_version() == "9.9.9"
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(tmp_path))
    assert package_version() == tokcolumnar.__version__


def test_special_token_repeatable_and_in_order(tmp_path):
    out = tmp_path / "o"
    proc = run_cli("train", str(PRIMER), "--out", str(out), "-q", "--vocab-size", "200",
                   "--special-token", "<a,b>", "--special-tokens", "[X],[Y]",
                   "--special-token", "[Z]")
    assert proc.returncode == 0, proc.stderr
    tok = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert [(t["id"], t["content"]) for t in tok["added_tokens"]] == [
        (0, "<a,b>"), (1, "[X]"), (2, "[Y]"), (3, "[Z]")]
    # the comma token is one token when encoding
    ours = tokcolumnar.Tokenizer.from_dir(out)
    assert ours.encode("x <a,b> y").tokens.count("<a,b>") == 1


def test_special_tokens_empty_clears_a_preset_default(tmp_path):
    """`--special-tokens ''` still means none (the preset's default is not used)."""
    out = tmp_path / "o"
    proc = run_cli("train", str(PRIMER), "--out", str(out), "-q", "--vocab-size", "300",
                   "--preset", "gpt2", "--special-tokens", "")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"] == []


def test_special_token_duplicate_across_flags(tmp_path):
    proc = run_cli("train", str(PRIMER), "--out", str(tmp_path / "o"), "--special-tokens",
                   "[A],[B]", "--special-token", "[A]")
    assert_clean_error(proc, "--special-tokens contains duplicates: [A]")
