"""Discovery: a holder's peer port is the URL its plugin published in its NodeModelStore's
``status.peer.url``, unless ``--peer-address`` names the node; a holder with neither, or with a
published value the schema refuses, is skipped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import kube
from nodeplugin.peer import client, holders

D = "sha256:" + "ab" * 32


def _store(name: str, url: str | None = None, *, peer: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}],
                              "models": [{"digest": D, "state": "Ready"}]}
    if url is not None:
        status["peer"] = {"url": url}
    elif peer is not None:
        status["peer"] = peer
    return {"metadata": {"name": name}, "status": status}


class Listed:
    def __init__(self, stores: Sequence[Mapping[str, Any]], error: Exception | None = None
                 ) -> None:
        self.items = stores
        self.error = error

    async def stores(self) -> Sequence[Mapping[str, Any]]:
        if self.error is not None:
            raise self.error
        return self.items


def _holders(stores: Sequence[Mapping[str, Any]], overrides: Mapping[str, str] | None = None,
             *, error: Exception | None = None) -> holders.Holders:
    return holders.Holders(Listed(stores, error), overrides or {}, self_node="self",
                           token_file="/nonexistent", http=client.make_client(None))


@pytest.mark.parametrize(("peer", "found"), [
    ({"url": "https://10.0.3.7:32445"}, "https://10.0.3.7:32445"),
    ({"url": "https://[fd00::7]:32445"}, "https://[fd00::7]:32445"),
    ({"url": "https://plugin.example:1"}, "https://plugin.example:1"),
    ({"url": "http://10.0.3.7:32445"}, None),  # never a plain-text port
    ({"url": "https://10.0.3.7:32445/elsewhere"}, None),
    ({"url": "https://user@10.0.3.7:32445"}, None),
    ({"url": "https://" + "a" * 300 + ":1"}, None),
    ({"url": 32445}, None),
    ({}, None),
    ("https://10.0.3.7:32445", None),
])
def test_a_published_address_is_used_only_in_the_schema_s_form(peer: Any, found: str | None
                                                                ) -> None:
    assert holders.address(_store("a", peer=peer)) == found


async def test_holders_are_found_at_the_address_they_published() -> None:
    stores = [_store("a", "https://10.0.0.1:32445"), _store("b", "https://10.0.0.2:32445"),
              _store("c"), _store("self", "https://10.0.0.9:32445")]
    found = _holders(stores)
    try:
        candidates = await found.candidates(D)
        assert sorted(c.node for c in candidates) == ["a", "b"]  # c publishes no port
        assert found.addresses(stores) == {"a": "https://10.0.0.1:32445",
                                           "b": "https://10.0.0.2:32445",
                                           "self": "https://10.0.0.9:32445"}
    finally:
        await found.aclose()


async def test_peer_address_overrides_what_a_node_publishes_and_adds_silent_ones() -> None:
    stores = [_store("a", "https://10.0.0.1:32445"), _store("c")]
    overrides = {"a": "https://a.internal:9000", "c": "https://c.internal:9000"}
    found = _holders(stores, overrides)
    try:
        assert found.addresses(stores) == overrides
        assert sorted(c.node for c in await found.candidates(D)) == ["a", "c"]
    finally:
        await found.aclose()


async def test_a_failed_listing_is_no_candidates() -> None:
    found = _holders([], error=kube.ConnectionFailed(0, "ConnectionFailed", "refused"))
    try:
        assert await found.candidates(D) == []
    finally:
        await found.aclose()


async def test_cold_nodes_spread_over_the_seeds() -> None:
    stores = [_store(n, f"https://10.0.0.{i}:32445") for i, n in enumerate("abcdef", 1)]
    firsts = set()
    for me in ("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"):
        found = holders.Holders(Listed(stores), {}, self_node=me, token_file="/nonexistent",
                                http=client.make_client(None))
        try:
            order = [c.node for c in await found.candidates(D)]
        finally:
            await found.aclose()
        assert sorted(order) == list("abcdef")
        firsts.add(order[0])
    assert len(firsts) > 1


async def test_files_are_asked_of_nodes_listing_the_digest_first_and_of_a_bounded_number(
) -> None:
    listing = [_store(f"l{i}", f"https://10.0.1.{i}:32445") for i in range(3)]
    listing[0]["status"]["models"][0]["state"] = "Downloading"  # materializing it too
    others = [{"metadata": {"name": f"o{i:02d}"},
               "status": {"conditions": [{"type": "Ready", "status": "True"}], "models": [],
                          "peer": {"url": f"https://10.0.2.{i}:32445"}}} for i in range(30)]
    silent = {"metadata": {"name": "silent"}, "status": {"models": [{"digest": D}]}}
    found = _holders([*others, silent, *listing, _store("self", "https://10.0.0.9:32445")])
    try:
        asked = [p.node for p in await found.everyone(D)]
        assert sorted(asked[:3]) == ["l0", "l1", "l2"]
        assert len(asked) == holders.MAX_ASKED and len(set(asked)) == len(asked)
        assert "self" not in asked and "silent" not in asked  # no port known
        other = [p.node for p in await found.everyone("sha256:" + "cd" * 32)]
        assert len(other) == holders.MAX_ASKED and "self" not in other
    finally:
        await found.aclose()
