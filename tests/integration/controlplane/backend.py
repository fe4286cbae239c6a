"""A loopback APIService backend for the aggregation tests: TLS with a certificate of its own
CA, the front-proxy client certificate required, canned answers per path, and every request
it receives recorded (path, every header line) so a test sees exactly what the aggregator
forwarded."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from http import server as http_server
from typing import Any
from urllib import parse

from devkit.controlplane import Authority, ControlPlane


@dataclasses.dataclass(frozen=True)
class Answer:
    code: int
    body: bytes = b""
    content_type: str = "application/json"


def json_answer(body: Any, code: int = 200, content_type: str = "application/json") -> Answer:
    return Answer(code, json.dumps(body).encode(), content_type)


Route = Callable[["Seen"], Answer]


@dataclasses.dataclass(frozen=True)
class Seen:
    """One request the backend received."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    def one(self, name: str) -> str:
        (value,) = self.all(name)
        return value

    def names(self) -> set[str]:
        return {key.lower() for key, _ in self.headers}


class Backend(http_server.ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]
    seen: list[Seen]

    def requests(self, path: str) -> list[Seen]:
        return [seen for seen in self.seen if seen.path == path]


class _Handler(http_server.BaseHTTPRequestHandler):
    server: Backend
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        path = parse.urlsplit(self.path).path
        seen = Seen("GET", path, tuple(self.headers.items()))
        self.server.seen.append(seen)
        route = self.server.routes.get(path)
        answer = route(seen) if route is not None else json_answer(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}, 404)
        self.send_response(answer.code)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)


@contextlib.contextmanager
def running(cp: ControlPlane, group: str, version: str,
            routes: dict[str, Route]) -> Iterator[Backend]:
    """A backend answering ``routes`` (path -> answer), registered as ``v1.<group>``."""
    serving = Authority(f"{group}-ca")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.serving().load_into(context)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=cp.front_proxy.ca.cert_pem.decode())
    backend = Backend(("127.0.0.1", 0), _Handler)
    backend.routes = routes
    backend.seen = []
    backend.socket = context.wrap_socket(backend.socket, server_side=True)
    thread = threading.Thread(target=backend.serve_forever, daemon=True)
    thread.start()
    cp.register_api_service(group, version, f"https://127.0.0.1:{backend.server_port}",
                            serving.cert_pem)  # fmt: skip
    try:
        yield backend
    finally:
        backend.shutdown()
        backend.server_close()
        thread.join(timeout=10)
