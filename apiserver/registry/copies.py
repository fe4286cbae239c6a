"""``GET modelartifacts/{name}/copies``: the registry reads the artifact and the prefetches of its
namespace naming it; the view computes the rows (``controllers.nodeview.copies.Copies``: the
NodeModelStores listing its digest and the plugins' live bytes). Never stored; names nodes, so
it is authorized on its own (``get`` on ``modelartifacts/copies``).

The view is plugged into the ``Slot`` at wiring time, because it watches this same registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from apiserver import errors
from apiserver.registry import store
from openapi import wire
from openapi.kinds import copies as copiesview
from openapi.kinds import modelprefetch


class View(Protocol):
    async def read(self, artifact: wire.Obj,
                   prefetches: Sequence[wire.Readable]) -> copiesview.ModelArtifactCopies: ...


class Slot:
    def __init__(self) -> None:
        self.view: View | None = None


async def read(artifacts: store.ResourceStore, prefetches: store.ResourceStore, slot: Slot,
               namespace: str, name: str) -> copiesview.ModelArtifactCopies:
    artifact = await artifacts.get(namespace, name)
    if slot.view is None:
        raise errors.ServiceUnavailable(
            "copies are not available yet: the server is still reading the NodeModelStores")
    listed = await prefetches.list(namespace)
    naming = [p for p in listed.items() if modelprefetch.artifact_name(p) == name]
    return await slot.view.read(artifact, naming)
