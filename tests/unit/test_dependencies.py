"""Every runtime dependency in ``pyproject.toml`` is imported by the code it ships.

A dependency no shipped module imports only costs installs and audits (``pyjwt`` was one); one
only the tests need belongs in the ``dev`` extra (``kubernetes`` was one).
"""

from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import re
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match is not None, requirement
    return _normalized(match.group(0))


def _imported_distributions(packages: list[str]) -> set[str]:
    providers = importlib.metadata.packages_distributions()
    found: set[str] = set()
    for package in packages:
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".", 1)[0]
                    found.update(_normalized(d) for d in providers.get(top, []))
    return found


def _project() -> dict[str, object]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        loaded: dict[str, object] = tomllib.load(handle)
    return loaded


def test_every_runtime_dependency_is_imported_by_shipped_code() -> None:
    project = _project()
    checked: list[str] = project["tool"]["mypy"]["packages"]  # type: ignore[index]
    # the development kit's imports do not count: a dependency only it used would be a dev one
    shipped = [package for package in checked if package != "devkit"]
    requirements: list[str] = project["project"]["dependencies"]  # type: ignore[index]
    runtime = {_requirement_name(r) for r in requirements}
    assert sorted(runtime - _imported_distributions(shipped)) == []

