"""The HTTPS listener: a ``ThreadingHTTPServer`` on loopback, TLS set up in each connection's
own thread (so the peer certificate is at hand), every live connection tracked so a stop or an
outage can cut them."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from http import server as http_server
from typing import TYPE_CHECKING, Any

from devkit.controlplane.handler import Handler

if TYPE_CHECKING:
    from devkit.controlplane.plane import ControlPlane


class Server(http_server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, plane: ControlPlane, port: int, tls: ssl.SSLContext) -> None:
        self.plane = plane
        self.tls = tls
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name=f"controlplane:{self.server_address[1]}",
        )  # fmt: skip

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        wrapped: ssl.SSLSocket | None = None
        try:
            try:
                request.settimeout(30)
                wrapped = self.tls.wrap_socket(request, server_side=True)
                wrapped.settimeout(None)
            except (ssl.SSLError, OSError):
                return
            with self.connections_lock:
                self.connections.add(wrapped)
            super().finish_request(wrapped, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)
                if wrapped is not None:
                    self.connections.discard(wrapped)
            if wrapped is not None:
                with contextlib.suppress(OSError):
                    wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return

    def close_connections(self) -> None:
        with self.connections_lock:
            live = list(self.connections)
        for connection in live:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.close_connections()
        self.thread.join(timeout=30)
