"""The recorded kube-apiserver samples and the identities/RBAC they were recorded with."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from devkit.controlplane import ControlPlane, Role, Rule, Subject, UserInfo, service_account
from devkit.controlplane.rbac import Binding

DIRECTORY = pathlib.Path(__file__).resolve().parents[2] / "data" / "kube-samples"
SA_TOKEN = "bound-sa-token"
ALICE_TOKEN = "alice-token"


def load(name: str) -> Any:
    return json.loads((DIRECTORY / name).read_text())


def plugin_user() -> UserInfo:
    claims = load("bound-token-claims.json")["kubernetes.io"]
    return service_account(
        claims["namespace"],
        claims["serviceaccount"]["name"],
        uid=claims["serviceaccount"]["uid"],
        pod=(claims["pod"]["name"], claims["pod"]["uid"]),
        node=(claims["node"]["name"], claims["node"]["uid"]),
        credential_id=load("bound-token-claims.json")["jti"],
    )


def recorded_cluster(cp: ControlPlane) -> None:
    """The users and RBAC of the recording cluster (README of kube-samples)."""
    claims = load("bound-token-claims.json")
    cp.add_token(SA_TOKEN, plugin_user(), audiences=claims["aud"])
    cp.add_token(ALICE_TOKEN, UserInfo("alice", uid="alice-uid", groups=("tenants",)))
    cp.policy.add_role(Role("reader", (Rule(
        ("get", "list", "watch"), ("worker.gpustack.ai",),
        ("modelartifacts", "modelartifacts/progress"),
    ),), namespace="team-a"))  # fmt: skip
    cp.policy.add_binding(
        Binding("alice-reader", "Role", "reader", (Subject("User", "alice"),), namespace="team-a")
    )


def shape(value: Any) -> Any:
    """The structure of a JSON value: which keys are present at every level, not the values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def without(obj: dict[str, Any], *paths: str) -> dict[str, Any]:
    """A deep copy of ``obj`` with the dotted ``paths`` removed (volatile fields)."""
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    for path in paths:
        node: Any = copied
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return copied
