"""Project rules checked mechanically over the library source.

- No secret may come from ``random``, ``numpy.random`` or gmpy2's random state:
  only :mod:`securetrees.rand` draws secrets.
- Bytes from a peer are never unpickled: no module imports ``pickle``/``marshal``/``shelve``.
- Validation raises typed errors: no ``assert`` statement in library code, and no
  ``raise`` of a bare ``ValueError``, ``TypeError``, ``RuntimeError`` or ``KeyError``
  (a subclass of ``SecureTreesError`` that also derives from the built-in keeps callers'
  ``except`` clauses working).
- Dependencies flow one way: the core (``securetrees`` outside ``securetrees/protocols``) never
  imports ``securetrees.protocols``, nor names a protocol module in a string (protocols plug in
  through entry points, :mod:`securetrees.plugins`); nothing imports a top-level ``protocols``.
- Library code talks through :mod:`logging`: no ``print`` outside the command line
  (``securetrees/cli.py``), the demos (``securetrees/demos/``, ``protocols/*/demo.py``) and a
  module's command-line entry point (a function named ``main``).
- One progress switch: no parameter is named ``show_progress`` (it is ``progress`` everywhere).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_FILES = sorted([*(ROOT / "securetrees").rglob("*.py"), *(ROOT / "protocols").rglob("*.py")])

FORBIDDEN_MODULES = {"random", "pickle", "marshal", "shelve", "dill", "cloudpickle"}
# numpy.random is allowed only for machine-learning randomness (bootstrap, feature
# sampling), which lives in the tree machinery and protocols, never in crypto modules.
CRYPTO_PACKAGES = ("_nt.py", "rand.py", "encoding.py", "paillier", "dtpkc", "secagg", "runtime")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=_rel)
def test_no_forbidden_imports(path: Path) -> None:
    bad = {n for n in _imports(_tree(path)) if n.split(".")[0] in FORBIDDEN_MODULES}
    assert not bad, f"{_rel(path)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=_rel)
def test_no_assert_statements(path: Path) -> None:
    lines = [n.lineno for n in ast.walk(_tree(path)) if isinstance(n, ast.Assert)]
    assert not lines, f"{_rel(path)} uses assert at lines {lines}; raise a typed error instead"


UNTYPED_ERRORS = {"ValueError", "TypeError", "RuntimeError", "KeyError"}


def _untyped_raises(tree: ast.Module) -> list[int]:
    """Lines that raise one of :data:`UNTYPED_ERRORS`, called or bare (``raise KeyError``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name in UNTYPED_ERRORS:
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=_rel)
def test_no_untyped_raises(path: Path) -> None:
    lines = _untyped_raises(_tree(path))
    assert not lines, (f"{_rel(path)} raises a built-in {sorted(UNTYPED_ERRORS)} at lines {lines}; "
                       "raise a subclass of securetrees.errors.SecureTreesError instead")


@pytest.mark.parametrize(
    "path", [p for p in LIBRARY_FILES if any(part in _rel(p) for part in CRYPTO_PACKAGES)], ids=_rel
)
def test_crypto_code_has_no_statistical_randomness(path: Path) -> None:
    source = path.read_text()
    tree = _tree(path)
    names = _imports(tree)
    assert not any(n.startswith("numpy.random") for n in names), _rel(path)
    for needle in ("np.random", "numpy.random", "gmpy2.random_state", "gmpy2.mpz_random",
                   "gmpy2.mpz_urandomb", "gmpy2.mpz_rrandomb"):
        assert needle not in source, f"{_rel(path)} uses {needle}"


