"""Which nodes hold a digest, and where their peer port is: the downloader's ``peers.Peers``.

The holders are the NodeModelStores whose ``status.models`` list the digest ``Ready`` and whose
``Ready`` condition is True (this node excluded), listed through ``kube.Client`` at each new
attempt (one list per attempt, not per byte). A node's address comes from a ``Locator``: the
static ``--peer-address NODE=URL`` map, else nothing (a node without an address is skipped).
The order is the listing's, rotated by this node's name so that cold nodes spread over seeds.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

import kube
from kube.resources import NodeModelStore
from nodeplugin.materialize import peers
from nodeplugin.peer import client as peer_client

log = logging.getLogger(__name__)


class Lister(Protocol):
    async def stores(self) -> Sequence[Mapping[str, Any]]:
        """Every NodeModelStore, as wire objects."""
        ...


class KubeLister:
    def __init__(self, client: kube.Client) -> None:
        self._client = client

    async def stores(self) -> Sequence[Mapping[str, Any]]:
        found = await self._client.list(NodeModelStore)
        return [dict(item) for item in found.items]


def holding(stores: Sequence[Mapping[str, Any]], digest: str, self_node: str) -> list[str]:
    """The nodes, other than ``self_node``, whose store is Ready and lists ``digest`` Ready."""
    nodes: list[str] = []
    for store in stores:
        name = str((store.get("metadata") or {}).get("name") or "")
        status = store.get("status") or {}
        if not name or name == self_node:
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        held = any(m.get("digest") == digest and m.get("state") == "Ready"
                   for m in status.get("models") or [])
        if ready and held:
            nodes.append(name)
    return nodes


class Holders:
    """``materialize.peers.Peers`` over the node stores, a locator and one HTTPS client."""

    def __init__(self, lister: Lister, addresses: Mapping[str, str], *, self_node: str,
                 token_file: str, http: httpx.AsyncClient) -> None:
        self._lister = lister
        self._addresses = dict(addresses)
        self._self = self_node
        self._token_file = token_file
        self._http = http
        self.delivered_bytes = 0

    def delivered(self, size: int) -> None:
        self.delivered_bytes += size

    async def candidates(self, digest: str) -> Sequence[peers.Candidate]:
        try:
            stores = await self._lister.stores()
        except (kube.KubeError, httpx.HTTPError, OSError) as exc:
            log.info("cannot list the node stores for peers: %s", exc)
            return []
        nodes = [n for n in holding(stores, digest, self._self) if n in self._addresses]
        if nodes:
            turn = int(hashlib.sha256(self._self.encode()).hexdigest(), 16) % len(nodes)
            nodes = nodes[turn:] + nodes[:turn]
        return [peer_client.Peer(n, self._addresses[n], self._http, self._token_file)
                for n in nodes]

    async def aclose(self) -> None:
        await self._http.aclose()
