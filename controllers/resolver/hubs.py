"""The hub clients the resolver uses, and the listing cache.

``Hubs`` holds one httpx client for both hubs, built from a ``hub.config.HubConfig`` (flags, or
the settings ConfigMap in a cluster) and rebuilt when that configuration changes. The
``ListingCache`` keeps each listed commit's files, keyed by hub endpoint, repository and commit:
a commit never changes, so a second artifact on a repository already listed at that commit needs
only the requests that prove its own token's access.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Protocol

import httpx

from hub import config as hub_config
from hub import files, huggingface, modelscope
from openapi import sources

log = logging.getLogger(__name__)

Kind = sources.HubKind
CacheKey = tuple[str, str, str, str]


class HubApi(Protocol):
    """What the resolver asks of a hub (``hub.huggingface`` and ``hub.modelscope``)."""

    @property
    def endpoint(self) -> str: ...

    async def resolve_revision(self, repo: str, revision: str, *, token: str | None) -> str: ...

    async def list_files(self, repo: str, commit: str, *,
                         token: str | None) -> list[files.RemoteFile]: ...

    async def check_access(self, repo: str, commit: str, path: str, *,
                           token: str | None) -> None: ...


class Hubs:
    def __init__(self, config: hub_config.HubConfig) -> None:
        self._config = config
        self._client = hub_config.make_client(config)
        self._retired: list[httpx.AsyncClient] = []

    @property
    def config(self) -> hub_config.HubConfig:
        return self._config

    def get(self, kind: Kind) -> HubApi:
        if kind == sources.HUGGING_FACE:
            return huggingface.HuggingFace(self._client, self._config.huggingface_endpoint)
        return modelscope.ModelScope(self._client, self._config.modelscope_endpoint)

    def modelscope(self) -> modelscope.ModelScope:
        return modelscope.ModelScope(self._client, self._config.modelscope_endpoint)

    def reconfigure(self, config: hub_config.HubConfig) -> None:
        """Use ``config`` from now on (``hub.errors.HubError`` if it is unusable; the old one
        stays). The old client finishes what it carries and is closed with this object."""
        if config == self._config:
            return
        client = hub_config.make_client(config)
        self._retired.append(self._client)
        self._client, self._config = client, config
        log.info("hub settings changed: Hugging Face %s, ModelScope %s, proxy %s",
                 config.huggingface_endpoint, config.modelscope_endpoint,
                 "set" if config.https_proxy else "none")

    async def aclose(self) -> None:
        clients = [self._client, *self._retired]
        self._retired = []
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)


class ListingCache:
    """Least-recently-used listings, bounded by their total number of files."""

    def __init__(self, max_files: int = 500_000) -> None:
        self._max = max_files
        self._entries: collections.OrderedDict[CacheKey, tuple[files.RemoteFile, ...]] = (
            collections.OrderedDict())
        self._files = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> tuple[files.RemoteFile, ...] | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: CacheKey, listed: list[files.RemoteFile]) -> None:
        if len(listed) > self._max:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._files -= len(old)
        self._entries[key] = tuple(listed)
        self._files += len(listed)
        while self._files > self._max and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self._files -= len(dropped)

    def __len__(self) -> int:
        return len(self._entries)
