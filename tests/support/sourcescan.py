"""The shipped Python source as the owner tests read it: which files, and their syntax trees
without docstrings or bare expression strings (prose, not code)."""

from __future__ import annotations

import ast
import functools
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
PRODUCT = ("apiserver", "controllers", "nodeplugin", "openapi", "hub", "kube", "certs", "timing",
           "durable", "tlsserver", "kubectlmodel", "logs")
BESIDE = ("demo", "bench", "devkit")
"""Not the product, but they speak its wire (``conformance`` does too, black-box by contract, so
it is left out)."""


def files(packages: tuple[str, ...] = PRODUCT + BESIDE) -> list[pathlib.Path]:
    """Every ``.py`` of ``packages`` except generated code (``gen/``)."""
    return [path for package in packages if (REPO / package).is_dir()
            for path in sorted((REPO / package).rglob("*.py")) if "gen" not in path.parts]


def relative(path: pathlib.Path) -> str:
    return str(path.relative_to(REPO))


@functools.cache
def tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def prose(module: ast.Module) -> set[int]:
    """The ids of the string constants that are statements of their own (docstrings and bare
    strings) and of a module's ``__all__``: they explain or name Python objects, they do not
    spell anything to the wire."""
    found = {id(node.value) for node in ast.walk(module)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
             and isinstance(node.value.value, str)}
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__"
                for target in node.targets):
            found |= {id(item) for item in ast.walk(node.value)}
    return found


def constants(path: pathlib.Path) -> list[ast.Constant]:
    """The constants of the module at ``path``, prose left out."""
    module = tree(path)
    skipped = prose(module)
    return [node for node in ast.walk(module)
            if isinstance(node, ast.Constant) and id(node) not in skipped]
