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

The body is bounded before it is parsed, as the API server's are: at most ``MAX_BODY`` bytes
(413 from ``Content-Length`` at once, else as soon as the stream passes it), JSON nested at most
``jsondepth.MAX_DEPTH`` levels (the API server's rule, ``openapi.jsondepth``), and each field in
its grammar (the namespace a DNS label, the artifact a DNS subdomain, the UID a short name, the
digest ``sha256:<64 hex>``, the token visible ASCII of at most ``MAX_TOKEN`` characters) before
anything looks it up, so no refusal echoes more than a field's bounded length.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette import requests, responses

from nodeplugin import artifacts, authorize, errors
from nodeplugin.cache import integrity
from nodeplugin.csi import node
from nodeplugin.materialize import interface
from openapi import grammar, jsondepth, names, sources, states, volume
from openapi import plugin as plugin_api

log = logging.getLogger(__name__)

PATH = plugin_api.PREFETCHES
MAX_BODY = 64 * 1024
DRAIN_BYTES = 1 << 20
"""How much of a body past ``MAX_BODY`` is read and dropped before the 413."""
MAX_TOKEN = 8192
"""The longest hub token a prefetch may carry (a hub's request headers are bounded too)."""
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_TOKEN = re.compile(rf"[\x21-\x7e]{{1,{MAX_TOKEN}}}")
PSEUDO_TARGET = "model-prefetch"
"""Below the kubelet directory, checked lexically only: a prefetch has no volume to mount, so
rule 1 (an inline ephemeral mount volume at a safe target) is met by construction."""

Handler = Callable[[requests.Request], Awaitable[responses.Response]]
_CODES: dict[type[errors.PluginError], tuple[int, str]] = {
    errors.InvalidArgument: (400, "BadRequest"),
    errors.PermissionDenied: (403, "Forbidden"),
    errors.Unavailable: (503, "ServiceUnavailable"),
}


Answer = plugin_api.PrefetchAnswer


def answer_of(progress: interface.Progress) -> Answer:
    body: Answer = {"digest": progress.digest, "state": progress.state.value,
                    "downloadedBytes": progress.received_bytes,
                    "sizeBytes": progress.total_bytes or 0}
    if progress.state is interface.State.FAILED:
        body["reason"] = progress.reason.value if progress.reason is not None else states.FAILED
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


def _checked(body: dict[str, Any]) -> dict[str, str]:
    """The request's fields, each within its grammar (``InvalidArgument`` naming the first that
    is not), so nothing unbounded reaches a lookup or a message."""
    found = {key: _field(body, key) for key in plugin_api.REQUEST_KEYS}
    problems = {
        "namespace": "; ".join(names.dns_label_problems(found["namespace"])),
        volume.ARTIFACT: "; ".join(names.dns_subdomain_problems(found[volume.ARTIFACT])),
        volume.ARTIFACT_UID: "" if _UID.fullmatch(found[volume.ARTIFACT_UID]) else (
            "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"),
        volume.MANIFEST_DIGEST: "" if grammar.is_digest(found[volume.MANIFEST_DIGEST]) else (
            grammar.DIGEST_RULE),
        "token": "" if not found["token"] or _TOKEN.fullmatch(found["token"]) else (
            f"must be at most {MAX_TOKEN} visible ASCII characters"),
    }
    for key, problem in problems.items():
        if problem:
            raise errors.InvalidArgument(f"{key} {problem}")
    return found


async def read_body(request: requests.Request, limit: int = MAX_BODY) -> bytes | None:
    """The body, or None once it is known to pass ``limit`` (from ``Content-Length``, else
    while streaming; nothing past the limit is kept). The rest of an oversized body is read and
    dropped up to ``DRAIN_BYTES``, so a client still sending reads the 413 instead of a reset;
    past that the connection closes under it."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (
            len(declared) > len(str(limit)) or int(declared) > limit):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit + DRAIN_BYTES:
            return None
        if size <= limit:
            chunks.append(chunk)
    return b"".join(chunks) if size <= limit else None


def handler(
    *,
    informer: artifacts.Informer,
    kubelet_dir: str,
    materializer: interface.Materializer,
    checks: integrity.Integrity | None = None,
) -> Handler:
    """The route's handler (the caller admits the worker before calling it)."""

    async def warm(body: dict[str, Any]) -> Answer:
        fields = _checked(body)
        namespace = fields["namespace"]
        volume_context = {
            volume.EPHEMERAL: "true",
            volume.POD_NAMESPACE: namespace,
            **volume.context(volume.attributes(fields[volume.ARTIFACT],
                                               fields[volume.ARTIFACT_UID],
                                               fields[volume.MANIFEST_DIGEST])),
        }
        token = fields["token"] or None
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
        raw = await read_body(request)
        if raw is None:
            return status(413, "RequestEntityTooLarge",
                          f"Request entity too large: limit is {MAX_BODY}")
        try:
            body = jsondepth.loads(raw)
        except jsondepth.JsonError as exc:
            return status(400, "BadRequest", exc.message)
        if not isinstance(body, dict):
            return status(400, "BadRequest", "the body is not a JSON object")
        try:
            return responses.JSONResponse(await warm(body))
        except errors.PluginError as exc:
            code, reason = _CODES.get(type(exc), (500, "InternalError"))
            return status(code, reason, exc.message)

    return serve
