"""A local RBAC evaluator: Roles, ClusterRoles and their bindings, judged as kube's RBAC does.

Used in standalone mode, where there is no kube-apiserver to ask, so that the same requests are
allowed and refused as behind a real cluster with the chart's roles (``apiserver.auth.policy``).
The objects are the ``rbac.authorization.k8s.io/v1`` kinds, read from YAML; the rules follow
k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac:

- a ClusterRoleBinding grants its ClusterRole everywhere: every namespace, cluster-scoped
  resources, and non-resource URLs;
- a RoleBinding grants its Role, or a ClusterRole's rules, in its own namespace only;
- a rule matches when its verbs, apiGroups and resources (``*``, ``<res>/<sub>``, ``*/<sub>``)
  match, and its resourceNames, when given, list the request's name;
- ``nonResourceURLs`` match exactly, or as a prefix when they end in ``*``;
- subjects: ``User`` by name, ``Group`` by group, ``ServiceAccount`` by
  ``system:serviceaccount:<namespace>:<name>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer
from apiserver.auth import user as users

API_VERSION = "rbac.authorization.k8s.io/v1"
KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


class PolicyError(ValueError):
    """A policy document that is not a usable RBAC object; the message names the document."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def allows(self, a: attrs.Attributes) -> bool:
        if "*" not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return any(_url_matches(url, a.path) for url in self.non_resource_urls)
        if "*" not in self.api_groups and a.api_group not in self.api_groups:
            return False
        if not _resource_matches(self.resources, a.resource, a.subresource):
            return False
        return not self.resource_names or a.name in self.resource_names



def _resource_matches(rules: Sequence[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for rule in rules:
        if rule in ("*", combined):
            return True
        if subresource and rule == f"*/{subresource}":
            return True
    return False


def _url_matches(rule: str, path: str) -> bool:
    if rule == "*" or rule == path:
        return True
    return rule.endswith("*") and path.startswith(rule[:-1])


@dataclasses.dataclass(frozen=True, slots=True)
class Role:
    name: str
    rules: tuple[Rule, ...]
    namespace: str = ""
    """Empty for a ClusterRole."""



@dataclasses.dataclass(frozen=True, slots=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def matches(self, user: users.UserInfo) -> bool:
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            return user.name == users.service_account(self.namespace, self.name)
        return False



@dataclasses.dataclass(frozen=True, slots=True)
class Binding:
    name: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]
    namespace: str = ""
    """Empty for a ClusterRoleBinding."""

    @property
    def kind(self) -> str:
        return "RoleBinding" if self.namespace else "ClusterRoleBinding"



@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    roles: tuple[Role, ...] = ()
    bindings: tuple[Binding, ...] = ()

    def __add__(self, other: Policy) -> Policy:
        return Policy(self.roles + other.roles, self.bindings + other.bindings)


class Evaluator:
    """RBAC over a fixed ``Policy``: an ``Authorizer`` (allow, or no opinion, as RBAC answers)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._cluster_roles = {r.name: r for r in policy.roles if not r.namespace}
        self._roles = {(r.namespace, r.name): r for r in policy.roles if r.namespace}
        self._ordered = sorted(policy.bindings, key=lambda b: bool(b.namespace))

    def _rules_of(self, binding: Binding) -> tuple[Rule, ...]:
        if binding.role_kind == "ClusterRole":
            role = self._cluster_roles.get(binding.role_name)
        else:
            role = self._roles.get((binding.namespace, binding.role_name))
        return role.rules if role is not None else ()

    def allowing(self, a: attrs.Attributes) -> tuple[Binding, Subject] | None:
        """The binding (and its subject) that allows ``a``: ClusterRoleBindings first, then the
        RoleBindings of the request's namespace, as kube's RBAC visits them."""
        for binding in self._ordered:
            # a RoleBinding grants nothing outside its namespace, and no non-resource URL
            if binding.namespace and (not a.resource_request or a.namespace != binding.namespace):
                continue
            subject = next((s for s in binding.subjects if s.matches(a.user)), None)
            if subject is None:
                continue
            if any(rule.allows(a) for rule in self._rules_of(binding)):
                return binding, subject
        return None

    def rules_for(self, user: users.UserInfo, namespace: str) -> tuple[Rule, ...]:
        """Every rule granted to ``user`` in ``namespace`` (kube's ``RulesFor``, behind a
        SelfSubjectRulesReview): its ClusterRoleBindings' rules, then its RoleBindings' in that
        namespace; a RoleBinding's non-resource rules grant nothing and are left out."""
        found: list[Rule] = []
        for binding in self._ordered:
            if binding.namespace and binding.namespace != namespace:
                continue
            if not any(subject.matches(user) for subject in binding.subjects):
                continue
            for rule in self._rules_of(binding):
                if binding.namespace and not rule.resources:
                    continue
                if rule not in found:
                    found.append(rule)
        return tuple(found)

    async def authorize(self, attributes: attrs.Attributes) -> authorizer.Verdict:
        found = self.allowing(attributes)
        if found is None:
            return authorizer.NO_OPINION
        binding, subject = found
        where = f"{binding.name}/{binding.namespace}" if binding.namespace else binding.name
        who = (f'ServiceAccount "{subject.name}/{subject.namespace}"'
               if subject.kind == "ServiceAccount" else f'{subject.kind} "{subject.name}"')
        return authorizer.Verdict(
            authorizer.Decision.ALLOW,
            f'RBAC: allowed by {binding.kind} "{where}" of {binding.role_kind} '
            f'"{binding.role_name}" to {who}')


# reading -------------------------------------------------------------------------------------


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where}: must be a list of strings")
    return tuple(value)


def _rule(body: Any, where: str) -> Rule:
    if not isinstance(body, dict):
        raise PolicyError(f"{where}: a rule must be an object")
    rule = Rule(
        verbs=_strings(body.get("verbs"), f"{where}.verbs"),
        api_groups=_strings(body.get("apiGroups"), f"{where}.apiGroups"),
        resources=_strings(body.get("resources"), f"{where}.resources"),
        resource_names=_strings(body.get("resourceNames"), f"{where}.resourceNames"),
        non_resource_urls=_strings(body.get("nonResourceURLs"), f"{where}.nonResourceURLs"),
    )
    if not rule.verbs:
        raise PolicyError(f"{where}.verbs: at least one verb is required")
    if rule.non_resource_urls and (rule.resources or rule.api_groups):
        raise PolicyError(f"{where}: a rule names either resources or nonResourceURLs")
    return rule


def _metadata(doc: Mapping[str, Any], where: str, *, namespaced: bool) -> tuple[str, str]:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) \
            or not metadata["name"]:
        raise PolicyError(f"{where}: metadata.name is required")
    namespace = metadata.get("namespace") or ""
    if namespaced and (not isinstance(namespace, str) or not namespace):
        raise PolicyError(f"{where}: metadata.namespace is required for a {doc['kind']}")
    if not namespaced and namespace:
        raise PolicyError(f"{where}: a {doc['kind']} has no namespace")
    return metadata["name"], str(namespace)


