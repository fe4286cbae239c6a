"""``ModelManager.wait_resolved`` when the version it watches from cannot be served: kube's 410
and 504 "Too large resource version" (the server's store went back) and a server away for a
while all make it read the artifact again and watch from what it says now; a TLS refusal ends
it. A scripted client stands in for ``kube.Client`` (get and watch only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import kube
from kube import gpustack
from tests.support import toolarge

NS, NAME = "team-a", "qwen"


def _artifact(version: int, resolved: bool) -> dict[str, Any]:
    conditions = [{"type": "Resolved", "status": "True" if resolved else "False"}]
    return {"metadata": {"namespace": NS, "name": NAME, "uid": "u", "resourceVersion":
                         str(version)},
            "spec": {"source": {"huggingFace": {"repository": "org/m"}}},
            "status": {"conditions": conditions}}


class Scripted:
    """Answers gets from ``reads`` and each watch from ``watches`` (an exception ends one)."""

    def __init__(self, reads: list[dict[str, Any]],
                 watches: list[BaseException]) -> None:
        self.reads = reads
        self.watches = watches
        self.watched_from: list[str | None] = []

    async def get(self, res: Any, name: str, *, namespace: str | None = None) -> Any:
        return self.reads.pop(0)

    async def watch(self, res: Any, **options: Any) -> AsyncIterator[tuple[str, Any]]:
        self.watched_from.append(options.get("resource_version"))
        raise self.watches.pop(0)
        yield  # pragma: no cover - a generator that only raises


@pytest.mark.parametrize("answer", [
    kube.errors.from_status(toolarge.status(toolarge.UNCACHED["watch-initial-events"], 176, 6)),
    kube.Expired(410, "Expired", "too old resource version: 176 (10007)"),
    kube.ConnectionFailed(0, "ConnectionFailed", "connection refused"),
])
async def test_a_version_that_cannot_be_served_reads_the_artifact_again(
        answer: kube.KubeError) -> None:
    api = Scripted([_artifact(176, False), _artifact(10_010, True)], [answer])
    models = gpustack.ModelManager(api)  # type: ignore[arg-type]
    found = await models.wait_resolved(NS, NAME, timeout=30)
    assert found.resolved and api.watched_from == ["176"] and api.reads == []


async def test_a_tls_refusal_ends_the_wait() -> None:
    refused = kube.TLSError(0, "TLSError", "TLS handshake failed: certificate verify failed")
    api = Scripted([_artifact(176, False)], [refused])
    models = gpustack.ModelManager(api)  # type: ignore[arg-type]
    with pytest.raises(kube.TLSError):
        await models.wait_resolved(NS, NAME, timeout=30)
