"""A stdlib HTTP/1.1 server on loopback in a thread, for the blocking clients' unit tests
(``hub.blocking`` and the peers' ranges on it): keep-alive on, no log lines."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import TypeVar

S = TypeVar("S", bound=http.server.ThreadingHTTPServer)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in {**headers, "content-length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(server_class: type[S], handler: type[Handler]) -> Iterator[S]:
    """``server_class`` serving ``handler`` on 127.0.0.1 (any port) until the block ends."""
    server = server_class(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
