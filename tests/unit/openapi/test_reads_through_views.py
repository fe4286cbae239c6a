"""The fields of our kinds are read through their views' readers (``openapi/kinds``), nowhere else.

The field keys are every camelCase key of a view, plus the lowercase keys only our kinds have
(``LOWERCASE``); the envelope and metav1's keys (``openapi.wire``) are everyone's. A read is a
subscript load, a ``.get``/``.pop``/``.setdefault``, an ``in`` test or a path handed to
``openapi.wire``'s digging readers, with such a key as a constant. Writes (a subscript store, a
dict display, a view's constructor) are left to mypy, which checks them against the views.
Outside ``openapi`` (the contract) and ``apiserver/admission`` (which validates the raw request
body before it is typed) a read fails, naming the line, unless ``ALLOWED`` says why that key is
another object's field.
"""

from __future__ import annotations

import ast
import pathlib
import typing
from collections.abc import Iterator

from openapi import wire
from openapi.kinds import modelartifact, modelprefetch, nodemodelstore, progress
from tests.support import sourcescan

LOWERCASE = frozenset(("resolved", "models", "pinned", "targets", "retention", "kubelet",
                       "watermarks"))
EVERYONES = (wire.ObjectMeta, wire.Condition, wire.OwnerReference, wire.ManagedFieldsEntry,
             wire.ListMeta)
EXEMPT = ("openapi/", "apiserver/admission/")

ALLOWED: dict[tuple[str, str], str] = {
    ("nodeplugin/cache/usage.py", "lastUsedTime"):
        "the plugin's own usage record on disk (state/usage.json), whose keys echo the field",
    ("controllers/nodestores/nodes.py", "imageGCHighThresholdPercent"):
        "kubelet's own KubeletConfiguration field, read from its configz, that spec.kubelet echoes",
    ("nodeplugin/materialize/failures.py", "retryTime"):
        "the plugin's own failure record on disk (state/failure-*.json)",
}
"""(file, key): why that read is not of our kind's field. May only shrink."""


def _keys(view: typing.Any, seen: set[typing.Any]) -> set[str]:
    if view in seen:
        return set()
    seen.add(view)
    found: set[str] = set()
    for key, hint in typing.get_type_hints(view).items():
        found.add(key)
        for part in (hint, *typing.get_args(hint), *[a for arg in typing.get_args(hint)
                                                      for a in typing.get_args(arg)]):
            if isinstance(part, type) and issubclass(part, dict) and hasattr(part, "__total__"):
                found |= _keys(part, seen)
    return found


def _field_keys() -> frozenset[str]:
    views = (modelartifact.VIEW, nodemodelstore.VIEW, modelprefetch.VIEW, progress.VIEW)
    ours = set().union(*(_keys(view, set()) for view in views))
    everyones = set().union(*(_keys(view, set()) for view in EVERYONES))
    camel = {key for key in ours if key != key.lower()}
    return frozenset((camel | (LOWERCASE & ours)) - everyones)


KEYS = _field_keys()


def _key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and node.value in KEYS else None


def _reads(path: pathlib.Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(sourcescan.tree(path)):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            keys = [node.slice]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args):
            keys = [node.args[0]]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and ast.unparse(node.func.value) == "wire"):
            keys = list(node.args)
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], ast.In | ast.NotIn)):
            keys = [node.left]
        else:
            continue
        for key in keys:
            if (found := _key(key)) is not None:
                yield node.lineno, found


def test_fields_of_our_kinds_are_read_through_the_views() -> None:
    scanned = [path for path in sourcescan.files()
               if not sourcescan.relative(path).startswith(EXEMPT)]
    assert len(scanned) > 250 and {"manifestDigest", "sizeBytes", "models", "pinned"} <= KEYS
    assert not KEYS & {"apiVersion", "metadata", "lastTransitionTime", "name", "status"}
    found, used = [], set()
    for path in scanned:
        for line, key in _reads(path):
            where = (sourcescan.relative(path), key)
            if where in ALLOWED:
                used.add(where)
                continue
            found.append(f"{where[0]}:{line}: {key!r}")
    assert found == [], "read it through openapi.kinds:\n" + "\n".join(found)
    assert set(ALLOWED) - used == set(), "read no more: drop it from ALLOWED"


def test_the_scan_sees_a_read() -> None:
    readers = sourcescan.REPO / "openapi" / "kinds" / "modelartifact.py"
    assert {"manifestDigest", "secretRef", "resolved"} <= {key for _, key in _reads(readers)}
    probe = sourcescan.REPO / "openapi" / "nodestore.py"
    assert {"highPercent", "lowPercent", "watermarks"} <= {key for _, key in _reads(probe)}