def parse(documents: Iterable[Any], *, source: str = "policy") -> Policy:
    """RBAC objects (dicts from YAML); anything else is an error naming the document."""
    roles: list[Role] = []
    bindings: list[Binding] = []
    for index, doc in enumerate(documents, start=1):
        if doc is None:
            continue
        where = f"{source}: document {index}"
        if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
            raise PolicyError(f"{where}: kind must be one of {', '.join(KINDS)}")
        if doc.get("apiVersion") != API_VERSION:
            raise PolicyError(f"{where}: apiVersion must be {API_VERSION}")
        kind = doc["kind"]
        namespaced = kind in ("Role", "RoleBinding")
        name, namespace = _metadata(doc, where, namespaced=namespaced)
        where = f"{source}: {kind} {namespace + '/' if namespace else ''}{name}"
        if kind in ("Role", "ClusterRole"):
            raw_rules = doc.get("rules") or []
            if not isinstance(raw_rules, list):
                raise PolicyError(f"{where}: rules must be a list")
            roles.append(Role(name, tuple(_rule(r, f"{where} rules[{i}]")
                                          for i, r in enumerate(raw_rules)), namespace))
            continue
        ref = doc.get("roleRef")
        if not isinstance(ref, dict) or ref.get("kind") not in ("Role", "ClusterRole") \
                or not isinstance(ref.get("name"), str):
            raise PolicyError(f"{where}: roleRef needs kind Role or ClusterRole and a name")
        if kind == "ClusterRoleBinding" and ref["kind"] != "ClusterRole":
            raise PolicyError(f"{where}: a ClusterRoleBinding refers to a ClusterRole")
        bindings.append(Binding(name, ref["kind"], ref["name"],
                                _subjects(doc.get("subjects"), where, namespace), namespace))
    return Policy(tuple(roles), tuple(bindings))


def _subjects(raw: Any, where: str, namespace: str) -> tuple[Subject, ...]:
    if not isinstance(raw, list):
        raise PolicyError(f"{where}: subjects must be a list")
    out: list[Subject] = []
    for i, body in enumerate(raw):
        if not isinstance(body, dict) or body.get("kind") not in ("User", "Group",
                                                                   "ServiceAccount") \
                or not isinstance(body.get("name"), str) or not body["name"]:
            raise PolicyError(f"{where} subjects[{i}]: kind User, Group or ServiceAccount and a "
                              "name are required")
        subject_ns = body.get("namespace") or ""
        if body["kind"] == "ServiceAccount":
            subject_ns = subject_ns or namespace
            if not subject_ns:
                raise PolicyError(f"{where} subjects[{i}]: a ServiceAccount needs a namespace")
        out.append(Subject(body["kind"], body["name"], str(subject_ns)))
    return tuple(out)
