"""Nothing that runs outside pytest imports the tests: the product, the development kit, the demo
and the benchmarks.

import-linter's contracts in ``pyproject.toml`` forbid it too, but they see ``tests`` only as an
external name (``tests/`` is no package: it has no ``__init__.py``). This scan reads every module's
imports itself, those inside functions included, so the rule holds whatever the linter resolves.
"""

from __future__ import annotations

import ast
import pathlib
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _scanned() -> list[str]:
    """mypy's packages (the product, the demo and the development kit) and the benchmarks."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        packages: list[str] = tomllib.load(handle)["tool"]["mypy"]["packages"]
    return [*packages, "bench"]


def imports_of_tests(source: str, filename: str = "<source>") -> list[int]:
    """The lines of ``source`` that import the ``tests`` tree, however spelled."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            lines.append(node.lineno)
    return lines


def test_the_scan_sees_every_spelling() -> None:
    source = ("import tests.support.waiting\nfrom tests.support import waiting\n"
              "def f():\n    from tests import support\n"
              "import testsuite\nfrom devkit import clock\n")  # fmt: skip
    assert imports_of_tests(source) == [1, 2, 4]


def test_nothing_shipped_imports_tests() -> None:
    packages = _scanned()
    assert {"devkit", "demo", "bench", "apiserver", "conformance"} <= set(packages)
    found: list[str] = []
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            for line in imports_of_tests(path.read_text(), str(path)):
                found.append(f"{path.relative_to(REPO)}:{line}")
    assert found == []