CORE_FILES = sorted(p for p in (ROOT / "securetrees").rglob("*.py") if "protocols" not in p.parts)
"""The core: ``securetrees/`` without the ``securetrees/protocols`` link (``rglob`` does not follow it)."""
PROTOCOLS_PACKAGE = "securetrees.protocols"
ALL_PYTHON = sorted([*LIBRARY_FILES, *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
PROTOCOL_MODULE_STRING = re.compile(r"(?<![\w/])(securetrees\.)?protocols\.[a-z_]+")


def _protocol_imports(tree: ast.Module) -> set[str]:
    return {n for n in _imports(tree) if n == PROTOCOLS_PACKAGE or n.startswith(PROTOCOLS_PACKAGE + ".")}


def _top_level_protocols_imports(tree: ast.Module) -> set[str]:
    return {n for n in _imports(tree) if n.split(".")[0] == "protocols"}


def _protocol_module_strings(tree: ast.Module) -> list[int]:
    """Lines of string constants (docstrings aside) that name a protocol module."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return sorted(n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and PROTOCOL_MODULE_STRING.search(n.value))


@pytest.mark.parametrize("path", CORE_FILES, ids=_rel)
def test_core_never_imports_protocols(path: Path) -> None:
    bad = _protocol_imports(_tree(path)) | _top_level_protocols_imports(_tree(path))
    assert not bad, f"{_rel(path)} imports {sorted(bad)}: the core must not depend on the protocols"


@pytest.mark.parametrize("path", CORE_FILES, ids=_rel)
def test_core_names_no_protocol_module(path: Path) -> None:
    """A module named in a string is an import the layering test cannot see: protocols plug in
    through entry points (pyproject.toml), never through a table in the core."""
    lines = _protocol_module_strings(_tree(path))
    assert not lines, f"{_rel(path)} names a protocol module in a string at lines {lines}"


@pytest.mark.parametrize("path", ALL_PYTHON, ids=_rel)
def test_nothing_imports_a_top_level_protocols(path: Path) -> None:
    bad = _top_level_protocols_imports(_tree(path))
    assert not bad, f"{_rel(path)} imports {sorted(bad)}: import securetrees.protocols instead"


def test_layering_scanners_catch_a_violation(tmp_path: Path) -> None:
    """Planted: each layering rule reports its violation, and passes the allowed forms."""
    planted = tmp_path / "bad.py"
    planted.write_text('"""Docstrings may say securetrees.protocols.revfrf."""\n'
                       "import protocols.revfrf\nfrom securetrees.protocols.hybridtree import host\n"
                       "TABLE = {'x': 'securetrees.protocols.revfrf.deploy'}\n"
                       "OTHER = 'protocols.hybridtree.demo:main'\n"
                       "PATH = 'see protocols/revfrf/'\n")
    tree = _tree(planted)
    assert _top_level_protocols_imports(tree) == {"protocols.revfrf"}
    assert _protocol_imports(tree) == {"securetrees.protocols.hybridtree", "securetrees.protocols.hybridtree.host"}
    assert _protocol_module_strings(tree) == [4, 5]


def test_protocols_refuse_their_top_level_name() -> None:
    """From the repository root ``import protocols`` would load every message class a second
    time; the package refuses it with a typed error."""
    run = subprocess.run([sys.executable, "-c", "import protocols"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "NamespaceError" in run.stderr and "securetrees.protocols" in run.stderr


def test_the_wheel_holds_one_top_level_package(tmp_path: Path) -> None:
    """The built wheel's only top-level package is ``securetrees`` and it holds every protocols/
    subfolder as ``securetrees/protocols/...`` (built from a copy, so the checkout stays clean)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("securetrees", "protocols"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=ignore)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",  # noqa: S603
                            str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("securetrees-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"securetrees"}
    subfolders = {p.name for p in (ROOT / "protocols").iterdir() if (p / "__init__.py").exists()}
    for sub in subfolders:
        modules = {p.name for p in (ROOT / "protocols" / sub).glob("*.py")}
        packed = {n.rsplit("/", 1)[1] for n in names if n.startswith(f"securetrees/protocols/{sub}/")}
        assert modules <= packed, f"{sub}: {sorted(modules - packed)} missing from the wheel"
    assert "securetrees/protocols/py.typed" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[securetrees.demos]" in text and "[securetrees.deployments]" in text


def test_role_processes_ignore_the_working_directory(tmp_path: Path) -> None:
    """A role process drops its working directory from the import path before importing: a
    ``securetrees.py`` there cannot stand in for the library."""
    from securetrees.net.service import _ROLE_MAIN

    (tmp_path / "securetrees.py").write_text("raise SystemExit('imported from the working directory')\n")
    run = subprocess.run([sys.executable, "-c", _ROLE_MAIN, "--version"], cwd=tmp_path,  # noqa: S603
                         capture_output=True, text=True, timeout=60, env=_env_without_checkout())
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("securetrees ")
    planted = subprocess.run([sys.executable, "-c", "import securetrees"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, env=_env_without_checkout())
    assert "imported from the working directory" in planted.stderr  # the companion: -c alone would


def _env_without_checkout() -> dict[str, str]:
    """The environment with relative PYTHONPATH entries dropped (they would name the working
    directory); absolute ones (a checkout under test) stay."""
    env = dict(os.environ)
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    env["PYTHONPATH"] = os.pathsep.join(kept)
    return env


def test_hygiene_scanner_catches_a_violation(tmp_path: Path) -> None:
    """The scanner itself can fail: a planted violation is found."""
    planted = tmp_path / "bad.py"
    planted.write_text("import random\nfrom pickle import loads\nassert True\n"
                       "raise ValueError('x')\nraise builtins.TypeError\nraise KeyError\n"
                       "raise ParameterError('fine')\nraise\n")
    tree = _tree(planted)
    assert {"random", "pickle"} <= {n.split(".")[0] for n in _imports(tree)}
    assert any(isinstance(n, ast.Assert) for n in ast.walk(tree))
    assert _untyped_raises(tree) == [4, 5, 6]


PRINT_ALLOWED = ("securetrees/cli.py", "securetrees/setup_command.py", "securetrees/demos/", "/demo.py")


def _prints_outside_main(tree: ast.Module) -> list[int]:
    """Lines calling ``print`` that are not inside a function named ``main``."""
    lines: list[int] = []

    def visit(node: ast.AST, in_main: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main":
            in_main = True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
                and not in_main):
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_main)

    visit(tree, False)
    return lines


@pytest.mark.parametrize("path", [p for p in LIBRARY_FILES if not any(a in _rel(p) for a in PRINT_ALLOWED)],
                         ids=_rel)
def test_no_print_in_library_code(path: Path) -> None:
    lines = _prints_outside_main(_tree(path))
    assert not lines, f"{_rel(path)} prints at lines {lines}; log through securetrees.log.get_logger instead"


def _show_progress_params(tree: ast.Module) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.arg) and node.arg == "show_progress"]


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=_rel)
def test_progress_switch_is_named_progress(path: Path) -> None:
    lines = _show_progress_params(_tree(path))
    assert not lines, f"{_rel(path)} takes show_progress at lines {lines}; the switch is named progress"


