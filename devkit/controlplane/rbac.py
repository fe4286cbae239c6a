"""A small RBAC table with kube's matching rules, for the control plane's own API calls and for
the SubjectAccessReviews it answers.

``system:masters`` is allowed everything (with no reason, like kube's privileged-group
authorizer). Otherwise a request is allowed when a rule of a role bound to the user, one of its
groups or its ServiceAccount matches, and the reason names that binding exactly as RBAC does
(``RBAC: allowed by RoleBinding "alice-reader/team-a" of Role "reader" to User "alice"``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Sequence

from devkit.controlplane.identity import AUTHENTICATED, MASTERS, UNAUTHENTICATED, UserInfo


@dataclasses.dataclass(frozen=True)
class Attributes:
    """What a request asks to do (apiserver's authorizer.Attributes)."""

    user: UserInfo
    verb: str
    resource_request: bool
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


@dataclasses.dataclass(frozen=True)
class Rule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def allows(self, attrs: Attributes) -> bool:
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.resource_request:
            return any(_url_matches(url, attrs.path) for url in self.non_resource_urls)
        if "*" not in self.api_groups and attrs.group not in self.api_groups:
            return False
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        if not any(
            r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
            for r in self.resources
        ):
            return False
        return not self.resource_names or attrs.name in self.resource_names


def _url_matches(rule: str, path: str) -> bool:
    if rule == "*" or rule == path:
        return True
    return rule.endswith("*") and path.startswith(rule[:-1])


@dataclasses.dataclass(frozen=True)
class Role:
    """A Role (``namespace`` set) or a ClusterRole (``namespace`` None)."""

    name: str
    rules: tuple[Rule, ...]
    namespace: str | None = None

    @property
    def kind(self) -> str:
        return "ClusterRole" if self.namespace is None else "Role"


@dataclasses.dataclass(frozen=True)
class Subject:
    kind: str  # "User", "Group" or "ServiceAccount"
    name: str
    namespace: str = ""

    def matches(self, user: UserInfo, binding_namespace: str) -> bool:
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        namespace = self.namespace or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{self.name}"

    def describe(self, binding_namespace: str) -> str:
        if self.kind == "ServiceAccount":
            return f'ServiceAccount "{self.name}/{self.namespace or binding_namespace}"'
        return f'{self.kind} "{self.name}"'


@dataclasses.dataclass(frozen=True)
class Binding:
    """A RoleBinding (``namespace`` set) or a ClusterRoleBinding (``namespace`` None).
    ``role_kind`` is "Role" or "ClusterRole"."""

    name: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]
    namespace: str | None = None


@dataclasses.dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


# fmt: off
def _bootstrap() -> tuple[list[Role], list[Binding]]:
    """The default policy of a fresh cluster that our components rely on."""
    everyone = (Subject("Group", AUTHENTICATED),)
    roles = [
        Role("system:discovery", (Rule(("get",), non_resource_urls=(
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
            "/openapi/*", "/readyz", "/version", "/version/",
        )),)),
        Role("system:public-info-viewer", (Rule(("get",), non_resource_urls=(
            "/healthz", "/livez", "/readyz", "/version", "/version/",
        )),)),
        Role("system:basic-user", (Rule(
            ("create",), ("authorization.k8s.io",),
            ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
        ), Rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)))),
        Role("system:auth-delegator", (
            Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
            Rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews",)),
        )),
        Role("extension-apiserver-authentication-reader", (Rule(
            ("get", "list", "watch"), ("",), ("configmaps",),
            ("extension-apiserver-authentication",),
        ),), namespace="kube-system"),
    ]
    bindings = [
        Binding("system:discovery", "ClusterRole", "system:discovery", everyone),
        Binding("system:basic-user", "ClusterRole", "system:basic-user", everyone),
        Binding(
            "system:public-info-viewer",
            "ClusterRole",
            "system:public-info-viewer",
            (*everyone, Subject("Group", UNAUTHENTICATED)),
        ),
    ]
    return roles, bindings
