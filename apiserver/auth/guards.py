"""Status write guards: who may write a ModelArtifact's or a NodeModelStore's status.

RBAC says who may ``update``/``patch`` a status at all; these guards, which the status endpoints
call after authorization, narrow it to the one writer the design allows (docs/auth.md, "Status
guards"):

- ModelArtifact status: only the worker identity (``apiserver.auth.worker``). Nobody else, not
  even ``system:masters``: mounts are authorized from that status, so nobody hand-writes it.
- NodeModelStore status: only the node plugin on the node the object is named after, by three
  rules, each refusal naming its rule:
  1. plugin service account: the caller is ``system:serviceaccount:<plugin ns>:<plugin sa>``;
  2. pod-bound token: exactly one ``authentication.kubernetes.io/pod-name`` and one ``pod-uid``
     extra;
  3. same node: the ``authentication.kubernetes.io/node-name`` extra (kube 1.30+) equals the
     object's name; without it, the Pod is looked up in the plugin namespace and must have the
     token's UID and run on that node (``spec.nodeName``). Without a cluster (standalone) there is
     no Pod to look up, so the extra is required there.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from apiserver import errors
from apiserver.auth import user as users
from apiserver.auth import webhook
from apiserver.auth import worker as workers
from openapi import resources

MAX_REMEMBERED_PODS = 4096


@dataclasses.dataclass(frozen=True, slots=True)
class PodFacts:
    uid: str
    node_name: str


class PodLookup(Protocol):
    async def pod(self, namespace: str, name: str) -> PodFacts | None:
        """The Pod, None when it does not exist; raises ``webhook.Unavailable``."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Plugin:
    """The node plugin's ServiceAccount."""

    namespace: str
    service_account: str

    @property
    def username(self) -> str:
        return users.service_account(self.namespace, self.service_account)


def require_worker(user: users.UserInfo, identity: workers.WorkerIdentity, *,
                   what: str = "a ModelArtifact's status") -> None:
    """Refuse (403) anyone but the worker identity; only the worker writes ``what``."""
    if identity.is_worker(user):
        return
    if not identity.known:
        raise errors.Forbidden(
            f"only the worker writes {what}, and the worker identity is unknown: "
            f"{identity.reason}")
    raise errors.Forbidden(
        f'only the worker writes {what}; user "{_cut(user.name)}" may not'
        " (the worker reports what it resolved and downloaded, and mounts are authorized"
        " from it)"
    )


def _cut(text: str, limit: int = 256) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class StatusGuards:
    """The guards the status endpoints call; ``worker`` is set once the identity is learned."""

    def __init__(self, *, worker: workers.WorkerIdentity, plugin: Plugin,
                 pods: PodLookup | None) -> None:
        self.worker = worker
        self.plugin = plugin
        self.pods = pods
        self._placed: dict[tuple[str, str], str] = {}
        """(pod name, pod uid) -> node name: a Pod's node never changes, so a hit is final."""

    async def check(self, info: resources.ResourceInfo, user: users.UserInfo,
                    name: str) -> None:
        if info.kind == resources.NODE_MODEL_STORE.kind:
            await self.node_store(user, name)
        else:
            require_worker(user, self.worker, what=f"a {info.kind}'s status")

    async def node_store(self, user: users.UserInfo, name: str) -> None:
        def refuse(rule: str, why: str) -> errors.Forbidden:
            return errors.Forbidden(
                f'nodemodelstores/status "{_cut(name)}": refused by rule {rule}: {why}')

        if user.name != self.plugin.username:
            raise refuse("1 (plugin service account)",
                         f"only the node plugin's ServiceAccount {self.plugin.username} writes a "
                         f'NodeModelStore\'s status, not user "{_cut(user.name)}"')
        pod_names, pod_uids = user.extra_values(users.POD_NAME), user.extra_values(users.POD_UID)
        if len(pod_names) != 1 or len(pod_uids) != 1 or not pod_names[0] or not pod_uids[0]:
            raise refuse("2 (pod-bound token)",
                         f"the token must be bound to the plugin's Pod, with exactly one "
                         f"{users.POD_NAME} and one {users.POD_UID} extra (it has "
                         f"{len(pod_names)} and {len(pod_uids)})")
        node = await self._node_of(pod_names[0], pod_uids[0], user, refuse)
        if node != name:
            raise refuse("3 (same node)",
                         f'the plugin\'s Pod runs on node "{_cut(node)}", not on "{_cut(name)}",'
                         " the node this NodeModelStore is named after")

    async def _node_of(self, pod: str, uid: str, user: users.UserInfo,
                       refuse: _Refuse) -> str:
        nodes = user.extra_values(users.NODE_NAME)
        if len(nodes) > 1:
            raise refuse("3 (same node)", f"the token carries {len(nodes)} {users.NODE_NAME}"
                         " extras; a Pod runs on one node")
        if nodes:
            return nodes[0]
        remembered = self._placed.get((pod, uid))
        if remembered is not None:
            return remembered
        if self.pods is None:
            raise refuse("3 (same node)",
                         f"the token carries no {users.NODE_NAME} extra, and without a cluster "
                         "there is no Pod to look up")
        try:
            facts = await self.pods.pod(self.plugin.namespace, pod)
        except webhook.Unavailable as exc:
            raise errors.ServiceUnavailable(
                f"rule 3 (same node) could not be checked: looking up the plugin's Pod failed "
                f"({exc.reason}); try again") from None
        if facts is None:
            raise refuse("3 (same node)", f'the token\'s Pod "{_cut(pod)}" does not exist in '
                         f'namespace "{self.plugin.namespace}"')
        if facts.uid != uid:
            raise refuse("3 (same node)", f'the Pod "{_cut(pod)}" is not the one the token was '
                         "issued for (its UID differs)")
        if not facts.node_name:
            raise refuse("3 (same node)", f'the Pod "{_cut(pod)}" is not scheduled to a node')
        if len(self._placed) >= MAX_REMEMBERED_PODS:
            self._placed.clear()
        self._placed[(pod, uid)] = facts.node_name
        return facts.node_name


class _Refuse(Protocol):
    def __call__(self, rule: str, why: str) -> errors.Forbidden: ...
