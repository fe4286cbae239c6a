"""devkit/harness/aggregator.py against the recorded aggregator requests: the same identity header
lines, and on the wire the front-proxy certificate over HTTP/1.1 and HTTP/2."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import ssl
import threading
from collections.abc import Iterator
from http import server as http_server
from typing import Any

import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config

from devkit.controlplane import FrontProxy
from devkit.controlplane.identity import UserInfo
from devkit.controlplane.pki import Authority
from devkit.harness import aggregator
from tests.integration.controlplane import samples

RECORDED = samples.load("aggregator-requests.json")


def _identity_lines(recorded: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in aggregator.headers_of(recorded) if k.startswith("X-Remote-")]


@pytest.mark.parametrize(
    ("index", "user"),
    [
        (0, aggregator.ADMIN),
        (1, aggregator.ALICE),
        (2, aggregator.PLUGIN_A),
        (3, aggregator.PLUGIN_A),
        (4, aggregator.AVAILABILITY),
        (5, aggregator.OPENAPI),
        (6, aggregator.AGGREGATED_DISCOVERY),
        (7, aggregator.LEGACY_DISCOVERY),
    ],
)
def test_identity_headers_are_the_recorded_lines(index: int, user: UserInfo) -> None:
    assert aggregator.identity_headers(user) == _identity_lines(RECORDED[index])


def test_extra_keys_escape_and_decode_like_kube() -> None:
    assert aggregator.escape_extra_key("authentication.kubernetes.io/pod-name") == (
        "authentication.kubernetes.io%2Fpod-name"
    )
    assert aggregator.escape_extra_key("100%sure key") == "100%25sure%20key"
    lower = "x-remote-extra-authentication.kubernetes.io%2Fpod-name"
    assert aggregator.canonical_header(lower) == (
        "X-Remote-Extra-Authentication.kubernetes.io%2fpod-Name"
    )
    extras = samples.load("selfsubjectreview-sa.json")["status"]["userInfo"]["extra"]
    decoded = {
        aggregator.decode_extra_header(name): [value]
        for name, value in _identity_lines(RECORDED[2])
        if name.startswith("X-Remote-Extra-")
    }
    assert decoded == extras
    assert aggregator.decode_extra_header("X-Remote-User") is None


class _Recorder(http_server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        assert isinstance(self.connection, ssl.SSLSocket)
        peer = self.connection.getpeercert()
        self.seen.append({"headers": list(self.headers.items()), "peer": peer})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _TLSServer(http_server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        super().__init__(("127.0.0.1", 0), _Recorder)

    def get_request(self) -> tuple[socket.socket, Any]:
        raw, address = super().get_request()
        return self.context.wrap_socket(raw, server_side=True), address


@pytest.fixture
def front_proxy() -> FrontProxy:
    return FrontProxy()


@pytest.fixture
def serving_ca() -> Authority:
    return Authority("aggregated-server-ca")


@pytest.fixture
def http11_server(front_proxy: FrontProxy, serving_ca: Authority) -> Iterator[_TLSServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving_ca.serving().load_into(context)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=front_proxy.ca_bundle.decode())
    server = _TLSServer(context)
    _Recorder.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_http11_carries_the_certificate_and_the_recorded_header_lines(
    http11_server: _TLSServer, front_proxy: FrontProxy, serving_ca: Authority
) -> None:
    url = f"https://127.0.0.1:{http11_server.server_address[1]}"
    async with aggregator.AggregatorClient(
        url, serving_ca.cert_pem, front_proxy.client, http2=False
    ) as client:
        path = "/apis/worker.gpustack.ai/v1/nodemodelstores"
        response = await client.get(path, aggregator.PLUGIN_A, proxied=True)
        assert response.status_code == 200
    seen = _Recorder.seen[0]
    recorded = RECORDED[2]
    assert [(k, v) for k, v in seen["headers"] if k.startswith("X-Remote-")] == (
        _identity_lines(recorded)
    )
    forwarded = {k: v for k, v in seen["headers"] if k.startswith("X-Forwarded-")}
    assert forwarded["X-Forwarded-Uri"] == path
    assert sorted(forwarded) == sorted(
        k for k, _ in aggregator.headers_of(recorded) if k.startswith("X-Forwarded-")
    )
    subject = [list(map(list, rdn)) for rdn in seen["peer"]["subject"]]
    issuer = [list(map(list, rdn)) for rdn in seen["peer"]["issuer"]]
    assert subject == recorded["peer_subject"] and issuer == recorded["peer_issuer"]


async def test_without_a_certificate_the_handshake_fails(
    http11_server: _TLSServer, serving_ca: Authority
) -> None:
    url = f"https://127.0.0.1:{http11_server.server_address[1]}"
    import httpx

    async with aggregator.AggregatorClient(url, serving_ca.cert_pem, None, http2=False) as client:
        # TLS 1.3: the server's "certificate required" alert may arrive after the handshake.
        with pytest.raises((httpx.TransportError, ssl.SSLError)):
            await client.get("/apis", aggregator.ADMIN)
    assert _Recorder.seen == []


async def test_http2_sends_lowercase_names_over_the_certificate(
    tmp_path: pathlib.Path, front_proxy: FrontProxy, serving_ca: Authority
) -> None:
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append({
            "version": scope["http_version"],
            "headers": [(k.decode(), v.decode()) for k, v in scope["headers"]],
        })  # fmt: skip
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    cert, key = serving_ca.serving().write(tmp_path, "serving")
    ca = tmp_path / "front-proxy-ca.crt"
    ca.write_bytes(front_proxy.ca_bundle)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # connections queue from here on: no readiness race
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # hypercorn owns and closes it
    config.certfile, config.keyfile, config.ca_certs = str(cert), str(key), str(ca)
    config.verify_mode = ssl.CERT_REQUIRED
    config.accesslog = None
    config.errorlog = None
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    try:
        async with aggregator.AggregatorClient(
            f"https://127.0.0.1:{port}", serving_ca.cert_pem, front_proxy.client, http2=True
        ) as client:
            response = await client.get(
                "/apis", aggregator.AGGREGATED_DISCOVERY, accept=aggregator.DISCOVERY_V2_ACCEPT
            )
            assert response.status_code == 200 and response.http_version == "HTTP/2"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    headers = seen[0]["headers"]
    assert seen[0]["version"] == "2"
    assert ("x-remote-user", "system:kube-aggregator") in headers
    assert ("x-remote-group", "system:masters") in headers
    assert ("accept", aggregator.DISCOVERY_V2_ACCEPT) in headers
