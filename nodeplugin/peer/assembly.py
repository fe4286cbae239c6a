"""Node-to-node sync put together for a running plugin: the puller's holders and the peer port.

``Settings`` is what the flags say (``--peer-port`` is the switch: 0 is off). ``start`` builds
the ``holders.Holders`` the downloader asks first and serves ``server``'s app on the peer port
(hypercorn over TLS, the plugin's serving certificate), with its own ``reviews.TokenReviewer``
for the peer audience. Off, nothing is built and the downloader uses the hub alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping

import kube
from nodeplugin import reviews, serve
from nodeplugin.cache import layout
from nodeplugin.peer import admission, client, holders, server, wire
from timing import clock as clocks

log = logging.getLogger(__name__)

TOKEN_FILE = "/var/run/secrets/model.csi.gpustack.ai/peer/token"


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    port: int = 0
    """The peer port; 0 turns node-to-node sync off (no port, no pulling from peers)."""
    plugin_user: str = ""
    """The node plugins' ServiceAccount user, the one identity the port admits."""
    token_file: str = TOKEN_FILE
    """This plugin's projected token for ``wire.AUDIENCE``."""
    addresses: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``node -> https://host:port`` of the other plugins' peer ports."""
    ca_file: str | None = None
    max_streams: int = 8

    @property
    def enabled(self) -> bool:
        return self.port > 0


@dataclasses.dataclass
class PeerSync:
    holders: holders.Holders
    stop: asyncio.Event
    task: asyncio.Task[None] | None = None

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)
        await self.holders.aclose()


def make_holders(settings: Settings, api: kube.Client, node_name: str) -> holders.Holders:
    return holders.Holders(holders.KubeLister(api), settings.addresses, self_node=node_name,
                           token_file=settings.token_file,
                           http=client.make_client(settings.ca_file))


async def serve_port(
    settings: Settings, found: holders.Holders, *, cache: layout.Layout, api: kube.Client,
    bind_address: str, cert: str, key: str, quarantined: server.Quarantined, clock: clocks.Clock,
) -> PeerSync:
    reviewer = reviews.TokenReviewer(api, clock=clock, audiences=[wire.AUDIENCE])
    app = server.make_app(cache, admission.Admission(reviewer, settings.plugin_user),
                          quarantined=quarantined, max_streams=settings.max_streams)
    sync = PeerSync(found, asyncio.Event())
    cfg = serve.hypercorn_config_for(bind_address, settings.port, cert, key)
    log.info("serving peers on %s:%d", bind_address, settings.port)
    sync.task = asyncio.create_task(serve.serve(app, cfg, sync.stop), name="peer port")
    return sync
