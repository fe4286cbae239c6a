"""The Pod admission webhook: two ``admission.k8s.io/v1`` AdmissionReview endpoints kube-apiserver
calls for Pod CREATE (the chart's MutatingWebhookConfiguration; standalone mode serves them too).

- ``fill`` (``openapi.install.FILL_WEBHOOK_PATH``, failure policy Fail): each model volume naming
  only its artifact gets ``artifactUID`` and ``manifestDigest`` (``openapi.podvolumes``).
- ``prefer`` (``PREFER_WEBHOOK_PATH``, failure policy Ignore): one preferred node-affinity term per
  digest the model volumes name, or required expressions for a Pod that opted in
  (``openapi.placement``). kube-apiserver calls it after ``fill`` (the order of the webhooks in
  the configuration), so it sees the filled digests.

Both answer from what this server already watches (``PodFacts``: the artifact informer, the
NodeModelStore index, the nodes running the plugin); they wait at most ``SYNC_WAIT`` for those
to be read once, then admit the Pod unchanged with a warning. Nothing a Pod says makes them fail:
what they cannot use is admitted as it is, with a warning. Only the opt-in of ``prefer`` refuses
(a Pod that must run where its digest is warm, and no node holds it: created later, by its
controller's retry, once a node does). A body that is not an AdmissionReview gets a 400
``Status`` naming the field; the body is bounded (``MAX_REVIEW_BYTES``) before it is read.

The paths are open to every caller (kube-apiserver presents no credentials to a webhook): an
answer tells what the Pod's namespace's artifacts resolved to and which nodes hold a digest,
which ``docs/security.md`` weighs.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from typing import Any, Final, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apiserver import errors
from apiserver.endpoints import body as bodies
from apiserver.endpoints import request as requests
from openapi import install, keys, placement, podvolumes, wire

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
MAX_REVIEW_BYTES: Final = 3 * 1024 * 1024
"""kube-apiserver's own bound on a request body; a Pod in a review is never larger."""
MAX_UID: Final = 128
SYNC_WAIT: Final = 2.0
"""How long a review waits for the watched objects to be read once (the chart's webhook
timeout is 5 s)."""
MAX_DIGESTS: Final = 16
"""The most digests one Pod gets terms for (the rest are warned about)."""


class PodFacts(Protocol):
    """What the webhooks read, all from memory."""

    async def artifacts_read(self, timeout: float) -> bool:
        """True once the artifacts were read once; False when ``timeout`` passed first."""
        ...

    async def nodes_read(self, timeout: float) -> bool:
        """True once the NodeModelStores and where the plugin runs were read once."""
        ...

    def artifact(self, namespace: str, name: str) -> wire.Readable | None: ...

    def warm_nodes(self, digest: str) -> list[str]:
        """The nodes warm for ``digest``, ranked and capped (``openapi.placement``)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Review:
    uid: str
    namespace: str
    pod: wire.Readable | None
    """The Pod to admit; None for anything that is not a Pod CREATE (admitted unchanged)."""


def _bad(field: str, rule: str) -> errors.BadRequest:
    return errors.BadRequest(f"the body is not an {API_VERSION} {KIND}: {field} {rule}")


def parse(document: dict[str, Any]) -> Review:
    """The review's request, or 400 naming the field that is wrong."""
    if document.get("apiVersion") != API_VERSION:
        raise _bad("apiVersion", f"must be {API_VERSION!r} (admissionReviewVersions: [v1])")
    if document.get("kind") != KIND:
        raise _bad("kind", f"must be {KIND!r}")
    request = document.get("request")
    if not isinstance(request, dict):
        raise _bad("request", "must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > MAX_UID:
        raise _bad("request.uid", f"must be a string of 1 to {MAX_UID} characters")
    namespace = request.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise _bad("request.namespace", "must be a string")
    kind = request.get("kind")
    if not isinstance(kind, dict):
        raise _bad("request.kind", "must be an object (group, version, kind)")
    is_pod = (kind.get("group") in ("", None) and kind.get("kind") == "Pod"
              and request.get("operation") == "CREATE" and not request.get("subResource"))
    if not is_pod:
        return Review(uid, namespace or "", None)
    pod = request.get("object")
    if not isinstance(pod, dict):
        raise _bad("request.object", "must be the Pod being created (an object)")
    return Review(uid, namespace or wire.text(pod, "metadata", "namespace"), pod)


def answer(uid: str, *, operations: Sequence[placement.Operation] = (),
           warnings: Sequence[str] = (), denied: str = "") -> dict[str, Any]:
    """The AdmissionReview kube-apiserver reads back: the same ``uid``, allowed or not, the
    patch (base64 JSON Patch) and the warnings."""
    response: dict[str, Any] = {"uid": uid, "allowed": not denied}
    if denied:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": denied}
    elif operations:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(operations))).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


