"""The package's shape: no import cycle between its modules (counting the imports made inside
functions, which hide cycles), imports inside functions only where they are documented, and a
non-editable install (`pip install .`) that runs every command from outside the repository."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from tests.support.corpora import PRIMER, ROOT

PACKAGE = ROOT / "tokcolumnar"

# Where a module may import inside a function (file, function): the only places, each with the
# reason the import waits. A new one fails `test_imports_inside_functions_are_the_documented_ones`.
FUNCTION_IMPORTS = {
    ("tokcolumnar/_start.py", "run"):
        "cli loads after the early signal handlers are set (a Ctrl-C while it loads is one line)",
    ("tokcolumnar/__init__.py", "__getattr__"):
        "the public names load on first use (PEP 562), so the CLI starts without Polars",
    ("tokcolumnar/cli/__init__.py", "_run"):
        "the parser and the commands (Polars) load after the signal handlers are installed",
    ("tokcolumnar/cli/commands.py", "cmd_train"):
        "the training pipeline loads only for train and count: encode does not need it",
    ("tokcolumnar/cli/commands.py", "cmd_count"):
        "the training pipeline loads only for train and count: encode does not need it",
    ("tokcolumnar/cli/commands.py", "cmd_encode"):
        "the encoder (with pyarrow.parquet) loads only for encode: train does not need it; "
        "the Ray and Spark glue only for --engine ray / spark",
    ("tokcolumnar/cli/commands.py", "cmd_sql"):
        "DuckDB loads only for the commands that use it",
    ("tokcolumnar/cli/commands.py", "cmd_crosscheck"):
        "DuckDB loads only for the commands that use it",
    ("tokcolumnar/cli/commands.py", "cmd_report"):
        "the optional extra `report` (Altair, vl-convert) loads only for the commands that draw",
    ("tokcolumnar/cli/commands.py", "cmd_compare"):
        "the optional extra `report` loads only for the commands that draw (and not at all "
        "for --format json|csv)",
    ("tokcolumnar/training/pipeline.py", "engine_for"):
        "an engine loads when a run asks for it (DuckDB is not loaded otherwise)",
    ("tokcolumnar/distributed/spark_job.py", "main"):
        "run as a file by spark-submit, its folder comes first on sys.path (where `ray.py` would "
        "hide Ray): the command line loads once that entry is removed",
    ("tokcolumnar/tokenizer.py", "encode_ray"):
        "Ray (an optional extra, tokcolumnar[ray]) and its module load only when used",
}
# Dynamic imports whose module name is computed: the module-level dict (in the same file)
# whose values name the modules, and the prefix that makes them absolute.
DYNAMIC_TARGETS = {
    ("tokcolumnar/__init__.py", "__getattr__"): ("_PUBLIC", "tokcolumnar."),
    ("tokcolumnar/training/pipeline.py", "engine_for"): ("ENGINE_MODULES", ""),
}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. tokcolumnar.cli.commands
    target: str  # imported module
    file: str  # path relative to the repository root
    line: int
    function: str | None  # the enclosing function (outermost), None at module level


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package by name (the sql/ link holds no Python)."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of `from <level dots><name> import ...` written in `module`."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _dict_values(tree: ast.Module, name: str) -> list[str]:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert isinstance(node.value, ast.Dict), f"{name} is not a dict literal"
            values = [v.value for v in node.value.values if isinstance(v, ast.Constant)]
            assert len(values) == len(node.value.values), f"{name} has non-literal values"
            return values
    raise AssertionError(f"no module-level dict {name}")


class ImportCollector(ast.NodeVisitor):
    """The tokcolumnar imports of one module: import statements at any depth (under
    `if TYPE_CHECKING:` only with `type_only`) and `import_module(...)` calls."""

    def __init__(self, source: str, file: str, modules: dict[str, Path],
                 type_only: bool = False):
        self.type_only = type_only
        self.tree = ast.parse(source)
        self.file = file
        self.module = module_name(ROOT / file)
        self.is_package = file.endswith("__init__.py")
        self.modules = modules
        self.function: str | None = None
        self.found: list[Import] = []
        self.visit(self.tree)

    def _add(self, target: str, node: ast.AST) -> None:
        """An import of `target`, and of each package above it that does not hold this module
        (importing a module runs its packages' __init__ first)."""
        if not (target == "tokcolumnar" or target.startswith("tokcolumnar.")):
            return
        assert target in self.modules, f"{self.file}:{node.lineno} imports {target}, which is " \
                                       "not a module of the package"
        parts = target.split(".")
        for k in range(1, len(parts) + 1):
            name = ".".join(parts[:k])
            if k < len(parts) and (self.module == name or self.module.startswith(name + ".")):
                continue
            self.found.append(Import(self.module, name, self.file, node.lineno, self.function))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.function
        self.function = outer or node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test) and not self.type_only:  # never imported at run time
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(self.module, self.is_package, node.level, node.module)
        submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in self.modules]
        for target in submodules:
            self._add(target, node)
        if len(submodules) < len(node.names):  # names defined in `base` itself
            self._add(base, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name.lstrip("_") == "import_module":
            for target in self._dynamic_targets(node):
                self._add(target, node)
        self.generic_visit(node)

    def _dynamic_targets(self, node: ast.Call) -> list[str]:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            assert len(node.args) == 1 or ast.unparse(node.args[1]) == "__name__", \
                f"{self.file}:{node.lineno}: import_module relative to something else than " \
                "__name__"
            name = arg.value
            level = len(name) - len(name.lstrip("."))
            # import_module(".x", __name__): relative to this module's own package
            return [_resolve(self.module, True, level, name[level:] or None) if level else name]
        site = (self.file, self.function)
        assert site in DYNAMIC_TARGETS, f"{self.file}:{node.lineno}: an import_module whose " \
                                        "module the test cannot tell (add it to DYNAMIC_TARGETS)"
        dict_name, prefix = DYNAMIC_TARGETS[site]
        return [prefix + v for v in _dict_values(self.tree, dict_name)]


def all_imports(type_only: bool = False) -> list[Import]:
    """Every import of the package (`type_only`: with those under `if TYPE_CHECKING:`)."""
    modules = package_modules()
    return [i for path in modules.values()
            for i in ImportCollector(path.read_text(encoding="utf-8"),
                                     str(path.relative_to(ROOT)), modules, type_only).found]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


SAMPLE = """
from typing import TYPE_CHECKING
from importlib import import_module
import tokcolumnar.errors
from . import normalizers, regex
from .. import config
from ..corpus.readers import iter_sequences
if TYPE_CHECKING:
    from ..export import build_tokenizer
else:
    from ..progress import StageTimer

def load():
    from ..duckdb import query
    return import_module(".decoders", __name__)
"""


def test_the_walker_sees_every_kind_of_import():
    modules = package_modules()
    got = {(i.target, i.function) for i in ImportCollector(
        SAMPLE, "tokcolumnar/text/__init__.py", modules).found}
    assert got == {("tokcolumnar.errors", None), ("tokcolumnar.text.normalizers", None),
                   ("tokcolumnar.text.regex", None), ("tokcolumnar.config", None),
                   ("tokcolumnar.corpus.readers", None), ("tokcolumnar.progress", None),
                   ("tokcolumnar.duckdb.query", "load"), ("tokcolumnar.text.decoders", "load"),
                   # the packages above a module run first
                   ("tokcolumnar.corpus", None), ("tokcolumnar.duckdb", "load")}
    seen = {(i.source, i.target) for i in all_imports()}
    assert len(modules) >= 40
    assert ("tokcolumnar.training.pipeline", "tokcolumnar.config") in seen
    assert ("tokcolumnar.cli", "tokcolumnar.cli.commands") in seen  # import_module(".commands")
    assert ("tokcolumnar.training.pipeline", "tokcolumnar.duckdb.engine") in seen  # computed
    assert ("tokcolumnar", "tokcolumnar.training.pipeline") in seen  # PEP 562 names


@pytest.mark.parametrize("type_only", [False, True], ids=["run-time", "type-only-included"])
def test_no_import_cycle(type_only):
    """No cycle among the imports made at run time, nor once the imports made for type hints
    only (`if TYPE_CHECKING:`) are counted: two modules that need each other's names, even
    for annotations only, belong in one module or below a third (a cycle through
    TYPE_CHECKING is a layering that runs backwards, hidden from the interpreter)."""
    edges: dict[str, set[str]] = {}
    where: dict[tuple[str, str], Import] = {}
    for i in all_imports(type_only):
        edges.setdefault(i.source, set()).add(i.target)
        where.setdefault((i.source, i.target), i)
    cycle = find_cycle(edges)
    if cycle is not None:
        steps = [f"{a} -> {b} ({where[a, b].file}:{where[a, b].line}"
                 f"{', in ' + where[a, b].function if where[a, b].function else ''})"
                 for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle:\n  " + "\n  ".join(steps), pytrace=False)


def test_imports_inside_functions_are_the_documented_ones():
    sites = {(i.file, i.function) for i in all_imports() if i.function is not None}
    undocumented = sorted(sites - set(FUNCTION_IMPORTS))
    assert not undocumented, f"imports inside functions outside the documented places: " \
                             f"{undocumented} (import at the top, or document it in this test)"
    assert sites == set(FUNCTION_IMPORTS), f"documented but gone: " \
                                           f"{sorted(set(FUNCTION_IMPORTS) - sites)}"


def test_type_only_imports_are_seen_with_type_only():
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from .config import TrainConfig\n")
    modules = package_modules()
    assert not ImportCollector(source, "tokcolumnar/presets.py", modules).found
    found = ImportCollector(source, "tokcolumnar/presets.py", modules, type_only=True).found
    assert [(i.source, i.target) for i in found] == [("tokcolumnar.presets", "tokcolumnar.config")]
    # a two-module cycle through TYPE_CHECKING (config <-> presets once was one) is a cycle
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


# Layers that must not import one another, (importer, imported) by module prefix: the encoder
# does not need the report (what both use, the word regex and the unknown id, lives below both:
# `text.words`, `Tokenizer.unknown_id`).
FORBIDDEN_LAYERS = [("tokcolumnar.encode", "tokcolumnar.report"),
                    # the pre-tokenizers name their kind of line cut; the rules are the reader's
                    ("tokcolumnar.text", "tokcolumnar.corpus")]


@pytest.mark.parametrize(("source", "target"), FORBIDDEN_LAYERS)
def test_layers_do_not_import_upwards(source, target):
    """Counting the imports inside functions and those for type hints only."""
    def under(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    found = [f"{i.file}:{i.line} imports {i.target}" for i in all_imports(type_only=True)
             if under(i.source, source) and under(i.target, target)]
    assert not found, f"{source} imports {target}: {found}"


# The engines' own modules: the only places that may tell one engine from another. Everywhere
# else an engine is used through the protocol (`training.pipeline.Engine`).
ENGINE_FILES = ("tokcolumnar/duckdb/", "tokcolumnar/training/polars_engine.py")
ENGINE_NAMES = {"polars", "duckdb", "ray", "spark"}


def engine_name_tests(source: str) -> list[int]:
    """The lines comparing an engine's name: `<...engine...>.name == ...`, or any `.name`
    compared with an engine's name (`x.name != "duckdb"`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names = [o for o in operands if isinstance(o, ast.Attribute) and o.attr == "name"]
        engine_like = any("engine" in ast.unparse(o.value).lower() for o in names)
        engine_const = any(isinstance(o, ast.Constant) and o.value in ENGINE_NAMES
                           for o in operands)
        if names and (engine_like or engine_const):
            lines.append(node.lineno)
    return lines


def test_the_engine_name_finder_finds_name_tests():
    assert engine_name_tests('if engine.name == "duckdb":\n    pass\n') == [1]
    assert engine_name_tests('x = self.engine.name != "polars"\n') == [1]
    assert engine_name_tests('ok = run.name == "spark"\n') == [1]
    assert engine_name_tests('ok = path.name == "run.json"\n') == []
    assert engine_name_tests('engine.count(inputs, cfg)\n') == []


def test_only_the_engines_tell_engines_apart():
    """The pipeline and the rest use the engine protocol (its calls and attributes); no
    `engine.name == ...` outside the engines' own modules."""
    found = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py"))
             if not str(path.relative_to(ROOT)).startswith(ENGINE_FILES)
             for line in engine_name_tests(path.read_text(encoding="utf-8"))]
    assert not found, f"an engine's name tested outside the engines: {found}"


# -- a non-editable install ----------------------------------------------------------------------
def _dependency_paths() -> list[str]:
    """The directories this interpreter imports the runtime dependencies from (the fresh
    environment reuses them rather than downloading them again)."""
    import duckdb
    import numpy
    import pyarrow

    return sorted({str(Path(m.__file__).resolve().parents[1])
                   for m in (pl, pyarrow, numpy, duckdb)})


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment with `pip install --no-deps .` of a copy of this checkout
    (built in pip's isolated build environment, as a user's install is; the copy keeps the
    checkout free of build/ and *.egg-info); the dependencies are those of this interpreter,
    reached through a .pth file. Returns the environment's bin directory."""
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis",
        ".pytest_cache", ".ruff_cache", "tests", "data", "docs", "scripts"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    py = venv / "bin" / "python"
    proc = subprocess.run([py, "-m", "pip", "install", "--no-deps", "--quiet", str(src)],
                          capture_output=True, text=True, timeout=900, env=_clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the dependencies, added after the install so that pip never sees another tokcolumnar
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "tokcolumnar_test_deps.pth").write_text("\n".join(_dependency_paths()) + "\n")
    return venv / "bin"


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH (it would put this checkout first), no SQL directory override."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "TOKCOLUMNAR_SQL_DIR", "PYTHONHOME")}


@pytest.mark.slow
@pytest.mark.duckdb
def test_non_editable_install_runs_every_command_outside_the_repository(installed, tmp_path):
    outside = tmp_path / "work"
    outside.mkdir()
    corpus = outside / "corpus.txt"
    corpus.write_bytes(PRIMER.read_bytes())

    def run(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(a) for a in args], cwd=outside, capture_output=True,
                              text=True, timeout=900, env=_clean_env())
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    # the installed copy is the one that runs, with its SQL files inside it
    where = run(installed / "python", "-c", "import tokcolumnar; print(tokcolumnar.__file__)")
    package = Path(where.stdout.strip()).parent
    assert not package.is_relative_to(ROOT) and package.is_relative_to(installed.parent)
    assert not (package / "sql").is_symlink()
    assert len(list((package / "sql").glob("*.sql"))) >= 10
    analysis = package / "sql" / "analysis" / "merge_frequency.sql"
    assert analysis.is_file()

    tok = installed / "tokcolumnar"
    run(tok, "train", corpus.name, "--out", "duck", "--engine", "duckdb", "--vocab-size", "300",
        "--quiet")
    run(tok, "train", corpus.name, "--out", "pol", "--vocab-size", "300", "--quiet")
    for name in ("merges.txt", "vocab.json", "tokenizer.json"):
        assert (outside / "duck" / name).read_bytes() == (outside / "pol" / name).read_bytes()
    merges = pl.read_parquet(outside / "pol" / "merges.parquet")
    assert merges.height > 100
    assert pl.read_parquet(outside / "duck" / "merges.parquet").equals(merges)

    check = run(tok, "crosscheck", corpus.name, "--vocab-size", "300", "--quiet")
    assert check.stdout.startswith("identical: ")
    assert f"{merges.height:,} merges" in check.stdout

    # the ready analysis queries: by name when the CLI has `--query`, else by their path
    # inside the installed package
    if "--query" in run(tok, "sql", "--help").stdout:
        query = ["--query", "merge_frequency"]
    else:
        query = [str(analysis)]
    out = run(tok, "sql", "duck", *query, "--format", "csv").stdout
    got = pl.read_csv(out.encode())
    assert got["merges"].sum() == merges.height
    assert got["max_count"].max() == merges["count"].max()


def test_the_architecture_map_names_every_module():
    """docs/architecture.md's map has a line for every module of the package (a newcomer finds
    each stage from it): a module added without its line fails here."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## The map")
    block = text[text.index("```", start) + 3:]
    block = block[:block.index("```")]
    names = {line.split("── ", 1)[1].split()[0] for line in block.splitlines() if "── " in line}
    package = ROOT / "tokcolumnar"
    missing = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if "sql" not in p.parts and p.name not in names)
    assert not missing, f"modules without a line in docs/architecture.md's map: {missing}"
