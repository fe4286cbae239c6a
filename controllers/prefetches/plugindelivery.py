"""Delivery in standalone mode: the same request to each ``--node`` plugin
(``prefetches.Delivery``).

``POST /model/prefetches`` on the node's plugin HTTPS port (``nodeplugin/prefetchapi.py``), as
the worker (its bearer token, the one ``/model/downloads`` is read with) and over the trust the
live progress uses (``--plugin-ca-file``, ``plugins.ssl_context``). The request names the
artifact as a consumer's volume does (namespace, name, UID, manifest digest) and carries the
token of the artifact's Secret (``--secrets-dir``) as kubelet hands a mount its
``nodePublishSecretRef``; the plugin judges it with its mount authorization and materializes the
digest through its ordinary path (download, verify, publish once).

What becomes of each answer: ``Published`` or ``Downloading`` is no failure (the node's
NodeModelStore report moves the prefetch on); ``Failed`` (the hub refused, a backoff, no room)
and a refusal (400, 403: the node judges the artifact otherwise) are the node's
``Failed/DeliveryFailed`` with the plugin's message; a plugin that cannot be reached, times out
or is not ready (503) is no verdict: the node stays as it is and the next pass asks again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence

from controllers.prefetches import plan as prefetchplan
from controllers.sources import pluginhttp, plugins, secrets
from openapi import plugin as plugin_api
from openapi import states, wire

log = logging.getLogger(__name__)

PATH = plugin_api.PREFETCHES
TIMEOUT_SECONDS = 10.0
MAX_ANSWER = 64 * 1024


def _message(body: bytes) -> str:
    try:
        found = json.loads(body)
    except ValueError:
        return ""
    return plugin_api.answer_message(found)[:1024]


def verdict(code: int, body: bytes) -> str | None:
    """Why the node failed, "" when it did not, None when the answer is no verdict."""
    if code == 200:
        try:
            found = json.loads(body)
        except ValueError:
            return None
        if not isinstance(found, dict):
            return None
        if plugin_api.answer_state(found) == states.FAILED:
            why = plugin_api.answer_message(found) or "materializing failed"
            return f"node plugin: {why[:1024]}"
        return ""
    if code in (400, 401, 403, 404, 413):
        return f"node plugin refused the prefetch (HTTP {code}): {_message(body)}"
    return None


class PluginDelivery:
    def __init__(self, locator: plugins.Locator, token: plugins.TokenSource,
                 secret_source: secrets.Secrets, *, ca_file: str | None = None,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        self._locator = locator
        self._token = token
        self._secrets = secret_source
        self._tls = plugins.ssl_context(ca_file)
        self._timeout = timeout

    async def warm(self, prefetch: wire.Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        namespace = prefetchplan.namespace(prefetch)
        request = plugin_api.prefetch_request(namespace, prefetchplan.artifact_name(prefetch),
                                          artifact.uid, artifact.digest)
        if artifact.secret:
            try:
                request["token"] = await self._secrets.token(namespace, artifact.secret)
            except secrets.SecretMissing as exc:
                return {node: prefetchplan.failed(f"the artifact's token: {exc}")
                        for node in nodes}
            except secrets.SecretUnreadable as exc:
                log.warning("prefetch %s/%s: %s; asked again on the next pass", namespace,
                            prefetch["metadata"]["name"], exc)
                return {}
        body = json.dumps(request).encode()
        answers = await asyncio.gather(*(self._ask(node, body) for node in nodes))
        return {node: prefetchplan.failed(why)
                for node, why in zip(nodes, answers, strict=True) if why}

    async def _ask(self, node: str, body: bytes) -> str:
        base = self._locator.url(node)
        if base is None:
            return ""  # a node without a --node URL warms when something mounts there
        headers = [("content-type", "application/json"), ("accept", "application/json")]
        token = await self._token()
        if token:
            headers.append(("authorization", f"Bearer {token}"))
        pool = pluginhttp.Pool(base, self._tls)
        try:
            async with asyncio.timeout(self._timeout):
                code, answer = await pool.request("POST", PATH, headers, MAX_ANSWER, body)
        except (OSError, TimeoutError, pluginhttp.PluginHttpError) as exc:
            log.info("prefetch delivery to %s: the plugin did not answer (%s); asked again on "
                     "the next pass", node, type(exc).__name__)
            return ""
        finally:
            pool.close()
        why = verdict(code, answer)
        if why is None:
            log.info("prefetch delivery to %s: HTTP %d (%s); asked again on the next pass",
                     node, code, _message(answer))
            return ""
        return why
