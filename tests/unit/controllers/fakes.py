"""A ``client.Client`` that lists fixed objects and watches forever: what an informer over it
holds is exactly what the test gave."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from controllers.runtime import client as clients


class Listed:
    """``objects``: one list for every resource, or a list per resource plural."""

    def __init__(self, objects: Sequence[dict[str, Any]] | Mapping[str, list[dict[str, Any]]]
                 ) -> None:
        self.objects = objects

    async def list(self, resource: clients.Resource, *, namespace: str = "",
                   label_selector: str = "") -> clients.ListResult:
        found = (self.objects.get(resource.plural, []) if isinstance(self.objects, Mapping)
                 else list(self.objects))
        return clients.ListResult(found, "1")

    async def watch(self, resource: clients.Resource, **_: Any) -> Any:
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def get(self, *args: Any) -> Any:
        raise NotImplementedError

    async def update_status(self, *args: Any) -> Any:
        raise NotImplementedError
