"""The Helm chart's RBAC in the fixture control plane: render ``charts/model-manager`` with the
real Helm binary and load its ClusterRoles, Roles and bindings into ``ControlPlane.policy``, so
a cluster-mode test is allowed exactly what an installed chart grants (and fails when the chart
grants too little).

    chart = chartrbac.render()
    chart.apply(cp)
    chart.worker_account, chart.plugin_account, chart.plugin_labels
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import yaml

from tests.support import helm
from tests.support.controlplane import Binding, ControlPlane, Role, Rule, Subject

Doc = dict[str, Any]
RBAC = "rbac.authorization.k8s.io/v1"


@dataclasses.dataclass(frozen=True)
class Chart:
    docs: tuple[Doc, ...]
    namespace: str

    def of_kind(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind: str) -> Doc:
        return helm.one(list(self.docs), kind)

    @property
    def worker_account(self) -> str:
        """The API server's ServiceAccount (its Deployment's)."""
        return str(self.one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"])

    @property
    def plugin_account(self) -> str:
        """The node plugin's ServiceAccount (its DaemonSet's)."""
        return str(self.one("DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"])

    @property
    def plugin_labels(self) -> dict[str, str]:
        """The labels of the plugin Pods the DaemonSet creates."""
        labels = self.one("DaemonSet")["spec"]["template"]["metadata"]["labels"]
        return {str(k): str(v) for k, v in labels.items()}

    @property
    def settings_configmap(self) -> str:
        return str(self.one("ConfigMap")["metadata"]["name"])

    def apply(self, cp: ControlPlane) -> list[str]:
        """Every Role, ClusterRole and binding of the chart into ``cp.policy``; returns their
        names as ``Kind/[namespace/]name``."""
        loaded: list[str] = []
        for doc in self.docs:
            kind = doc.get("kind")
            if doc.get("apiVersion") != RBAC or kind not in (
                    "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"):
                continue
            meta = doc["metadata"]
            namespaced = kind in ("Role", "RoleBinding")
            namespace = str(meta.get("namespace") or self.namespace) if namespaced else None
            if kind in ("ClusterRole", "Role"):
                cp.policy.add_role(Role(str(meta["name"]), rules(doc.get("rules") or []),
                                        namespace=namespace))
            else:
                ref = doc["roleRef"]
                cp.policy.add_binding(Binding(
                    str(meta["name"]), str(ref["kind"]), str(ref["name"]),
                    subjects(doc.get("subjects") or [], namespace or self.namespace),
                    namespace=namespace))  # fmt: skip
            loaded.append(f"{kind}/{namespace + '/' if namespace else ''}{meta['name']}")
        return loaded


def rules(items: Sequence[Doc]) -> tuple[Rule, ...]:
    return tuple(Rule(
        verbs=tuple(item.get("verbs") or ()), api_groups=tuple(item.get("apiGroups") or ()),
        resources=tuple(item.get("resources") or ()),
        resource_names=tuple(item.get("resourceNames") or ()),
        non_resource_urls=tuple(item.get("nonResourceURLs") or ()),
    ) for item in items)  # fmt: skip


def subjects(items: Sequence[Doc], default_namespace: str) -> tuple[Subject, ...]:
    return tuple(Subject(str(item["kind"]), str(item["name"]),
                         str(item.get("namespace") or default_namespace)
                         if item["kind"] == "ServiceAccount" else "")
                 for item in items)


def load_documents(text: str, cp: ControlPlane, namespace: str = "default") -> list[str]:
    """RBAC YAML as an administrator would apply it (a tenant's Role and RoleBinding)."""
    docs = tuple(d for d in yaml.safe_load_all(text) if d)
    return Chart(docs, namespace).apply(cp)


@functools.cache
def render(*, sets: tuple[str, ...] = ()) -> Chart:
    """``helm template`` of the chart with its default values (plus ``sets``), once per
    process."""
    result = helm.template(sets=sets)
    return Chart(tuple(result.docs()), helm.NAMESPACE)
