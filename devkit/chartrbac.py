"""The chart's RBAC in the fixture control plane: its rendered Roles, ClusterRoles and bindings
become the control plane's RBAC table, so the real server, controllers and plugin run with
exactly what ``helm install`` would grant them; and what they then asked of it, as RBAC sees
each request.

    chart = chartrbac.render()      # helm template, once per process
    chart.apply(cp)                 # its RBAC into the control plane
    chart.worker_account, chart.plugin_account, chart.plugin_labels
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

from devkit import helm
from devkit.controlplane import Binding, ControlPlane, Recorded, Role, Rule, Subject
from devkit.controlplane.rbac import Attributes
from devkit.controlplane.requestinfo import parse_request, query_values

KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


@dataclasses.dataclass(frozen=True)
class Grant:
    """One rule of one of the chart's roles."""

    role: Role
    rule: Rule

    def describe(self) -> str:
        where = f"Role {self.role.namespace}/" if self.role.namespace else "ClusterRole "
        names = f" {list(self.rule.resource_names)}" if self.rule.resource_names else ""
        return (f"{where}{self.role.name}: {list(self.rule.verbs)} "
                f"{list(self.rule.api_groups)}/{list(self.rule.resources)}{names}")


def rbac_docs(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in KINDS]


def _rule(raw: dict[str, Any]) -> Rule:
    return Rule(verbs=tuple(raw.get("verbs") or ()), api_groups=tuple(raw.get("apiGroups") or ()),
                resources=tuple(raw.get("resources") or ()),
                resource_names=tuple(raw.get("resourceNames") or ()),
                non_resource_urls=tuple(raw.get("nonResourceURLs") or ()))  # fmt: skip


def roles(docs: Iterable[dict[str, Any]]) -> list[Role]:
    found = []
    for doc in rbac_docs(docs):
        if doc["kind"] in ("Role", "ClusterRole"):
            namespace = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
            found.append(Role(doc["metadata"]["name"],
                              tuple(_rule(r) for r in doc.get("rules") or ()), namespace))
    return found


def bindings(docs: Iterable[dict[str, Any]]) -> list[Binding]:
    found = []
    for doc in rbac_docs(docs):
        if doc["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        namespace = doc["metadata"].get("namespace") if doc["kind"] == "RoleBinding" else None
        subjects = tuple(Subject(s["kind"], s["name"], s.get("namespace", ""))
                         for s in doc["subjects"])  # fmt: skip
        found.append(Binding(doc["metadata"]["name"], doc["roleRef"]["kind"],
                             doc["roleRef"]["name"], subjects, namespace))
    return found


def install(cp: ControlPlane, docs: Iterable[dict[str, Any]]) -> None:
    """What ``helm install`` creates for RBAC, on top of the cluster's bootstrap roles."""
    listed = list(docs)
    for role in roles(listed):
        cp.policy.add_role(role)
    for binding in bindings(listed):
        cp.policy.add_binding(binding)


def grants_to(docs: Iterable[dict[str, Any]], service_account: str, namespace: str
              ) -> list[Grant]:
    """Every rule of the chart's own roles bound to that ServiceAccount."""
    listed = list(docs)
    own = {(r.namespace, r.name): r for r in roles(listed)}
    found = []
    for binding in bindings(listed):
        if not any(s.kind == "ServiceAccount" and s.name == service_account
                   and (s.namespace or binding.namespace) == namespace
                   for s in binding.subjects):  # fmt: skip
            continue
        role = own.get((binding.namespace if binding.role_kind == "Role" else None,
                        binding.role_name))  # fmt: skip
        if role is not None:
            found += [Grant(role, rule) for rule in role.rules]
    return found


def attributes(entry: Recorded, user: Any) -> Attributes:
    """What RBAC sees of a recorded request (kube's request info)."""
    query = query_values(entry.query)
    raw = entry.path + (f"?{entry.query}" if entry.query else "")
    return parse_request(entry.method, raw, query).attributes(user)


def allows(grant: Grant, attrs: Attributes) -> bool:
    """Whether ``grant`` alone admits ``attrs`` (a RoleBinding only in its namespace)."""
    if grant.role.namespace is not None and attrs.namespace != grant.role.namespace:
        return False
    return grant.rule.allows(attrs)


@dataclasses.dataclass(frozen=True)
class Chart:
    """The chart's rendered documents, and what tests ask of them."""

    docs: tuple[dict[str, Any], ...]

    def one(self, kind: str) -> dict[str, Any]:
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

    def apply(self, cp: ControlPlane) -> None:
        install(cp, self.docs)


@functools.cache
def render(*, sets: tuple[str, ...] = ()) -> Chart:
    """``helm template`` of the chart with its default values (plus ``sets``), once per
    process."""
    return Chart(tuple(helm.template(sets=sets).docs()))
