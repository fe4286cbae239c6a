"""Where the resolver keeps each resolved manifest (the canonical bytes, ``openapi.manifest``),
by digest, so ``modelartifacts/{name}/manifest`` can say which files a pattern kept.

The API server keeps them in its own storage (``apiserver/registry/manifests.py``, which also
serves them); ``python -m controllers`` keeps none (``Discard``): the subresource then says the
manifest is not recorded.
"""

from __future__ import annotations

from typing import Protocol


class Keeper(Protocol):
    async def keep(self, digest: str, canonical: bytes) -> None:
        """Record ``canonical`` (the manifest text whose digest is ``digest``); raises
        ``controllers.runtime.errors.ApiError`` when it cannot."""
        ...


class Discard:
    async def keep(self, digest: str, canonical: bytes) -> None:
        return None
