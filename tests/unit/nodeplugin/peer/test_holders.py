"""Which node stores count as holders of a digest."""

from __future__ import annotations

from typing import Any

from nodeplugin.peer import holders

D = "sha256:" + "ab" * 32


def _store(name: str, state: str = "Ready", ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}],
                       "models": [{"digest": D, "state": state}]}}


def test_only_ready_stores_listing_the_digest_ready_other_than_this_node() -> None:
    stores = [_store("a"), _store("b", state="Downloading"), _store("c", ready="False"),
              _store("self"), {"metadata": {"name": "d"}}]
    assert holders.holding(stores, D, "self") == ["a"]
    assert holders.holding(stores, "sha256:" + "cd" * 32, "self") == []
