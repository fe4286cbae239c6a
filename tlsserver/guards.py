"""Two guards around hypercorn 0.17-0.18 for what clients do every day, as subclasses of the
classes this server instantiates itself (``tlsserver.listener`` runs hypercorn's
per-connection ``TCPServer``): nothing in hypercorn is patched, and another hypercorn user in the
same process (the tests' fixture servers) keeps hypercorn's own behaviour.

1. DATA for a stream already answered. hypercorn looks every DATA frame's stream up in its table
   of open streams without a guard; once a response has ended its stream, DATA the client still
   had in flight raises ``KeyError`` in the connection's task, which tears the whole HTTP/2
   connection down: every other request on it fails (``unexpected EOF`` in kubectl) and a
   traceback is logged. The same lookup for END_STREAM is guarded upstream; DATA is not
   (hypercorn issue #329; unmerged fixes #312, #334). ``ReadsBodyFirst`` in
   ``apiserver/wiring/app.py`` avoids the situation for bodies within its drain budget by reading
   them before answering; ``H2`` covers the rest (larger bodies, a client that keeps sending
   after the answer): such DATA is dropped and its flow-control credit returned, as hypercorn does
   for END_STREAM.
2. A client whose TLS ends badly. When a client resets the connection, sends data after its
   close_notify (``APPLICATION_DATA_AFTER_CLOSE_NOTIFY``) or a broken record, or never answers
   our close_notify, asyncio stores the ``ssl.SSLError`` (or ``TimeoutError``) and hypercorn's
   connection close re-raises it (hypercorn issues #261, #291, #264): logged as an unhandled
   error with a traceback, and at shutdown it even escapes ``serve``. ``Connection._close`` logs
   such a close at debug, without a traceback: it is an ordinary disconnect.

The seams are hypercorn's: ``TCPServer`` assigns its ``ProtocolWrapper`` to ``self.protocol``,
the wrapper assigns its ``H2Protocol`` to ``self.protocol`` before initiating it (on ALPN ``h2``
and on the two upgrades from HTTP/1.1), and the two overridden methods keep their signatures.
``tests/unit/tlsserver/test_guard_seams.py`` fails when a hypercorn release moves one.
"""

from __future__ import annotations

import logging
from typing import Any

import h2.events
import h2.exceptions
from hypercorn import events as hypercorn_events
from hypercorn.asyncio import tcp_server
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol import events as stream_events
from hypercorn.protocol import h2 as hypercorn_h2
from priority import priority as priorities

from tlsserver import hpackmemo

log = logging.getLogger(__name__)

PENDING_BYTES = 256 * 1024
"""Bytes a connection gathers in one loop turn before writing them at once (``Connection``)."""


class H2(hypercorn_h2.H2Protocol):
    """hypercorn's HTTP/2 protocol, dropping DATA for a stream that is no longer open, and
    sending a body the flow-control windows admit straight from the stream's own task.

    hypercorn queues every body in a per-stream buffer for its connection's sending task, which
    the stream then waits for (two task switches and four event flips per response, and two
    copies of every byte); a response of a few kilobytes (every GET, every Status) needs none of
    that, nor does a LIST that the client's windows admit whole (httpx and Go's clients open
    them to megabytes). A stream takes the direct path only while nothing of its body was
    queued, so the sending task never sees it and frame order within the stream is kept; what
    the windows do not admit goes through hypercorn's buffer as before, and so does the rest of
    that stream's body. The connection's HPACK decoder is ``hpackmemo.Decoder``.
    """

    async def initiate(self, headers: list[tuple[bytes, bytes]] | None = None,
                       settings: bytes | None = None) -> None:
        self.connection.decoder = hpackmemo.replacing(self.connection.decoder)
        await super().initiate(headers, settings)

    @property
    def _queued(self) -> set[int]:
        # streams whose body went through hypercorn's buffer (made on first use: the class of
        # an H2Protocol is swapped after its constructor ran)
        try:
            return self.__dict__["_tlsserver_queued"]  # type: ignore[no-any-return]
        except KeyError:
            queued: set[int] = set()
            self.__dict__["_tlsserver_queued"] = queued
            return queued

    async def stream_send(self, event: stream_events.Event) -> None:
        if isinstance(event, stream_events.Body) and self._unqueued(event.stream_id):
            await self._send_body(event.stream_id, event.data)
            return
        if isinstance(event, stream_events.EndBody) and self._unqueued(event.stream_id):
            del self.stream_buffers[event.stream_id]
            try:
                self.priority.remove_stream(event.stream_id)
                self.connection.end_stream(event.stream_id)
            except (priorities.MissingStreamError, h2.exceptions.ProtocolError):
                return
            await self._flush()
            return
        if isinstance(event, (stream_events.Body, stream_events.Data, stream_events.EndData,
                              stream_events.Trailers)):
            self._queued.add(event.stream_id)
        elif isinstance(event, stream_events.StreamClosed):
            self._queued.discard(event.stream_id)
        await super().stream_send(event)

    def _unqueued(self, stream_id: int) -> bool:
        return stream_id not in self._queued and stream_id in self.stream_buffers

    async def _send_body(self, stream_id: int, data: bytes) -> None:
        """As much of ``data`` as the flow-control windows allow, in frames from this task
        (written every ``PENDING_BYTES``, so the transport's back-pressure holds it); the rest,
        if the windows close, through hypercorn's buffer as before."""
        connection = self.connection
        sent = 0
        try:
            window = connection.local_flow_control_window(stream_id)
            frame = connection.max_outbound_frame_size
            if len(data) <= min(window, frame):  # every small answer: one frame, no slicing
                connection.send_data(stream_id, data)
                await self._flush()
                return
            view = memoryview(data)
            while sent < len(view) and window > 0:
                end = min(len(view), sent + window, sent + PENDING_BYTES)
                while sent < end:
                    size = min(frame, end - sent)
                    connection.send_data(stream_id, view[sent:sent + size])
                    sent += size
                await self._flush()
                window = connection.local_flow_control_window(stream_id)
                frame = connection.max_outbound_frame_size
        except h2.exceptions.ProtocolError:
            return  # the stream or connection closed meanwhile, as on hypercorn's own path
        if sent < len(data):
            self._queued.add(stream_id)
            await super().stream_send(stream_events.Body(stream_id=stream_id, data=data[sent:]))

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        # one event at a time: a stream can close while an earlier event of the same batch is
        # handled (the response is sent from the request's own task)
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length,
                                                          event.stream_id)
                await self._flush()
                continue
            await super()._handle_events([event])


