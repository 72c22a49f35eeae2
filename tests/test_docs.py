"""Every code block of README.md and docs/*.md runs, and the output it shows is the real one.

A fenced block's info string says how it is checked (the first word is its language, as
GitHub renders it; the other words are ours):

- `python` with `>>>` lines: a doctest (ELLIPSIS on: `...` stands for output that changes from
  run to run, such as timings). Without `>>>`: executed. The blocks of one page share their
  names, in page order.
- `console`: a transcript. Each `$ command` (continued by a trailing backslash) runs in bash;
  the lines after it, up to the next `$`, are its stdout and stderr together, compared as a
  doctest's output is. It must exit 0, or 2 when its last line is a `tokcolumnar: error:`.
- `bash` / `sh`: run with `bash -e -o pipefail`; its output is not compared.
- `text`: not code (a file tree, a recorded benchmark printout): not run.
- `no-test: REASON` after the language: not run, with the reason (kept to blocks that need a
  network, a cluster, or minutes of benchmark; `NO_TEST_LIMIT` bounds how many).
- `slow`: runs in the slow tier only; a page's later blocks may use its results, so the fast
  tier runs the page without its slow blocks and the slow tier runs all of it.
- `needs=MODULE,...`: the block needs optional packages (an extra); without them it is skipped
  and the page's test reports it (as the other tests of that extra do).

Every page's blocks run in order in one scratch directory holding a copy of `data/`, the `sql/`
folder and the corpora as `small/` and `medium/` (so a page writes `small/en_botchan.txt`),
with `tokcolumnar` on PATH as this checkout's `python -m tokcolumnar`.

The README's first command installs the package into a new virtual environment: the test strips
that install prefix (`python3 -m venv .venv && . .venv/bin/activate && pip install ... && `),
checks the extras it names exist, and runs the rest here. The test command is not run (it is
the whole suite, this test included): it must be the command `.ci/run` runs."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import corpora
from tests.support.cli import cli_env
from tests.support.markers import SLOW_ONLY

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "console", "bash", "sh", "text"}
NO_TEST_LIMIT = 12
INSTALL = re.compile(r"^python3 -m venv \.venv && \. \.venv/bin/activate && "
                     r"pip install (?:-q )?-e (\.|\"\.\[([a-z,]+)\]\") && ")
TEST_COMMAND = ('python3 -m venv .venv && . .venv/bin/activate && '
                'pip install -q -e ".[test,report,zh,ja,ray,spark]" && python -m pytest')
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    no_test: str | None = None  # the reason
    slow: bool = False
    needs: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their info strings read."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        words = info.split()
        b = Block(page, start + 1, words[0] if words else "", "\n".join(body) + "\n")
        rest = info.strip()[len(b.lang):].strip()
        if rest.startswith("no-test"):
            b.no_test = rest[len("no-test"):].lstrip(":").strip()
        else:
            for w in rest.split():
                if w == "slow":
                    b.slow = True
                elif w.startswith("needs="):
                    b.needs = w[len("needs="):].split(",")
                else:
                    raise AssertionError(f"{b.where}: unknown word {w!r} in the info string")
        out.append(b)
    return out


ALL = {page: blocks(page) for page in PAGES}


def _uses_corpora(b: Block) -> bool:
    return bool(re.search(r"(?<![\w/])(small|medium)/", b.text))


def _marks(page: Path, slow: bool) -> list[pytest.MarkDecorator]:
    todo = [b for b in ALL[page] if not b.no_test and (slow or not b.slow)]
    text = "".join(b.text for b in todo)
    marks = [pytest.mark.corpus] if any(_uses_corpora(b) for b in todo) else []
    if re.search(r"tokcolumnar (sql|crosscheck)|--engine duckdb|engine=\"duckdb\"", text):
        marks.append(pytest.mark.duckdb)
    if slow:
        marks.append(pytest.mark.slow)
    return marks


def _runnable(page: Path, slow: bool) -> bool:
    return any(not b.no_test and b.lang != "text" and (slow or not b.slow) for b in ALL[page])


def _ids(page: Path) -> str:
    return str(page.relative_to(ROOT))


# ---------------------------------------------------------------- the blocks' declarations

def test_every_block_declares_how_it_is_checked():
    bad = [f"{b.where}: language {b.lang!r}" for bs in ALL.values() for b in bs
           if b.lang not in LANGUAGES]
    assert not bad, "blocks without a known language:\n" + "\n".join(bad)
    reasonless = [b.where for bs in ALL.values() for b in bs if b.no_test == ""]
    assert not reasonless, f"no-test blocks must say why: {reasonless}"
    no_test = [f"{b.where}: {b.no_test}" for bs in ALL.values() for b in bs if b.no_test]
    assert len(no_test) <= NO_TEST_LIMIT, "too many blocks left untested:\n" + "\n".join(no_test)


def test_no_indented_code_blocks():
    """An indented (4-space) code block would escape this test: every block is fenced."""
    bad = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        fenced = False
        for n, (prev, line) in enumerate(zip([""] + lines, lines), 1):
            if FENCE.match(line):
                fenced = not fenced
            elif (not fenced and not prev.strip() and line.startswith("    ")
                  and line.strip() and not re.match(r"\s*([-*+]|\d+\.|\|)", line)):
                bad.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()[:60]}")
    assert not bad, "indented code blocks (fence them):\n" + "\n".join(bad)


def test_readme_is_short_and_links_its_pages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    missing = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in readme]
    assert not missing, f"docs pages the README does not link: {missing}"
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|png))(?:#[\w-]+)?\)", readme):
        assert (ROOT / target).exists(), target


def test_readme_test_command_is_what_ci_runs():
    readme = ALL[ROOT / "README.md"]
    assert any(b.text.strip() == TEST_COMMAND for b in readme), TEST_COMMAND
    ci = " ".join((ROOT / ".ci/run").read_text(encoding="utf-8").replace("\\\n", " ").split())
    assert "pip install -q -e \".[test,report,zh,ja,ray,spark]\"" in ci
    assert re.search(r"&& (\w+=\S+ )*python -m pytest$", ci.strip()), ci


# ---------------------------------------------------------------- running a page

class Session:
    """A page's scratch directory and Python names."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch):
        self.dir = tmp / "work"
        self.dir.mkdir()
        shutil.copytree(ROOT / "data", self.dir / "data")
        (self.dir / "sql").symlink_to(ROOT / "sql")
        for name in ("small", "medium"):
            if (corpora.corpora_dir() / name).is_dir():
                (self.dir / name).symlink_to(corpora.corpora_dir() / name)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "tokcolumnar"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tokcolumnar "$@"\n')
        shim.chmod(0o755)
        path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                os.environ.get("PATH", "")])
        self.env = cli_env({"PATH": path, "HOME": str(tmp / "home"),
                            "XDG_CACHE_HOME": str(tmp / "cache")})
        self.globs: dict = {"__name__": "__docs__"}
        monkeypatch.chdir(self.dir)

    def bash(self, script: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=self.dir,
                              env=self.env, capture_output=True, text=True, timeout=timeout)


