"""The fixture hub's HTTP servers: the "hub" (Hugging Face and ModelScope APIs, resolve) and the
"CDN" that LFS downloads are redirected to, each a ``ThreadingHTTPServer`` speaking HTTP/1.1 with
keep-alive, optionally over TLS, on the address it is given (loopback for tests)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from http import server as http_server
from typing import Any
from urllib import parse

from devkit.fixturehub import handler, hfroutes, msroutes
from devkit.fixturehub import state as hubstate


class Server(http_server.ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True

    def __init__(
        self,
        role: str,
        shared: hubstate.State,
        host: str,
        tls: ssl.SSLContext | None,
        bind: tuple[str, int] = ("127.0.0.1", 0),
    ) -> None:
        """Listens on ``bind`` (port 0: any free port); ``host`` is the name in its URLs."""
        self.role = role
        self.shared = shared
        self.tls = tls
        self.public_host = host
        self.peer: Server | None = None  # the CDN, for the hub
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        if ":" in bind[0]:
            self.address_family = socket.AF_INET6
        super().__init__(bind, Handler)

    @property
    def endpoint(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.netloc}"

    @property
    def netloc(self) -> str:
        host = f"[{self.public_host}]" if ":" in self.public_host else self.public_host
        return f"{host}:{self.server_address[1]}"

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS is set up here, in the connection's own thread, so a slow handshake never
        # blocks the accept loop. Wrapping detaches the plain socket, so the TLS socket is
        # ours to close (socketserver only closes the detached one).
        with self.connections_lock:
            self.connections.add(request)
        wrapped: ssl.SSLSocket | None = None
        try:
            if self.tls is not None:
                try:
                    wrapped = self.tls.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError):
                    return
                with self.connections_lock:
                    self.connections.add(wrapped)
            super().finish_request(wrapped if wrapped is not None else request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)
                if wrapped is not None:
                    self.connections.discard(wrapped)
            if wrapped is not None:
                wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Resets, stalls and clients that hang up are the point of this server; stay quiet.
        return

    def close_connections(self) -> None:
        with self.connections_lock:
            live = list(self.connections)
        for connection in live:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class Handler(hfroutes.HuggingFaceRoutes, msroutes.ModelScopeRoutes):
    """Routes each request to the hub's or the CDN's handlers and keeps the counters."""

    # --- entry points -------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        shared = self.server.shared
        split = parse.urlsplit(self.path)
        with shared.lock:
            shared.requests[split.path] += 1
            shared.authorizations[self.server.netloc].append(self.headers.get("authorization"))
            shared.open_requests += 1
            shared.max_open_requests = max(shared.max_open_requests, shared.open_requests)
        try:
            segments = [parse.unquote(s) for s in split.path.split("/")[1:]]
            query = dict(parse.parse_qsl(split.query, keep_blank_values=True))
            if self.server.role == "cdn":
                self._cdn(segments)
            elif segments == ["openapi", "v1", "users", "me"]:
                self._users_me()
            elif (len(segments) == 4 and segments[1].endswith(".git")
                  and segments[2:] == ["info", "refs"]):
                self._git_refs(f"{segments[0]}/{segments[1].removesuffix('.git')}", query)
            elif segments[:3] == ["api", "v1", "models"]:
                self._modelscope(segments[3:], query)
            elif segments[:2] == ["api", "models"]:
                self._hf_api(segments[2:], query)
            elif len(segments) >= 5 and segments[2] == "resolve":
                self._hf_resolve(f"{segments[0]}/{segments[1]}", segments[3], segments[4:])
            else:
                self._json(404, {"error": "not found"})
        except handler.Abort:
            self.close_connection = True
        except (ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            with shared.lock:
                shared.open_requests -= 1