def test_print_and_progress_scanners_catch_a_violation() -> None:
    """Planted: a library-style module that prints and takes show_progress is caught; a print
    inside ``main`` is not."""
    planted = ast.parse("def fit(X, *, show_progress=False):\n    print('tree 1')\n"
                        "def main(argv):\n    print('usage')\n"
                        "class Model:\n    def predict(self):\n        print(self)\n")
    assert _prints_outside_main(planted) == [2, 7]
    assert _show_progress_params(planted) == [1]


# Nothing in the repository points outside it: no citation of the private crypto notes, of
# the seed papers' text files or of any path under the team's shared folder. What a reader
# needs lives in specs/ (parameters: specs/parameters.md). The strings are built from parts
# so that this file does not match itself.
OUTSIDE_REFERENCE = re.compile(
    "|".join([
        re.escape("CRYPTO" + "_NOTES"),
        re.escape("seeds" + "/"),
        r"\b\d{3}_[0-9a-f]{16}\." + "txt",
        re.escape("/work" + "/"),
        re.escape("SOURCE" + ".md"),
    ])
)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yaml", ".yml", ".json", ".proto"}


def _repository_text_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in ("securetrees", "protocols", "specs", "tests", "benchmarks"):
        files.extend(p for p in (ROOT / top).rglob("*")
                     if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts)
    return sorted(files)


