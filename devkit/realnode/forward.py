"""Plain TCP forwarding from an address the Pods can reach to a loopback server.

The fixture hub listens on 127.0.0.1, which inside a Pod is the Pod's own loopback; the rig's
host-side veth address (10.250.0.1) is reachable from every Pod network namespace, so each hub
port is forwarded from there unchanged (the hub's redirects name the same host and port)."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class Forwarder:
    """Accepts on ``(host, port)`` and copies bytes both ways to ``127.0.0.1:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.port = port
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name=f"forward-{port}", daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._pipe, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _pipe(self, client: socket.socket) -> None:
        with contextlib.ExitStack() as stack:
            stack.enter_context(client)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            except OSError:
                return
            stack.enter_context(upstream)
            upstream.settimeout(None)
            client.settimeout(None)
            peers = {client: upstream, upstream: client}
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    selector.register(sock, selectors.EVENT_READ)
                while not self._stop.is_set():
                    for key, _ in selector.select(timeout=0.5):
                        source: socket.socket = key.fileobj  # type: ignore[assignment]
                        try:
                            data = source.recv(1 << 16)
                        except OSError:
                            return
                        if not data:
                            return
                        try:
                            peers[source].sendall(data)
                        except OSError:
                            return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._accept.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)
