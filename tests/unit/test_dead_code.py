"""Every function the node plugin, ``durable``, the controllers, the API server and the contract
define has a caller in shipped code.

A function nothing calls is untested behaviour waiting to be trusted (``set_limits`` and
``usage.forget`` were such). The scan is by name over every
shipped package: a definition counts as used when its name is called, passed or imported
anywhere in them (tests and benchmarks do not count). The few kept on purpose say why.
"""

from __future__ import annotations

import ast
import pathlib
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECKED = ("nodeplugin", "durable", "controllers", "apiserver", "openapi")
KEPT = {
    "auth_flow": "httpx calls it: the kubeconfig's token auth (httpx.Auth)",
    "describe": "prometheus-client calls it on the collector",
    "exclusive": "cache collection (issue 10) takes a digest's lock exclusive to remove a tree",
    "removable_partials": "cache collection (issue 10) removes what it names",
    "set_limit": "a changed NodeModelStore spec.download (issue 10) is applied through it",
    "held_bytes": "a resume ledger's figure, read by the resume tests",
    "wait_synced": "the informer's readiness, awaited by tests and embedders",
    "write_import": "lays out an import directory to seed air-gapped nodes (and tests, benches)",
}


def _shipped() -> list[str]:
    """mypy's packages but the development kit: a function only a harness calls has no caller
    in the product."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        packages: list[str] = tomllib.load(handle)["tool"]["mypy"]["packages"]
    return [package for package in packages if package != "devkit"]


def _trees(packages: list[str]) -> list[tuple[pathlib.Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), filename=str(path)))
            for package in packages for path in sorted((REPO / package).rglob("*.py"))]


def test_no_function_without_a_caller() -> None:
    used: set[str] = set()
    for _, tree in _trees(_shipped()):
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.alias):
                used.add(node.name.rsplit(".", 1)[-1])
    unused: list[str] = []
    for path, tree in _trees(list(CHECKED)):
        if "gen" in path.relative_to(REPO).parts:
            continue  # generated gRPC stubs
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            name = node.name
            if name.startswith("__") or name in used or name in KEPT:
                continue
            unused.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    assert unused == []