# fmt: on


class Policy:
    """The RBAC table. Thread-safe; tests change it while the server runs."""

    def __init__(self, *, bootstrap: bool = True) -> None:
        self._lock = threading.Lock()
        self._roles: dict[tuple[str | None, str], Role] = {}
        self._bindings: list[Binding] = []
        if bootstrap:
            roles, bindings = _bootstrap()
            for role in roles:
                self.add_role(role)
            for binding in bindings:
                self.add_binding(binding)

    def add_role(self, role: Role) -> Role:
        with self._lock:
            self._roles[(role.namespace, role.name)] = role
        return role

    def add_binding(self, binding: Binding) -> Binding:
        with self._lock:
            self._bindings = [
                b for b in self._bindings
                if (b.namespace, b.name) != (binding.namespace, binding.name)
            ] + [binding]  # fmt: skip
        return binding

    def remove_binding(self, name: str, namespace: str | None = None) -> None:
        with self._lock:
            self._bindings = [
                b for b in self._bindings if (b.namespace, b.name) != (namespace, name)
            ]

    def grant(
        self,
        subject: Subject | str,
        rules: Sequence[Rule] | Rule,
        *,
        namespace: str | None = None,
        name: str | None = None,
    ) -> Binding:
        """One role with ``rules`` bound to ``subject`` (a Subject, or a user name): a Role and
        RoleBinding in ``namespace``, or a ClusterRole and ClusterRoleBinding without one."""
        who = subject if isinstance(subject, Subject) else Subject("User", subject)
        label = name or f"{who.name.replace(':', '-')}-{len(self._bindings)}"
        rule_list = (rules,) if isinstance(rules, Rule) else tuple(rules)
        role = self.add_role(Role(label, rule_list, namespace=namespace))
        return self.add_binding(Binding(label, role.kind, role.name, (who,), namespace=namespace))

    def bind(
        self,
        role_name: str,
        subjects: Iterable[Subject | str],
        *,
        namespace: str | None = None,
        role_kind: str = "ClusterRole",
        name: str | None = None,
    ) -> Binding:
        """Bind an existing role (e.g. ``system:auth-delegator``) to users or Subjects."""
        who = tuple(s if isinstance(s, Subject) else Subject("User", s) for s in subjects)
        label = name or f"{role_name}-{len(self._bindings)}"
        return self.add_binding(Binding(label, role_kind, role_name, who, namespace=namespace))

    def authorize(self, attrs: Attributes) -> Decision:
        if MASTERS in attrs.user.groups:
            return Decision(True)
        with self._lock:
            bindings = list(self._bindings)
            roles = dict(self._roles)
        # kube visits ClusterRoleBindings first, then the RoleBindings of the namespace.
        ordered = [b for b in bindings if b.namespace is None] + [
            b for b in bindings if b.namespace is not None
        ]
        for binding in ordered:
            if binding.namespace is not None and (
                not attrs.resource_request or binding.namespace != attrs.namespace
            ):
                continue
            role_namespace = binding.namespace if binding.role_kind == "Role" else None
            role = roles.get((role_namespace, binding.role_name))
            if role is None:
                continue
            for subject in binding.subjects:
                if not subject.matches(attrs.user, binding.namespace or ""):
                    continue
                if any(rule.allows(attrs) for rule in role.rules):
                    return Decision(True, _reason(binding, subject))
        return Decision(False)


def _reason(binding: Binding, subject: Subject) -> str:
    if binding.namespace is None:
        return (
            f'RBAC: allowed by ClusterRoleBinding "{binding.name}" of {binding.role_kind} '
            f'"{binding.role_name}" to {subject.describe("")}'
        )
    return (
        f'RBAC: allowed by RoleBinding "{binding.name}/{binding.namespace}" of '
        f'{binding.role_kind} "{binding.role_name}" to {subject.describe(binding.namespace)}'
    )
