"""``NodeModelStore.status.peer.url``: the server keeps only https://HOST:PORT there, so what a
plugin publishes names where to connect and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from openapi import validation


def _store(peer: Any) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "NodeModelStore",
            "metadata": {"name": "node-a"}, "spec": {}, "status": {"peer": peer}}


@pytest.mark.parametrize("url", ["https://10.244.1.17:32445", "https://[fd00::17]:32445",
                                 "https://plugin-a.example:443"])
def test_a_peer_url_is_accepted(url: str) -> None:
    assert validation.validate("NodeModelStore", _store({"url": url})) == []


@pytest.mark.parametrize("url", ["http://10.0.0.1:1", "https://10.0.0.1", "https://h:1/path",
                                 "https://u:p@h:1", "https://h:1?q", ""])
def test_anything_else_is_refused_saying_the_form(url: str) -> None:
    (error,) = validation.validate("NodeModelStore", _store({"url": url}))
    assert error.field == "status.peer.url"
    assert "must be https://HOST:PORT" in error.message


def test_the_url_is_required_in_a_peer() -> None:
    (error,) = validation.validate("NodeModelStore", _store({}))
    assert (error.field, error.type) == ("status.peer.url", "FieldValueRequired")
