"""The fixture's aggregated OpenAPI v3, against a loopback backend: ``/openapi/v3`` lists each
APIService's group-version with the ``serverRelativeURL`` (and hash) the backend's own index
gives, a backend that does not answer is left out, and the document is fetched from the backend
with the front-proxy certificate as ``system:aggregator``, whoever asked (aggregator.md, 5)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http import server as http_server
from typing import Any

import httpx
import pytest

from devkit.controlplane import ADMIN_TOKEN, Authority, ControlPlane, UserInfo
from devkit.harness.apiserver import free_port

GROUP, VERSION = "example.gpustack.ai", "v1"
HASHED = f"/openapi/v3/apis/{GROUP}/{VERSION}?hash=0123ABCD"
DOCUMENT = {"openapi": "3.0.0", "info": {"title": "example", "version": "v1"}, "paths": {}}


class Backend(http_server.ThreadingHTTPServer):
    seen: list[tuple[str, str, str]]
    """(path, X-Remote-User, the client certificate's common name) of each request."""


class _Handler(http_server.BaseHTTPRequestHandler):
    server: Backend

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        peer: Any = self.connection.getpeercert() if isinstance(
            self.connection, ssl.SSLSocket) else None
        subject = {name: value for rdn in (peer or {}).get("subject", ()) for name, value in rdn}
        self.server.seen.append((self.path, self.headers.get("X-Remote-User", ""),
                                 str(subject.get("commonName", ""))))  # fmt: skip
        if self.path == "/openapi/v3":
            body: Any = {"paths": {f"apis/{GROUP}/{VERSION}": {"serverRelativeURL": HASHED}}}
        elif self.path == HASHED:
            body = DOCUMENT
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def plane(control_plane: ControlPlane) -> Iterator[tuple[ControlPlane, Backend]]:
    serving = Authority("backend-ca")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.serving().load_into(context)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=control_plane.front_proxy.ca.cert_pem.decode())
    backend = Backend(("127.0.0.1", 0), _Handler)
    backend.seen = []
    backend.socket = context.wrap_socket(backend.socket, server_side=True)
    thread = threading.Thread(target=backend.serve_forever, daemon=True)
    thread.start()
    control_plane.register_api_service(GROUP, VERSION, f"https://127.0.0.1:{backend.server_port}",
                                       serving.cert_pem)
    try:
        yield control_plane, backend
    finally:
        backend.shutdown()
        backend.server_close()
        thread.join(timeout=10)


def _client(cp: ControlPlane, token: str) -> httpx.Client:
    return httpx.Client(base_url=cp.url, verify=cp.trust(), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def test_the_index_lists_the_backends_path_and_the_document_is_the_backends(
    plane: tuple[ControlPlane, Backend],
) -> None:
    cp, backend = plane
    cp.add_token("t-alice", UserInfo("alice", uid="alice-uid"))  # system:discovery only
    with _client(cp, "t-alice") as client:
        index = client.get("/openapi/v3")
        assert index.status_code == 200, index.text
        assert index.json() == {"paths": {f"apis/{GROUP}/{VERSION}": {
            "serverRelativeURL": HASHED}}}  # fmt: skip
        document = client.get(index.json()["paths"][f"apis/{GROUP}/{VERSION}"]
                              ["serverRelativeURL"])  # fmt: skip
        assert document.status_code == 200, document.text
        assert document.json() == DOCUMENT
    assert backend.seen == [("/openapi/v3", "system:aggregator", "front-proxy-client"),
                            (HASHED, "system:aggregator", "front-proxy-client")]  # fmt: skip


def test_a_backend_that_does_not_answer_is_left_out_of_the_index(
    control_plane: ControlPlane,
) -> None:
    control_plane.register_api_service(GROUP, VERSION, f"https://127.0.0.1:{free_port()}",
                                       Authority("nobody").cert_pem)
    with _client(control_plane, ADMIN_TOKEN) as client:
        index = client.get("/openapi/v3")
        assert index.status_code == 200, index.text
        assert index.json() == {"paths": {}}
        document = client.get(HASHED)
    assert document.status_code == 503
    assert document.json()["reason"] == "ServiceUnavailable"
