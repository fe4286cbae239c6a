"""``GET modelartifacts/{name}/progress``: the registry reads the artifact; the view computes
the rest (``controllers.nodeview.progress.Progress``: the NodeModelStores listing its digest,
from an index kept off the watch, and the plugins' live bytes). Never stored, never names a node.

The view is plugged into the ``Slot`` at wiring time, because it watches this same registry.
"""

from __future__ import annotations

from typing import Any, Protocol

from apiserver import errors
from apiserver.registry import store

Obj = dict[str, Any]


class View(Protocol):
    async def read(self, artifact: Obj) -> Obj: ...


class Slot:
    def __init__(self) -> None:
        self.view: View | None = None


async def read(artifacts: store.ResourceStore, slot: Slot, namespace: str, name: str) -> Obj:
    artifact = await artifacts.get(namespace, name)
    if slot.view is None:
        raise errors.ServiceUnavailable(
            "progress is not available yet: the server is still reading the NodeModelStores")
    return await slot.view.read(artifact)
