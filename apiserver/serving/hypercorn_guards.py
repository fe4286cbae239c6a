"""Two guards around hypercorn 0.18 (its latest release) for what clients do every day.

1. DATA for a stream already answered. hypercorn looks every DATA frame's stream up in its table
   of open streams without a guard; once a response has ended its stream, DATA the client still
   had in flight raises ``KeyError`` in the connection's task, which tears the whole HTTP/2
   connection down: every other request on it fails (``unexpected EOF`` in kubectl) and a
   traceback is logged. The same lookup for END_STREAM is guarded upstream; DATA is not
   (hypercorn issue #329; unmerged fixes #312, #334). ``ReadsBodyFirst`` in
   ``apiserver/wiring/app.py`` avoids the situation for bodies within its drain budget by reading
   them before answering; this guard covers the rest (larger bodies, a client that keeps sending
   after the answer): such DATA is dropped and its flow-control credit returned, as hypercorn does
   for END_STREAM.
2. A client whose TLS ends badly. When a client resets the connection, sends data after its
   close_notify (``APPLICATION_DATA_AFTER_CLOSE_NOTIFY``) or a broken record, or never answers
   our close_notify, asyncio stores the ``ssl.SSLError`` (or ``TimeoutError``) and hypercorn's
   connection close re-raises it (hypercorn issues #261, #291, #264): logged as an unhandled
   error with a traceback, and at shutdown it even escapes ``serve``. Such a close is an ordinary
   disconnect: logged at debug, without a traceback.

``install`` patches each only when this hypercorn still has the flaw, and only once.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import h2.events
from hypercorn.asyncio import tcp_server
from hypercorn.protocol import h2 as hypercorn_h2

log = logging.getLogger(__name__)

_MARK = "_model_manager_guarded"

HandleEvents = Callable[[Any, list[h2.events.Event]], Awaitable[None]]
Close = Callable[[Any], Awaitable[None]]


def install() -> None:
    protocol = hypercorn_h2.H2Protocol
    if not getattr(protocol, _MARK, False) and data_lookup_unguarded():
        setattr(protocol, "_handle_events", guard_data(protocol._handle_events))  # noqa: B010
        setattr(protocol, _MARK, True)
    server = tcp_server.TCPServer
    if not getattr(server, _MARK, False):
        setattr(server, "_close", guard_close(server._close))  # noqa: B010
        setattr(server, _MARK, True)


def data_lookup_unguarded() -> bool:
    """Whether this hypercorn indexes its streams for DATA without a guard."""
    source = inspect.getsource(hypercorn_h2.H2Protocol._handle_events)
    data = source.split("h2.events.DataReceived", 1)[-1].split("elif", 1)[0]
    return "self.streams[event.stream_id]" in data


def guard_data(original: HandleEvents) -> HandleEvents:
    """``original`` applied one event at a time, DATA for a stream no longer open dropped.

    One at a time because a stream can close while an earlier event of the same batch is
    handled (the response is sent from the request's own task)."""

    async def handle_events(self: Any, events: list[h2.events.Event]) -> None:
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length,
                                                          event.stream_id)
                await self._flush()
                continue
            await original(self, [event])

    return handle_events


def guard_close(original: Close) -> Close:
    """``original``, with a TLS or socket failure of the client's making logged at debug."""

    async def close(self: Any) -> None:
        try:
            await original(self)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.debug("client connection ended uncleanly: %s", exc)

    return close
