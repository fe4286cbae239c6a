"""The resolver's keeper of resolved manifests (``controllers.runtime.manifests.Keeper``) over
the server's own storage, in the form and at the key ``apiserver.registry.manifests`` reads and
serves as ``modelartifacts/{name}/manifest``."""

from __future__ import annotations

import logging

from apiserver.registry import manifests, statuses
from apiserver.storage import interface
from controllers.runtime import errors

log = logging.getLogger(__name__)


class StoreManifests:
    def __init__(self, storage: interface.Store) -> None:
        self._storage = storage

    async def keep(self, digest: str, canonical: bytes) -> None:
        packed = manifests.pack(canonical)
        if packed is None:
            log.info("the manifest of %s is too large to keep (%d bytes)", digest,
                     len(canonical))
            return
        where = manifests.key(digest)
        try:
            if await self._storage.get(where) is None:
                await self._storage.create(where, packed)
        except interface.KeyExists:
            return  # kept by another pass: a digest names its bytes
        except interface.StorageError as exc:
            status = statuses.from_storage(exc)
            raise errors.from_status(status.code, status.message) from None
