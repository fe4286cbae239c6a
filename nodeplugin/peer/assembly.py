"""Node-to-node sync put together for a running plugin: the puller's holders and the peer port.

``Settings`` is what the flags say (``--peer-port`` is the switch: 0 is off). ``make_holders``
builds the ``holders.Holders`` the downloader asks first; ``serve_port`` serves ``server``'s app
on the peer port (hypercorn over TLS, the plugin's serving certificate), with its own
``reviews.TokenReviewer`` for the peer audience. ``Settings.url`` is what the plugin publishes
in its NodeModelStore's ``status.peer.url`` once the port serves (``--peer-advertise-address``,
in the chart the Pod's IP), which is how the other plugins find it. Off, nothing is built and
the downloader uses the hub alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import re
from collections.abc import Callable, Mapping

import kube
from nodeplugin import reviews, serve
from nodeplugin.cache import layout
from nodeplugin.peer import admission, answer, client, holders, server, wire
from openapi import schema as contract
from openapi import volume
from timing import clock as clocks

log = logging.getLogger(__name__)

TOKEN_FILE = f"/var/run/secrets/{volume.DRIVER}/peer/token"


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    port: int = 0
    """The peer port; 0 turns node-to-node sync off (no port, no pulling from peers)."""
    plugin_user: str = ""
    """The node plugins' ServiceAccount user, the one identity the port admits."""
    token_file: str = TOKEN_FILE
    """This plugin's projected token for ``wire.AUDIENCE``."""
    addresses: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``node -> https://host:port`` of other plugins' peer ports, over what they publish."""
    ca_file: str | None = None
    max_streams: int = 8
    max_streams_per_peer: int | None = None
    """Of ``max_streams``, at most this many for one caller; None gives half."""
    send_timeout: float = answer.SEND_TIMEOUT_SECONDS
    """An answer whose caller reads nothing for this long is cut."""
    advertise_address: str = ""
    """The host (an IP or DNS name) the other plugins reach this one at; empty publishes none."""

    @property
    def enabled(self) -> bool:
        return self.port > 0

    @property
    def url(self) -> str:
        """``https://HOST:PORT`` to publish, "" when off or without an address."""
        if not self.enabled or not self.advertise_address:
            return ""
        return url_of(self.advertise_address, self.port)


def url_of(host: str, port: int) -> str:
    """``https://host:port`` (an IPv6 address in brackets); ``ValueError`` when the result is not
    a URL the NodeModelStore schema accepts."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    shown = f"[{host}]" if isinstance(literal, ipaddress.IPv6Address) else host
    url = f"https://{shown}:{port}"
    if len(url) > contract.MAX_PEER_URL_LENGTH or re.fullmatch(contract.PEER_URL_PATTERN,
                                                                  url) is None:
        raise ValueError(f"{host[:64]!r} is not an IP address or DNS name to publish")
    return url


class Published:
    """What ``status.peer.url`` carries (the node store's composer calls it): the port's URL
    while it serves, else "" (the field is then cleared); ``changed`` asks for a new report."""

    def __init__(self) -> None:
        self.url = ""
        self.changed: Callable[[], None] = lambda: None

    def __call__(self) -> str:
        return self.url

    def set(self, url: str) -> None:
        if url != self.url:
            self.url = url
            self.changed()


@dataclasses.dataclass
class PeerSync:
    holders: holders.Holders
    stop: asyncio.Event
    task: asyncio.Task[None] | None = None

    async def stop_serving(self) -> None:
        """End the peer port (its task clears the published URL as it ends)."""
        self.stop.set()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)

    async def close(self) -> None:
        """The port and the pulling side's client; a plugin closes its downloader in between
        (``stop_serving`` first), so no range of a running attempt meets a closed client."""
        await self.stop_serving()
        await self.holders.aclose()


def make_holders(settings: Settings, api: kube.Client, node_name: str) -> holders.Holders:
    """``api`` serves worker.gpustack.ai (the NodeModelStores and their published addresses)."""
    return holders.Holders(holders.KubeLister(api), settings.addresses, self_node=node_name,
                           token_file=settings.token_file,
                           http=client.make_client(settings.ca_file))


async def serve_port(
    settings: Settings, found: holders.Holders, *, cache: layout.Layout, api: kube.Client,
    bind_address: str, cert: str, key: str, withheld: server.Withheld, clock: clocks.Clock,
    published: Published | None = None,
) -> PeerSync:
    """Serve the port in a task; ``published`` carries ``settings.url`` until the task ends."""
    reviewer = reviews.TokenReviewer(api, clock=clock, audiences=[wire.AUDIENCE])
    app = server.make_app(cache, admission.Admission(reviewer, settings.plugin_user),
                          withheld=withheld, max_streams=settings.max_streams,
                          per_peer=settings.max_streams_per_peer,
                          send_timeout=settings.send_timeout)
    sync = PeerSync(found, asyncio.Event())
    cfg = serve.hypercorn_config_for(bind_address, settings.port, cert, key)
    log.info("serving peers on %s:%d", bind_address, settings.port)
    sync.task = asyncio.create_task(serve.serve(app, cfg, sync.stop), name="peer port")
    if published is not None:
        published.set(settings.url)
        sync.task.add_done_callback(lambda task: published.set(""))
    return sync