class Protocols(ProtocolWrapper):
    """hypercorn's protocol choice, with ``H2`` wherever it would run its own HTTP/2 protocol."""

    @property
    def protocol(self) -> Any:
        return self._chosen

    @protocol.setter
    def protocol(self, chosen: Any) -> None:
        if type(chosen) is hypercorn_h2.H2Protocol:
            # not yet initiated: every assignment comes straight from the constructor
            chosen.__class__ = H2
        self._chosen = chosen


class Connection(tcp_server.TCPServer):
    """hypercorn's per-connection server with both guards, writing what the protocol sends in
    a turn of the event loop in at most two pieces.

    hypercorn writes every frame batch it produces at once: over TLS each write is its own TLS
    record and ``send`` system call, several per HTTP/2 response (HEADERS, DATA, END_STREAM, the
    window updates). Here the first bytes of a turn are written at once (a watch event or a lone
    answer waits for nothing) and the rest of that turn's are joined and written together after
    it, so the streams answered in the same turn share one record and one system call. Writing
    everything only after the turn was tried first: 1,000 HTTP/1.1 watchers then got each event
    in one burst at the turn's end instead of while the turn ran, and `bench watch-fanout`'s p99
    doubled. Order is kept (one buffer per connection, appended in the order hypercorn sends),
    back-pressure too (a sender still waits while the transport is over its high-water mark),
    and the buffer is written before the connection closes.
    """

    _pending: list[bytes] | None = None
    _pending_bytes = 0

    async def protocol_send(self, event: hypercorn_events.Event) -> None:
        if not isinstance(event, hypercorn_events.RawData):
            await super().protocol_send(event)
            return
        if self._pending is None:
            # the turn's first bytes go out at once (a watch event, a lone answer: no added
            # latency); what follows in the same turn is gathered behind them
            self._pending = []
            self.loop.call_soon(self._write_turn)
            if not self.writer.transport.is_closing():
                self.writer.write(event.data)
        else:
            self._pending.append(event.data)
            self._pending_bytes += len(event.data)
        if self._pending_bytes >= PENDING_BYTES:
            # a large body: hand it to the transport now, so its high-water mark holds the
            # sender back as hypercorn's own writes would
            self._write_now()
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            await self.protocol.handle(hypercorn_events.Closed())

    def _write_turn(self) -> None:
        """The turn's end (scheduled with its first write)."""
        self._write_now()
        self._pending = None

    def _write_now(self) -> None:
        pending = self._pending
        if pending:
            self._pending, self._pending_bytes = [], 0
            if not self.writer.transport.is_closing():
                self.writer.write(pending[0] if len(pending) == 1 else b"".join(pending))

    @property
    def protocol(self) -> Any:
        return self._wrapper

    @protocol.setter
    def protocol(self, wrapper: Any) -> None:
        if type(wrapper) is ProtocolWrapper:
            inner = vars(wrapper).pop("protocol")
            wrapper.__class__ = Protocols
            wrapper.protocol = inner
        self._wrapper = wrapper

    async def _close(self) -> None:
        self._write_now()
        try:
            await super()._close()
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.debug("client connection ended uncleanly: %s", exc)
