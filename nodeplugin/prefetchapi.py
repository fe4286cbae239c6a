"""``POST /model/prefetches`` on the plugin's HTTPS port: the worker asks this node to hold an
artifact ahead of use (a ModelPrefetch's delivery in standalone mode, docs/controllers.md).

Served to the worker identity only (``serve.make_app`` admits the caller as for
``/model/downloads``). The artifact is judged by the mount authorization itself
(``authorize.authorize``, rules 2 and 3: it exists in the named namespace with that UID, has a
hub source, is Resolved=True and resolved to that digest), against the informer's copy of the
API, exactly as a volume of a Pod in that namespace would be; a tree found at start is checked
first if start-up has not reached it yet, as for a mount. Then the digest goes through the node
cache's ordinary path
(``Materializer.ensure``: download, verify, publish once), as a mount's would. Nothing is mounted
and the digest's last use is not touched: warming a node is not using the model.

The answer is the materialization's state (``Published``, ``Downloading`` with bytes, ``Failed``
with the reason and message a mount would get); a refused or malformed request is a Kubernetes
``Status`` (400, 403, 503 while the artifacts are not listed yet).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypedDict

from starlette import requests, responses

from nodeplugin import artifacts, authorize, errors
from nodeplugin.cache import integrity
from nodeplugin.csi import node
from nodeplugin.materialize import interface
from openapi import sources

log = logging.getLogger(__name__)

PATH = "/model/prefetches"
MAX_BODY = 64 * 1024
PSEUDO_TARGET = "model-prefetch"
"""Below the kubelet directory, checked lexically only: a prefetch has no volume to mount, so
rule 1 (an inline ephemeral mount volume at a safe target) is met by construction."""

Handler = Callable[[requests.Request], Awaitable[responses.Response]]
_CODES: dict[type[errors.PluginError], tuple[int, str]] = {
    errors.InvalidArgument: (400, "BadRequest"),
    errors.PermissionDenied: (403, "Forbidden"),
    errors.Unavailable: (503, "ServiceUnavailable"),
}


class Answer(TypedDict, total=False):
    digest: str
    state: Literal["Published", "Downloading", "Failed"]
    downloadedBytes: int
    sizeBytes: int
    reason: str
    message: str


def answer_of(progress: interface.Progress) -> Answer:
    body: Answer = {"digest": progress.digest, "state": progress.state.value,
                    "downloadedBytes": progress.received_bytes,
                    "sizeBytes": progress.total_bytes or 0}
    if progress.state is interface.State.FAILED:
        body["reason"] = progress.reason.value if progress.reason is not None else "Failed"
        body["message"] = node.outcome_error(progress).message
    return body


def status(code: int, reason: str, message: str) -> responses.JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return responses.JSONResponse(body, status_code=code)


def _field(body: dict[str, Any], key: str) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise errors.InvalidArgument(f"{key} must be a string")
    return value


def handler(
    *,
    informer: artifacts.Informer,
    kubelet_dir: str,
    materializer: interface.Materializer,
    checks: integrity.Integrity | None = None,
) -> Handler:
    """The route's handler (the caller admits the worker before calling it)."""

    async def warm(body: dict[str, Any]) -> Answer:
        namespace = _field(body, "namespace")
        volume_context = {
            authorize.EPHEMERAL: "true",
            authorize.POD_NAMESPACE: namespace,
            authorize.ARTIFACT: _field(body, "artifact"),
            authorize.ARTIFACT_UID: _field(body, "artifactUID"),
            authorize.MANIFEST_DIGEST: _field(body, "manifestDigest"),
        }
        token = _field(body, "token") or None
        grant = authorize.authorize(
            informer, kubelet_dir=kubelet_dir, target=f"{kubelet_dir}/{PSEUDO_TARGET}",
            mount_capability=True, volume_context=volume_context, walk=False)
        if checks is not None:
            await checks.before_use(grant.digest)
        art = grant.artifact
        progress = await materializer.ensure(interface.Request(
            digest=grant.digest,
            source=interface.Source(
                kind=sources.hub_kind(art.source_kind) or sources.MODEL_SCOPE,
                repository=art.repository, revision=art.revision,
                allow_patterns=art.allow_patterns, ignore_patterns=art.ignore_patterns),
            token=token))
        log.info("prefetch of %s for %s/%s: %s", grant.digest, namespace, art.name,
                 progress.state.value)
        return answer_of(progress)

    async def serve(request: requests.Request) -> responses.Response:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return status(413, "RequestEntityTooLarge", f"the body exceeds {MAX_BODY} bytes")
        try:
            body = json.loads(raw)
        except ValueError:
            return status(400, "BadRequest", "the body is not JSON")
        if not isinstance(body, dict):
            return status(400, "BadRequest", "the body is not a JSON object")
        try:
            return responses.JSONResponse(await warm(body))
        except errors.PluginError as exc:
            code, reason = _CODES.get(type(exc), (500, "InternalError"))
            return status(code, reason, exc.message)

    return serve
