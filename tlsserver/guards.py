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
from hypercorn.asyncio import tcp_server
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol import h2 as hypercorn_h2

log = logging.getLogger(__name__)


class H2(hypercorn_h2.H2Protocol):
    """hypercorn's HTTP/2 protocol, dropping DATA for a stream that is no longer open."""

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
    """hypercorn's per-connection server with both guards."""

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
        try:
            await super()._close()
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.debug("client connection ended uncleanly: %s", exc)
