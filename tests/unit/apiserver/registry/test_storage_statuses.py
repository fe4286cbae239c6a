"""Storage errors become a Status in one place, ``registry.statuses.from_storage``: each error's
answer, and a test that fails when another module maps one itself (issue 20)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from apiserver import errors
from apiserver.registry import statuses
from apiserver.storage import interface
from openapi import resources

REPO = pathlib.Path(__file__).resolve().parents[4]
OWNER = REPO / "apiserver" / "registry" / "statuses.py"
INFO = resources.MODEL_ARTIFACT


@pytest.mark.parametrize(("exc", "code", "says", "retry"), [
    (interface.KeyExists("/k"), 409, 'modelartifacts.worker.gpustack.ai "a" already exists', ""),
    (interface.KeyNotFound("/k"), 404, 'modelartifacts.worker.gpustack.ai "a" not found', ""),
    (interface.RevisionConflict("/k", 1, 2), 409, "the object has been modified", ""),
    (interface.Compacted(3, 9), 410, "too old resource version: 3 (9)", ""),
    (interface.FutureRevision(12, 10), 504, "Too large resource version: 12, current: 10", ""),
    (interface.Timeout("hung"), 504, "did not answer within the request timeout", "1"),
    (interface.Unavailable("down"), 500, "the storage is unavailable; retry later", "1"),
    (interface.StorageError("odd"), 500, "the storage failed to serve the request", ""),
])  # fmt: skip
def test_each_storage_error_has_one_answer(exc: interface.StorageError, code: int, says: str,
                                           retry: str) -> None:
    status = statuses.from_storage(exc, INFO, "a")
    assert status.code == code and says in status.message, status.message
    assert (status.headers or {}).get("Retry-After", "") == retry
    assert "down" not in status.message and "hung" not in status.message  # never the details


def test_without_an_object_the_key_is_named_and_the_code_kept() -> None:
    assert statuses.from_storage(interface.KeyExists("/leases/ns/x")).code == 409
    missing = statuses.from_storage(interface.KeyNotFound("/leases/ns/x"))
    assert isinstance(missing, errors.NotFound) and "/leases/ns/x" in missing.message


def test_a_watch_names_the_revision_the_client_asked_for() -> None:
    gone = statuses.from_storage(interface.Compacted(40, 50), requested=7)
    assert gone.message == "too old resource version: 7 (50)"


def _maps_itself(path: pathlib.Path) -> list[str]:
    """Handlers of a storage error that build their own answer, and checks of a storage
    error's class (what ``from_storage`` alone does)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None and (
                "interface." in ast.unparse(node.type)):
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if isinstance(inner, ast.Call):
                    called = ast.unparse(inner.func)
                    owner, _, name = called.partition(".")
                    if owner in ("errors", "statuses") and name.isidentifier() and name not in (
                            "from_storage", "from_status"):
                        found.append(f"{path.relative_to(REPO)}:{inner.lineno}: {called}")
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
            checked = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if any(f"interface.{name}" in checked for name in (
                    "KeyExists", "KeyNotFound", "RevisionConflict", "Compacted",
                    "FutureRevision", "Timeout", "Unavailable")):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_second_mapping_of_storage_errors() -> None:
    scanned = [path for path in sorted((REPO / "apiserver").rglob("*.py"))
               if path != OWNER and "/gen/" not in str(path)
               and (REPO / "apiserver" / "storage") not in path.parents]
    assert len(scanned) > 80 and _maps_itself(OWNER)  # it finds the mapping where it is
    found = [line for path in scanned for line in _maps_itself(path)]
    assert found == [], "map storage errors with registry.statuses.from_storage:\n" + "\n".join(
        found)
