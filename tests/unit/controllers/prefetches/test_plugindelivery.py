"""Standalone delivery: one POST per node plugin as the worker, the artifact's token from its
Secret; a failed or refused warm-up is the node's failure, an unreachable plugin is none."""

from __future__ import annotations

import asyncio
import json
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest

from certs import authority
from controllers.prefetches import plan as prefetchplan
from controllers.prefetches import plugindelivery
from controllers.sources import plugins, secrets
from devkit import clock as manual

DIGEST = "sha256:" + "ab" * 32
PREFETCH: dict[str, Any] = {
    "metadata": {"name": "warm", "namespace": "team-a", "uid": "p-uid"},
    "spec": {"artifactRef": {"name": "qwen"}, "targets": {"nodeNames": ["node-1"]}},
}


class Plugin:
    """A TLS server answering each POST with the next canned (status, body)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, Any]]] = []
        self.received: list[tuple[bytes, dict[str, Any]]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            self.received.append((head, json.loads(await reader.readexactly(length))))
            code, body = self.answers.pop(0)
            raw = json.dumps(body).encode()
            writer.write(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\n\r\n" % (code, len(raw)) + raw)
            await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def plugin(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Plugin, str, str]]:
    files = authority.ensure(tmp_path / "tls")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(files.cert, files.key)
    state = Plugin()
    listening = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=server_context)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield state, f"https://127.0.0.1:{port}", str(files.ca_cert)
    finally:
        listening.close()


async def _worker_token() -> str | None:
    return "worker-token"


def test_each_answer_is_a_verdict_or_none() -> None:
    assert plugindelivery.verdict(200, b'{"state": "Downloading"}') == ""
    assert plugindelivery.verdict(200, b'{"state": "Published"}') == ""
    failed = plugindelivery.verdict(200, b'{"state": "Failed", "message": "hub said no"}')
    assert failed == "node plugin: hub said no"
    refused = plugindelivery.verdict(403, b'{"message": "is not Resolved=True"}')
    assert refused == "node plugin refused the prefetch (HTTP 403): is not Resolved=True"
    assert plugindelivery.verdict(503, b'{"message": "retry shortly"}') is None
    assert plugindelivery.verdict(200, b"not json") is None


async def test_the_same_request_to_each_plugin(
    plugin: tuple[Plugin, str, str], tmp_path: pathlib.Path,
) -> None:
    state, base, ca_file = plugin
    (tmp_path / "secrets" / "team-a" / "hf").mkdir(parents=True)
    (tmp_path / "secrets" / "team-a" / "hf" / "token").write_text("hf_secret\n")
    source = secrets.DirSecrets(tmp_path / "secrets", manual.ManualClock())
    locator = plugins.StaticPlugins({"node-1": base, "node-2": base,
                                     "node-3": "https://127.0.0.1:9"})
    delivery = plugindelivery.PluginDelivery(locator, _worker_token, source, ca_file=ca_file)
    artifact = prefetchplan.Artifact(DIGEST, uid="a-uid", secret="hf")
    state.answers = [(200, {"state": "Downloading"}), (403, {"message": "no ModelArtifact"})]
    failures = await delivery.warm(PREFETCH, artifact, ["node-1", "node-2", "node-3", "node-4"])
    assert list(failures) == [next(n for n in ("node-1", "node-2") if n in failures)]
    (held,) = failures.values()
    assert held.reason == "DeliveryFailed" and held.phase == "Failed"
    assert "HTTP 403" in held.message
    assert len(state.received) == 2
    head, body = state.received[0]
    assert head.startswith(b"POST /model/prefetches HTTP/1.1")
    assert b"authorization: Bearer worker-token" in head
    assert body == {"namespace": "team-a", "artifact": "qwen", "artifactUID": "a-uid",
                    "manifestDigest": DIGEST, "token": "hf_secret"}
    # a Secret that does not exist fails every node, naming it
    missing = prefetchplan.Artifact(DIGEST, uid="a-uid", secret="gone")
    failures = await delivery.warm(PREFETCH, missing, ["node-1"])
    assert "Secret team-a/gone not found" in failures["node-1"].message
