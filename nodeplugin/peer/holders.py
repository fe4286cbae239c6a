"""Which nodes hold a digest, and where their peer port is: the downloader's ``peers.Peers``.

The holders are the NodeModelStores whose ``status.models`` list the digest ``Ready`` and whose
``Ready`` condition is True (this node excluded), listed through ``kube.Client`` at each new
attempt (one list per attempt, not per byte). A node's address is the static
``--peer-address NODE=URL`` map's when it names the node (an override), else the
``status.peer.url`` the node's own plugin published in the same object (``address``); a node
with neither serves no peer port and is skipped. Only the plugin of that node may write its
status (the API server's status guard), so a published address is that plugin's; what it then
serves is bound to the digest by the downloader either way. The order is the listing's, rotated
by this node's name so that cold nodes spread over seeds.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import httpx

import kube
from kube.resources import NodeModelStore
from nodeplugin.materialize import peers
from nodeplugin.peer import client as peer_client
from openapi import schema as contract
from openapi.kinds import nodemodelstore

log = logging.getLogger(__name__)

MAX_ASKED = 16
"""Nodes an attempt asks for files by identity (``everyone``): a bound on the questions of a
large fleet; the attempt lists again every few seconds, so nodes that start materializing the
digest later come first then."""


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
        name = _name(store)
        if not name or name == self_node:
            continue
        if nodemodelstore.ready(store) and nodemodelstore.holds(store, digest):
            nodes.append(name)
    return nodes


def address(store: Mapping[str, Any]) -> str | None:
    """The peer URL a store's plugin published (``status.peer.url``), None without a valid one
    (the server checks the same pattern; a store read from elsewhere may not have been)."""
    url = nodemodelstore.peer_url(store)
    if not url or len(url) > contract.MAX_PEER_URL_LENGTH \
            or re.fullmatch(contract.PEER_URL_PATTERN, url) is None:
        return None
    return url


def _name(store: Mapping[str, Any]) -> str:
    return str((store.get("metadata") or {}).get("name") or "")


class Holders:
    """``materialize.peers.Peers`` over the node stores, the override map and one peer client
    (``peer_client.make_client``; ``addresses``, ``--peer-address``, wins for the nodes it
    names)."""

    def __init__(self, lister: Lister, addresses: Mapping[str, str], *, self_node: str,
                 token_file: str, http: peer_client.Client) -> None:
        self._lister = lister
        self._addresses = dict(addresses)
        self._self = self_node
        self._token_file = token_file
        self._http = http
        self.delivered_bytes = 0

    def delivered(self, size: int) -> None:
        self.delivered_bytes += size

    async def _stores(self) -> Sequence[Mapping[str, Any]]:
        try:
            return await self._lister.stores()
        except (kube.KubeError, httpx.HTTPError, OSError) as exc:
            log.info("cannot list the node stores for peers: %s", exc)
            return []

    async def everyone(self, digest: str) -> Sequence[peers.FilePeer]:
        """Other nodes with a known peer port to ask for files by identity, at most
        ``MAX_ASKED``: first those whose store lists ``digest`` in any state (materializing it
        too, or holding it), then the rest, each group rotated by this node's name (so that
        nodes spread their questions)."""
        stores = await self._stores()
        where = self.addresses(stores)
        listing = {_name(s) for s in stores if nodemodelstore.entry(s, digest) is not None}
        first = sorted(n for n in where if n != self._self and n in listing)
        rest = sorted(n for n in where if n != self._self and n not in listing)
        nodes = (self._rotated(first) + self._rotated(rest))[:MAX_ASKED]
        return [peer_client.Peer(n, where[n], self._http, self._token_file) for n in nodes]

    def _rotated(self, nodes: list[str]) -> list[str]:
        if not nodes:
            return nodes
        turn = int(hashlib.sha256(self._self.encode()).hexdigest(), 16) % len(nodes)
        return nodes[turn:] + nodes[:turn]

    async def candidates(self, digest: str) -> Sequence[peers.Candidate]:
        stores = await self._stores()
        where = self.addresses(stores)
        nodes = self._rotated([n for n in holding(stores, digest, self._self) if n in where])
        return [peer_client.Peer(n, where[n], self._http, self._token_file) for n in nodes]

    def addresses(self, stores: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        """``node -> URL`` of every peer port known: the published ones, then the overrides."""
        found: dict[str, str] = {}
        for store in stores:
            name, url = _name(store), address(store)
            if name and url is not None:
                found[name] = url
        return {**found, **self._addresses}

    async def aclose(self) -> None:
        await self._http.aclose()