def _outside_references(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if OUTSIDE_REFERENCE.search(line)]


@pytest.mark.parametrize("path", _repository_text_files(), ids=_rel)
def test_no_reference_outside_the_repository(path: Path) -> None:
    lines = _outside_references(path.read_text(encoding="utf-8"))
    assert not lines, (f"{_rel(path)} points outside the repository at lines {lines}; "
                       "put what the reader needs in specs/ and cite that")


def test_outside_reference_scanner_catches_a_violation() -> None:
    """Planted: each kind of outside pointer is caught; in-repository pointers are not."""
    planted = "\n".join([
        "ok: specs/dtpkc.md, HoLT",
        "bad (" + "CRYPTO" + "_NOTES §5)",
        "bad `" + "seeds" + "/001_…`",
        "bad 004_bc1a07a9eb29bf54." + "txt",
        "bad " + "/work" + "/shared/datasets/adult/" + "SOURCE" + ".md",
        "ok: specs/parameters.md",
    ])
    assert _outside_references(planted) == [2, 3, 4, 5]
    assert ROOT / "specs" / "parameters.md" in _repository_text_files()


PAILLIER_LAYERS = ("wire", "ciphertext", "keys", "batch", "pool", "prefill", "phe_interop")
"""The Paillier package, lowest first: a module imports only modules before it. The exceptions
are type-only references (under ``TYPE_CHECKING``): from a ciphertext to the key class it carries,
and from the batch functions to the pool class ``encrypt_many(pool=)`` takes."""
TYPE_ONLY_UPWARD = {("ciphertext", "keys"), ("batch", "pool")}


def _package_imports(tree: ast.Module, package: str) -> tuple[set[str], set[str]]:
    """(run-time, type-only) imports of sibling modules of ``package``: anything imported at run
    time, at module level or inside a function, and what sits under ``if TYPE_CHECKING:``."""
    type_only_nodes = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                       for stmt in block.body for n in ast.walk(stmt)}
    runtime: set[str] = set()
    type_only: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == package:
                names = [a.name for a in node.names]
            elif node.module.startswith(package + "."):
                names = [node.module[len(package) + 1:].split(".")[0]]
        elif isinstance(node, ast.Import):
            names = [a.name[len(package) + 1:].split(".")[0] for a in node.names if a.name.startswith(package + ".")]
        (type_only if id(node) in type_only_nodes else runtime).update(names)
    return runtime, type_only


def _layer_violations(modules: dict[str, ast.Module], package: str) -> list[str]:
    bad = []
    for name, tree in modules.items():
        runtime, type_only = _package_imports(tree, package)
        for other in runtime | type_only:
            if other not in PAILLIER_LAYERS or other == name:
                continue
            upward = PAILLIER_LAYERS.index(other) > PAILLIER_LAYERS.index(name)
            if upward and not (other in type_only and other not in runtime and (name, other) in TYPE_ONLY_UPWARD):
                bad.append(f"{name} imports {other}")
    return sorted(bad)


def test_paillier_modules_import_downward_only() -> None:
    """No import circle inside securetrees/paillier: batch depends on keys, never the reverse."""
    folder = ROOT / "securetrees" / "paillier"
    modules = {p.stem: _tree(p) for p in folder.glob("*.py") if p.stem != "__init__"}
    assert set(modules) == set(PAILLIER_LAYERS), "a new module needs its place in PAILLIER_LAYERS"
    assert _layer_violations(modules, "securetrees.paillier") == []


def test_paillier_layer_check_catches_a_circle() -> None:
    """Planted: keys importing batch inside a method (the old circle) is reported, and so is a
    type-only upward import that is not the allowed one."""
    keys = ast.parse("def encrypt_many(self):\n    from securetrees.paillier import batch\n")
    batch = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from securetrees.paillier.prefill import BackgroundPool\n")
    assert _layer_violations({"keys": keys, "batch": batch}, "securetrees.paillier") == [
        "batch imports prefill", "keys imports batch"]
