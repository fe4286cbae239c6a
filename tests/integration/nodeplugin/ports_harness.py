"""The plugin's two HTTP ports served for real, in this process: hypercorn over TLS on loopback
(``serve.serve``), the peer port's tokens reviewed by the fixture control plane, a published
tree to ask for, and the files the process holds open under the cache (``open_files``).

Used by the hostile-input tests of the ports (``test_ports_bad_input.py``) and the slow readers
of the peer port (``test_peer_slow_readers.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pathlib
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
from prometheus_client import registry

import kube
from devkit.clock import ManualClock
from devkit.controlplane import ControlPlane, Rule, service_account
from nodeplugin import reviews, serve
from nodeplugin.cache import layout
from nodeplugin.peer import admission, server, wire
from tests.integration.nodeplugin import store_harness

PLUGIN_USER = "system:serviceaccount:gpustack-system:model-manager-node"
NODE_A_TOKEN = "peer-token-of-the-plugin-pod-on-node-a"
NODE_B_TOKEN = "peer-token-of-the-plugin-pod-on-node-b"
TENANT_TOKEN = "tenant-token-for-the-peer-audience"
READER_TOKEN = "the-serving-plugins-own-api-token"
WORKER_TOKEN = "worker-token-for-the-https-port"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_files(root: pathlib.Path) -> int:
    """Descriptors of this process open on files under ``root`` (the served trees)."""
    found = 0
    prefix = str(root.resolve()) + "/"
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        found += target.startswith(prefix)
    return found


def add_peer_tokens(plane: ControlPlane) -> None:
    """Two plugin Pods' peer tokens (bound to their Pods, as projected tokens are), a tenant's
    token for the peer audience, and the serving plugin's own API token (for its reviews)."""
    for token, pod in ((NODE_A_TOKEN, ("model-manager-node-aaaaa", "pod-uid-a")),
                       (NODE_B_TOKEN, ("model-manager-node-bbbbb", "pod-uid-b"))):
        plane.add_token(token, service_account("gpustack-system", "model-manager-node",
                                               uid="plugin-uid", pod=pod),
                        audiences=[wire.AUDIENCE])
    plane.add_token(TENANT_TOKEN, service_account("team-a", "default", uid="t-uid"),
                    audiences=[wire.AUDIENCE])
    plane.add_token(READER_TOKEN, service_account("gpustack-system", "model-manager-node",
                                                  uid="plugin-uid"))
    plane.policy.grant(PLUGIN_USER,
                       Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)))


@dataclasses.dataclass
class PeerPort:
    url: str
    cache: layout.Layout
    digest: str
    app: Any
    context: ssl.SSLContext

    def file_url(self, path: str) -> str:
        return self.url + wire.file_path(layout.hex_of(self.digest), path)

    def client(self, token: str = NODE_B_TOKEN) -> httpx.AsyncClient:
        return httpx.AsyncClient(verify=self.context, timeout=60.0,
                                 headers={"authorization": f"Bearer {token}"})


def unverified() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.asynccontextmanager
async def served(app: Any, tmp: pathlib.Path) -> AsyncIterator[str]:
    """``app`` on hypercorn over TLS on a free loopback port, until the block ends."""
    cert, key = serve.tls_files(tmp / "tls", None, None, ["127.0.0.1"])
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(serve.serve(
        app, serve.hypercorn_config_for("127.0.0.1", port, cert, key), stop))
    url = f"https://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(verify=unverified()) as probe, asyncio.timeout(30):
            while True:
                try:
                    await probe.get(url + "/")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
        yield url
    finally:
        stop.set()
        await task


@contextlib.asynccontextmanager
async def peer_port(plane: ControlPlane, tmp: pathlib.Path, files: Mapping[str, bytes],
                    **options: Any) -> AsyncIterator[PeerPort]:
    """The peer port's app (``server.make_app`` with ``options``) serving one published tree."""
    add_peer_tokens(plane)
    cache = layout.Layout(tmp / "cache")
    digest = store_harness.publish_tree(cache, "tree", files)
    kubeconfig = plane.write_kubeconfig(tmp / "plugin.kubeconfig", token=READER_TOKEN)
    async with kube.Client.from_kubeconfig(kubeconfig) as api:
        reviewer = reviews.TokenReviewer(api, clock=ManualClock(), audiences=[wire.AUDIENCE])
        app = server.make_app(cache, admission.Admission(reviewer, PLUGIN_USER), **options)
        async with served(app, tmp) as url:
            yield PeerPort(url, cache, digest, app, unverified())


async def raw_request(url: str, data: bytes) -> bytes:
    """``data`` sent as it is over TLS to ``url``'s port; what came back until the server closed
    the connection or stopped sending for a second."""
    host, _, port = url.removeprefix("https://").rstrip("/").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port), ssl=unverified())
    try:
        writer.write(data)
        await writer.drain()
        answer = b""
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), 1.0)
            except (TimeoutError, ConnectionError, ssl.SSLError):
                break
            if not chunk:
                break
            answer += chunk
        return answer
    finally:
        writer.transport.abort()


def https_app(tmp: pathlib.Path, prefetch: Any) -> Any:
    """The plugin's HTTPS port (``serve.make_app``) with the worker's token file."""
    token_file = tmp / "worker-token"
    token_file.write_text(WORKER_TOKEN)
    return serve.make_app(metrics=registry.CollectorRegistry(), ready=lambda: None,
                          running=list, token_file=str(token_file), prefetch=prefetch)
