"""``GET modelartifacts/{name}/progress``: the registry reads the artifact; the view computes
the rest (``controllers.nodeview.progress.Progress``: the NodeModelStores listing its digest,
from an index kept off the watch, and the plugins' live bytes). Never stored, never names a node.

The view is plugged into the ``Slot`` at wiring time, because it watches this same registry.
"""

from __future__ import annotations

from typing import Protocol

from apiserver import errors
from apiserver.registry import store
from openapi import wire
from openapi.kinds import progress as progressview


class View(Protocol):
    async def read(self, artifact: wire.Obj) -> progressview.ModelArtifactProgress: ...


class Slot:
    def __init__(self) -> None:
        self.view: View | None = None


async def read(artifacts: store.ResourceStore, slot: Slot, namespace: str,
               name: str) -> progressview.ModelArtifactProgress:
    artifact = await artifacts.get(namespace, name)
    if slot.view is None:
        raise errors.ServiceUnavailable(
            "progress is not available yet: the server is still reading the NodeModelStores")
    return await slot.view.read(artifact)
