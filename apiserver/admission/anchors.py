"""``AnchorGrant``: only a user allowed verb ``anchor`` on ``modelartifacts`` grants an anchor.

An artifact's ``spec.expectedDigest`` may stand for its content when the hub stays unreachable,
and mounts are then authorized by that digest alone; so the anchor becomes the resolution only
where the namespace proved it may read that content, or where an administrator granted it
(``openapi.anchors``). The grant is the annotation ``worker.gpustack.ai/anchor-grant``: a write
that adds it or changes its value is authorized like kube's ``bind`` and ``escalate`` checks,
by asking the authorizer (SubjectAccessReview in a cluster, the local policy standalone) whether
the requester may ``anchor`` this artifact: 403 naming the rule otherwise, 503 when the question
cannot be answered. An allowed grant is recorded in ``status.anchorGrant``, which only the server
writes (main-resource writes keep the stored status, the status path is the worker's), so the
record cannot be forged, not even by an annotation written before this rule existed. Removing
the annotation (anyone who may update the artifact) removes the record; an unchanged annotation
keeps whatever record there is.
"""

from __future__ import annotations

from typing import Any

from apiserver import errors
from apiserver.admission import facts
from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer
from apiserver.auth import user as users
from apiserver.registry import meta, strategy
from openapi import anchors, resources

RULE = "AnchorGrant"
RECORD = "anchorGrant"
"""``status.anchorGrant``: the server's record of an allowed grant."""
WHY = (f"the annotation {anchors.ANNOTATION} lets spec.expectedDigest stand for content the "
       "hub has not shown this namespace; only a user allowed verb "
       f"{anchors.VERB} on {anchors.RESOURCE} sets or changes it")


def _grant(obj: dict[str, Any] | None) -> str | None:
    if obj is None:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict):
        return None
    value = annotations.get(anchors.ANNOTATION)
    return value if isinstance(value, str) else None


def attributes(user: users.UserInfo, namespace: str, name: str) -> attrs.Attributes:
    """What the authorizer is asked: may ``user`` anchor this artifact."""
    path = f"/apis/{resources.GROUP_VERSION}/namespaces/{namespace}/{anchors.RESOURCE}/{name}"
    return attrs.Attributes(
        user=user, verb=anchors.VERB, path=path, resource_request=True,
        api_group=resources.GROUP, api_version=resources.VERSION, namespace=namespace,
        resource=anchors.RESOURCE, name=name)


class AnchorGrant:
    name = RULE

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == resources.MODEL_ARTIFACT.kind and write.subresource == ""

    async def authorize(self, write: strategy.Write, user: users.UserInfo | None) -> None:
        given, before = _grant(write.obj), _grant(write.old)
        status = write.obj.get("status")
        if given is None:
            if isinstance(status, dict) and status.pop(RECORD, None) is not None and not status:
                write.obj.pop("status")
            return
        if given == before:
            return  # unchanged: the record there is (or is not) stands
        metadata = write.obj["metadata"]
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        await self._allowed(user, namespace, name)
        if not isinstance(status, dict):
            status = write.obj["status"] = {}
        status[RECORD] = {"grantedTime": meta.now()}

    async def _allowed(self, user: users.UserInfo | None, namespace: str, name: str) -> None:
        judge = self.cluster.authorizer
        if user is None or judge is None:
            who = "the write has no requester" if user is None else "the server has no authorizer"
            raise errors.Forbidden(
                f'{anchors.RESOURCE}.{resources.GROUP} "{name}" is forbidden: rule {RULE}: '
                f"{who} to ask whether it may {anchors.VERB} it")
        asked = attributes(user, namespace, name)
        verdict = await judge.authorize(asked)
        if verdict.allowed:
            return
        if verdict.error:
            raise errors.ServiceUnavailable(
                f"rule {RULE} could not be checked: {verdict.error}; try again")
        raise authorizer.forbidden(asked, f"rule {RULE}: {WHY}")
