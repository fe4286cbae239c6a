"""Where each node's plugin answers, and reading its running downloads as the worker.

``GET /model/downloads`` on the plugin's HTTPS port, with a bearer token the plugin checks: in a
cluster the worker's projected token for the plugin port's own audience (``token_file``,
``openapi.plugin.AUDIENCE``, which the plugin's TokenReview asks for), never its API token, so a
plugin cannot replay it against kube-apiserver; standalone, the worker's token of the shared
token file (``token_of``). The
plugin's address comes from ``--node NAME=URL`` in standalone mode (``StaticPlugins``) or from the
plugin Pod on that node in a cluster (``PodPlugins``).
"""

from __future__ import annotations

import collections
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import kube
from controllers.runtime import informer
from controllers.sources import pluginhttp
from kube import auth as kube_auth
from openapi import plugin as plugin_api
from openapi import wire

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
TokenSource = Callable[[], Awaitable[str | None]]
"""The worker's bearer token as of now (None: ask without one); awaited per request, so a
rotated token is used as soon as its source has it."""


async def _no_token() -> str | None:
    return None


NO_TOKEN: TokenSource = _no_token
"""Plugins are asked without a credential (a standalone server without a static token file)."""


def token_of(client: kube.Client) -> TokenSource:
    """Standalone: the bearer token of a client acting as the worker (its kubeconfig's token or
    token file, re-read when it rotates), which the plugins check against their token file. None
    when the client authenticates otherwise (a client certificate). Never used in a cluster,
    where this is a credential for kube-apiserver (``token_file`` instead)."""

    async def read() -> str | None:
        try:
            return await client.bearer_token()
        except kube.CredentialError as exc:
            log.warning("cannot get the worker's token for the plugins: %s", exc.message)
            return None

    return read


def token_file(path: str) -> TokenSource:
    """In a cluster: the worker's token for ``openapi.plugin.AUDIENCE``, projected into ``path``
    (``--plugin-token-file``) and rewritten by kubelet before it expires, read again whenever the
    file changes. None while it cannot be read (the plugins then answer 401): never a fallback
    to the API token."""
    source = kube_auth.TokenFileAuth(path)
    failed: list[str] = []

    async def read() -> str | None:
        try:
            token = source.token()
        except kube.CredentialError as exc:
            if failed != [exc.message]:  # once per distinct failure, not per plugin call
                log.warning("no token for the plugins' audience %s: %s", plugin_api.AUDIENCE,
                            exc.message)
                failed[:] = [exc.message]
            return None
        failed.clear()
        return token

    return read


class Locator(Protocol):
    def url(self, node: str) -> str | None:
        """``https://host:port`` of the node's plugin, None when unknown."""
        ...


class StaticPlugins:
    def __init__(self, urls: Mapping[str, str]) -> None:
        self._urls = {node: url.rstrip("/") for node, url in urls.items() if url}

    def url(self, node: str) -> str | None:
        return self._urls.get(node)


class PodPlugins:
    """The plugin Pods (an informer on the plugin namespace and label selector): a running,
    ready Pod on the node gives ``https://<podIP>:<port>``."""

    def __init__(self, pods: informer.Informer, port: int) -> None:
        self._pods = pods
        self._port = port
        pods.add_index(NODE_INDEX, node_of)

    def url(self, node: str) -> str | None:
        for pod in self._pods.by_index(NODE_INDEX, node):
            if _serving(pod):
                address = str((pod.get("status") or {}).get("podIP"))
                host = f"[{address}]" if ":" in address else address
                return f"https://{host}:{self._port}"
        return None


NODE_INDEX = "node"


def node_of(pod: wire.Obj) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def _serving(pod: wire.Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or not status.get("podIP"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


def ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """Plugins present self-signed certificates unless the chart gives them one: verify with
    ``ca_file`` when given, otherwise encrypt without verifying (documented in controllers.md)."""
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class HttpDownloads:
    """``progress.LiveReader`` over HTTPS (``pluginhttp``: kept-alive connections per plugin,
    at most ``MAX_POOLS`` plugins remembered)."""

    MAX_POOLS = 1024

    def __init__(self, locator: Locator, token: TokenSource, *,
                 ca_file: str | None = None) -> None:
        self._locator = locator
        self._token = token
        self._tls = ssl_context(ca_file)
        self._pools: collections.OrderedDict[str, pluginhttp.Pool] = collections.OrderedDict()

    def knows(self, node: str) -> bool:
        return self._locator.url(node) is not None

    def _pool(self, base: str) -> pluginhttp.Pool:
        found = self._pools.get(base)
        if found is not None:
            self._pools.move_to_end(base)
            return found
        found = self._pools[base] = pluginhttp.Pool(base, self._tls)
        while len(self._pools) > self.MAX_POOLS:
            self._pools.popitem(last=False)[1].close()
        return found

    async def downloads(self, node: str) -> dict[str, int]:
        base = self._locator.url(node)
        if base is None:
            raise LookupError(f"no plugin known for node {node}")
        headers = [("accept", "application/json")]
        token = await self._token()
        if token:
            headers.append(("authorization", f"Bearer {token}"))
        body = await self._pool(base).get(plugin_api.DOWNLOADS, headers, MAX_BODY)
        return parse_downloads(body)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()


def parse_downloads(body: bytes) -> dict[str, int]:
    """Bytes held per digest in a plugin's ``/model/downloads`` answer (``openapi.plugin``)."""
    return plugin_api.downloaded_bytes(json.loads(body))
