"""Project rules checked mechanically over the library source.

- No secret may come from ``random``, ``numpy.random`` or gmpy2's random state:
  only :mod:`securetrees.rand` draws secrets.
- Bytes from a peer are never unpickled: no module imports ``pickle``/``marshal``/``shelve``.
- Validation raises typed errors: no ``assert`` statement in library code, and no
  ``raise`` of a bare ``ValueError``, ``TypeError``, ``RuntimeError`` or ``KeyError``
  (a subclass of ``SecureTreesError`` that also derives from the built-in keeps callers'
  ``except`` clauses working).
- Dependencies flow one way: ``securetrees`` never imports ``protocols``.
- Library code talks through :mod:`logging`: no ``print`` outside the command line
  (``securetrees/cli.py``), the demos (``securetrees/demos/``, ``protocols/*/demo.py``) and a
  module's command-line entry point (a function named ``main``).
- One progress switch: no parameter is named ``show_progress`` (it is ``progress`` everywhere).
"""

from __future__ import annotations

import ast
import re
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


@pytest.mark.parametrize("path", sorted((ROOT / "securetrees").rglob("*.py")), ids=_rel)
def test_core_never_imports_protocols(path: Path) -> None:
    bad = {n for n in _imports(_tree(path)) if n.split(".")[0] == "protocols"}
    assert not bad, f"{_rel(path)} imports {sorted(bad)}: securetrees must not depend on protocols"


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


PRINT_ALLOWED = ("securetrees/cli.py", "securetrees/demos/", "/demo.py")


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
