"""Standalone policy documents the tests give a server (``DATA_DIR/policy.yaml``)."""

from __future__ import annotations


def tenant_reader(namespace: str, user: str = "alice") -> str:
    """The ``model-artifact-reader`` Role docs/auth.md tells an operator to bind, bound to
    ``user`` in ``namespace`` (read artifacts and their progress)."""
    return f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: model-artifact-reader, namespace: {namespace}}}
rules:
  - apiGroups: [worker.gpustack.ai]
    resources: [modelartifacts, modelartifacts/progress]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {user}-reader, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: model-artifact-reader}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]
"""
