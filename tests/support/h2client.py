"""A small HTTP/2 client on the ``h2`` library, for tests that need control over the frames.

httpx cannot say when a response arrived relative to the request body it is still sending, and its
HTTP/2 uploads can stall when another stream reads the same connection (httpcore's
``_wait_for_outgoing_flow`` reads the network again after another reader took the WINDOW_UPDATE
it waited for). This client sends the body as fast as the flow-control window allows, keeps
reading while it does, records how much body had gone out when the response arrived, and keeps
sending after the response (as clients do; RFC 9113 allows it). ``terminated`` tells whether the
server ended the connection (GOAWAY or EOF).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time
from collections.abc import Sequence

import h2.config
import h2.connection
import h2.events
import h2.exceptions


@dataclasses.dataclass
class Exchange:
    stream_id: int
    status: int | None = None
    body: bytearray = dataclasses.field(default_factory=bytearray)
    sent: int = 0
    """Body bytes sent so far."""
    sent_at_response: int | None = None
    """Body bytes sent when the response headers arrived."""
    ended: bool = False
    reset: bool = False


class Connection:
    def __init__(self, host: str, port: int, ca_file: str | None, *,
                 timeout: float = 60.0) -> None:
        """Over TLS (HTTP/2 by ALPN) with ``ca_file``; without, cleartext with prior knowledge."""
        raw = socket.create_connection((host, port), timeout=timeout)
        self.sock: socket.socket = raw
        if ca_file is not None:
            context = ssl.create_default_context(cafile=ca_file)
            context.set_alpn_protocols(["h2"])
            tls = context.wrap_socket(raw, server_hostname=host)
            if tls.selected_alpn_protocol() != "h2":
                raise AssertionError("the server did not choose HTTP/2")
            self.sock = tls
        self.timeout = timeout
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.h2.initiate_connection()
        self.exchanges: dict[int, Exchange] = {}
        self.terminated = False
        self._flush()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Sequence[tuple[str, str]] = ()) -> Exchange:
        """Send a request, its body within the flow-control window while reading what comes,
        and wait (up to the timeout) for its response to end."""
        stream_id = self.h2.get_next_available_stream_id()
        exchange = self.exchanges[stream_id] = Exchange(stream_id)
        self.h2.send_headers(stream_id, [
            (":method", method), (":path", path), (":scheme", "https"),
            (":authority", "localhost"), *headers,
            *([("content-length", str(len(body)))] if body else ()),
        ], end_stream=not body)
        self._flush()
        view = memoryview(body)
        deadline = time.monotonic() + self.timeout
        while exchange.sent < len(view) and not self.terminated and not exchange.reset:
            window = min(self.h2.local_flow_control_window(stream_id), len(view) - exchange.sent)
            if window <= 0:
                self._read(deadline)
                continue
            while window > 0:  # the whole window in frames, then one write
                size = min(window, self.h2.max_outbound_frame_size)
                self.h2.send_data(stream_id, view[exchange.sent:exchange.sent + size].tobytes(),
                                  end_stream=exchange.sent + size == len(view))
                exchange.sent += size
                window -= size
            self._flush()
        while not exchange.ended and not self.terminated and not exchange.reset:
            self._read(deadline)
        return exchange

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def _read(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("no answer from the server in time")
        data = self.sock.recv(65536)
        if not data:
            self.terminated = True
            return
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.terminated = True
            return
        for event in events:
            found = self.exchanges.get(getattr(event, "stream_id", 0) or 0)
            if isinstance(event, h2.events.ResponseReceived) and found is not None:
                found.status = int(dict(event.headers)[b":status"])
                found.sent_at_response = found.sent
            elif isinstance(event, h2.events.DataReceived):
                if found is not None:
                    found.body.extend(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded) and found is not None:
                found.ended = True
            elif isinstance(event, h2.events.StreamReset) and found is not None:
                found.reset = True
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.terminated = True
        self._flush()
