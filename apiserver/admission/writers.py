"""The writers' stage: who may write a ModelArtifact's or a NodeModelStore's status.

RBAC says who may ``update``/``patch`` a status at all; these rules, which the chain runs on the
request after authorization and before its body is read, narrow it to the one writer the design
allows (docs/auth.md, "Status guards"):

- ModelArtifact status (``ArtifactStatus``): only the worker identity
  (``apiserver.auth.worker``). Nobody else, not even ``system:masters``: mounts are authorized
  from that status, so nobody hand-writes it.
- NodeModelStore status (``NodeStoreStatus``): only the node plugin on the node the object is
  named after, by three rules, each refusal naming its rule:
  1. plugin service account: the caller is ``system:serviceaccount:<plugin ns>:<plugin sa>``;
  2. pod-bound token: exactly one ``authentication.kubernetes.io/pod-name`` and one ``pod-uid``
     extra;
  3. same node: the ``authentication.kubernetes.io/node-name`` extra (kube 1.30+) equals the
     object's name; without it, the Pod is looked up in the plugin namespace and must have the
     token's UID and run on that node (``spec.nodeName``). Without a cluster (standalone) there is
     no Pod to look up, so the extra is required there.
"""

from __future__ import annotations

from typing import Protocol

from apiserver import errors
from apiserver.admission import attributes, facts
from apiserver.auth import user as users
from apiserver.auth import webhook
from apiserver.auth import worker as workers
from openapi import resources

MAX_REMEMBERED_PODS = 4096


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


class ArtifactStatus:
    """Every status but a NodeModelStore's is the worker's to write (today: ModelArtifact's)."""

    name = "WorkerWritesStatus"

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster

    def handles(self, request: attributes.WriteRequest) -> bool:
        return (request.subresource == "status"
                and request.info.kind != resources.NODE_MODEL_STORE.kind)

    async def judge(self, request: attributes.WriteRequest) -> None:
        require_worker(request.user, self.cluster.worker,
                       what=f"a {request.info.kind}'s status")


class NodeStoreStatus:
    """The node plugin of that node writes a NodeModelStore's status (rules 1-3 above)."""

    name = "NodePluginWritesNodeStoreStatus"

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster
        self._placed: dict[tuple[str, str], str] = {}
        """(pod name, pod uid) -> node name: a Pod's node never changes, so a hit is final."""

    def handles(self, request: attributes.WriteRequest) -> bool:
        return (request.subresource == "status"
                and request.info.kind == resources.NODE_MODEL_STORE.kind)

    async def judge(self, request: attributes.WriteRequest) -> None:
        user, name, plugin = request.user, request.name, self.cluster.plugin

        def refuse(rule: str, why: str) -> errors.Forbidden:
            return errors.Forbidden(
                f'nodemodelstores/status "{_cut(name)}": refused by rule {rule}: {why}')

        if user.name != plugin.username:
            raise refuse("1 (plugin service account)",
                         f"only the node plugin's ServiceAccount {plugin.username} writes a "
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
        pods, namespace = self.cluster.pods, self.cluster.plugin.namespace
        if pods is None:
            raise refuse("3 (same node)",
                         f"the token carries no {users.NODE_NAME} extra, and without a cluster "
                         "there is no Pod to look up")
        try:
            found = await pods.pod(namespace, pod)
        except webhook.Unavailable as exc:
            raise errors.ServiceUnavailable(
                f"rule 3 (same node) could not be checked: looking up the plugin's Pod failed "
                f"({exc.reason}); try again") from None
        if found is None:
            raise refuse("3 (same node)", f'the token\'s Pod "{_cut(pod)}" does not exist in '
                         f'namespace "{namespace}"')
        if found.uid != uid:
            raise refuse("3 (same node)", f'the Pod "{_cut(pod)}" is not the one the token was '
                         "issued for (its UID differs)")
        if not found.node_name:
            raise refuse("3 (same node)", f'the Pod "{_cut(pod)}" is not scheduled to a node')
        if len(self._placed) >= MAX_REMEMBERED_PODS:
            self._placed.clear()
        self._placed[(pod, uid)] = found.node_name
        return found.node_name


class _Refuse(Protocol):
    def __call__(self, rule: str, why: str) -> errors.Forbidden: ...