def _extras() -> set[str]:
    """The extras pyproject.toml declares (read by hand: tomllib is Python 3.11+)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+)\s*=", section, re.M))


def run_block(s: Session, b: Block) -> None:
    if b.lang == "python":
        if ">>>" in b.text:
            test = doctest.DocTestParser().get_doctest(b.text, s.globs, b.where, str(b.page),
                                                       b.line)
            runner = doctest.DocTestRunner(optionflags=FLAGS)
            out: list[str] = []
            runner.run(test, out=out.append, clear_globs=False)
            s.globs.update(test.globs)  # DocTest works on a copy of the names
            assert not runner.failures, "".join(out)
        else:
            exec(compile(b.text, b.where, "exec"), s.globs)
    elif b.lang in ("bash", "sh"):
        text = b.text
        m = INSTALL.match(text)
        if m:
            extras = set(m.group(2).split(",")) if m.group(2) else set()
            assert extras <= _extras(), extras - _extras()
            text = text[m.end():]
        p = s.bash(text)
        assert p.returncode == 0, f"{b.where}: exit {p.returncode}\n{p.stdout}{p.stderr}"
    elif b.lang == "console":
        for cmd, want in _transcript(b):
            p = s.bash("{ " + cmd + "\n} 2>&1")
            got = "".join(line.rstrip() + "\n" for line in p.stdout.splitlines())
            code = 2 if want.strip().splitlines()[-1:] and want.strip().splitlines()[
                -1].startswith("tokcolumnar: error:") else 0
            assert p.returncode == code, f"{b.where}: `{cmd}` exit {p.returncode}\n{got}"
            assert CHECKER.check_output(want, got, FLAGS), (
                f"{b.where}: `{cmd}`\n--- shown\n{want}--- real\n{got}")


def _transcript(b: Block) -> list[tuple[str, str]]:
    steps: list[tuple[str, str]] = []
    lines = b.text.splitlines()
    i = 0
    while i < len(lines):
        assert lines[i].startswith("$ "), f"{b.where}: a transcript line outside a command"
        cmd = lines[i][2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        want = []
        while i < len(lines) and not lines[i].startswith("$ "):
            want.append(lines[i].rstrip())
            i += 1
        steps.append((cmd, "".join(w + "\n" for w in want)))
    return steps


def run_page(page: Path, slow: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    todo = [b for b in ALL[page] if not b.no_test and b.lang != "text" and (slow or not b.slow)]
    if any(_uses_corpora(b) for b in todo):
        corpora.corpus("small/en_botchan.txt")
    s = Session(tmp_path, monkeypatch)
    skipped = []
    for b in todo:
        missing = [m for m in b.needs if importlib.util.find_spec(m) is None]
        if missing:
            skipped.append(f"{b.where} (needs {', '.join(missing)})")
            continue
        run_block(s, b)
    if skipped:
        pytest.skip(f"ran {len(todo) - len(skipped)} blocks; not run, missing packages: "
                    + "; ".join(skipped))


@pytest.mark.parametrize("page", [pytest.param(p, marks=_marks(p, False), id=_ids(p))
                                  for p in PAGES if _runnable(p, False)])
def test_page_blocks(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    run_page(page, False, tmp_path, monkeypatch)


#: Pages whose slow blocks run only with TOKCOLUMNAR_SLOW=1: distributed.md's start Ray and Spark
#: (~95 s; tests/distributed runs the same commands in the full run).
SLOW_ONLY_PAGES = ("distributed.md",)


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=[*_marks(p, True), *([SLOW_ONLY] if p.name in SLOW_ONLY_PAGES else [])],
                 id=_ids(p))
    for p in PAGES if any(b.slow for b in ALL[p])])
def test_page_blocks_with_slow_ones(page: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch):
    run_page(page, True, tmp_path, monkeypatch)