NOT_READ: Final = ("the model-manager API server has not read the cluster's {what} yet; the Pod "
                   "is admitted unchanged")


async def fill(review: Review, facts: PodFacts) -> dict[str, Any]:
    pod = review.pod
    if pod is None or not podvolumes.model_volumes(pod):
        return answer(review.uid)
    if not await facts.artifacts_read(SYNC_WAIT):
        return answer(review.uid, warnings=[NOT_READ.format(what="ModelArtifacts")])
    done = podvolumes.fill(pod, review.namespace,
                           lambda name: facts.artifact(review.namespace, name))
    return answer(review.uid, operations=done.operations, warnings=done.warnings)


async def prefer(review: Review, facts: PodFacts) -> dict[str, Any]:
    pod = review.pod
    if pod is None or not podvolumes.model_volumes(pod) or placement.kueue_places(pod):
        return answer(review.uid)
    required = placement.requires_warm(pod)
    if required and any(not v.manifest_digest for v in podvolumes.model_volumes(pod)):
        return answer(review.uid, denied=_cold(
            "a model volume names no manifestDigest (is its artifact resolved?)"))
    found = podvolumes.digests(pod)
    warnings: list[str] = []
    if len(found) > MAX_DIGESTS:
        warnings.append(f"only the first {MAX_DIGESTS} of {len(found)} model digests get a "
                        "placement term")
        found = found[:MAX_DIGESTS]
    if not await facts.nodes_read(SYNC_WAIT):
        warnings.append(NOT_READ.format(what="NodeModelStores"))
        return answer(review.uid, warnings=warnings)
    held = [(digest, facts.warm_nodes(digest)) for digest in found]
    if required:
        cold = [digest for digest, nodes in held if not nodes]
        if cold:
            return answer(review.uid, denied=_cold(f"no node holds {cold[0]} Ready now"))
        operations = placement.required_patch(
            pod, [placement.expression(nodes) for _, nodes in held])
    else:
        operations = placement.preferred_patch(
            pod, [placement.preferred_term(nodes) for _, nodes in held if nodes])
    return answer(review.uid, operations=operations, warnings=warnings)


def _cold(why: str) -> str:
    return (f"the Pod asks to run only where its model is warm ({keys.REQUIRE_WARM_NODE}: "
            f"{keys.REQUIRE_WARM_NODE_ON}) and {why}: warm a node first (a ModelPrefetch), or drop "
            "the annotation to let the Pod download it")


def routes(facts: PodFacts) -> list[BaseRoute]:
    async def serve(request: Request, step: Any) -> Response:
        body = await requests.read_body(request, MAX_REVIEW_BYTES)
        decoded = await bodies.decode(body, request.headers.get("content-type", ""))
        review = parse(decoded.document)
        return Response(orjson.dumps(await step(review, facts)), media_type="application/json")

    async def serve_fill(request: Request) -> Response:
        return await serve(request, fill)

    async def serve_prefer(request: Request) -> Response:
        return await serve(request, prefer)

    return [Route(install.FILL_WEBHOOK_PATH, serve_fill, methods=["POST"]),
            Route(install.PREFER_WEBHOOK_PATH, serve_prefer, methods=["POST"])]
