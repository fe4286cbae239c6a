"""An in-memory copy of every ModelArtifact, kept by list + watch (the informer).

Mount authorization reads it by ``(namespace, name)`` in O(1). Until the first complete list the
cache is not ``synced`` and mounts answer Unavailable. The loop is ``kube.informer.Reflector``,
the one every informer of ours runs: after a disconnect the watch resumes from the last resource
version seen (events and bookmarks); a 410 Gone, or a 504 "Too large resource version" (the
server's store went back), lists again from scratch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

import kube
from kube import informer as reflectors
from nodeplugin import apiclient
from openapi import wire
from openapi.kinds import modelartifact
from timing import backoff as backoffs

log = logging.getLogger(__name__)

PAGE_SIZE = 500


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """What mount authorization and materialization need from one ModelArtifact."""

    namespace: str
    name: str
    uid: str
    source_kind: str
    """huggingFace, modelScope, persistentVolumeClaim, image, or "" when none is set."""
    repository: str = ""
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    resolved: bool = False
    resolved_reason: str = ""
    revision: str = ""
    """``status.resolved.revision``: the commit."""
    manifest_digest: str = ""
    secret_name: str = ""
    digest_source: str = ""
    """``status.resolved.digestSource``: Hub, or Expected (the anchor, without the hub)."""
    anchor_proof: str = ""
    """``status.resolved.anchorProof``: what lets an Expected identity be mounted."""


def from_object(obj: dict[str, Any]) -> Artifact:
    meta = obj.get("metadata") or {}
    condition = modelartifact.resolved_condition(obj) or {}
    return Artifact(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        source_kind=modelartifact.source_kind(obj),
        repository=modelartifact.repository(obj),
        allow_patterns=tuple(modelartifact.allow_patterns(obj)),
        ignore_patterns=tuple(modelartifact.ignore_patterns(obj)),
        resolved=condition.get("status") == wire.TRUE,
        resolved_reason=str(condition.get("reason", "")),
        revision=modelartifact.revision(obj),
        manifest_digest=modelartifact.manifest_digest(obj),
        secret_name=modelartifact.secret_name(obj),
        digest_source=modelartifact.digest_source(obj),
        anchor_proof=modelartifact.anchor_proof(obj),
    )


class Informer:
    """Keeps ``get(namespace, name)`` current; ``run()`` is the long-lived task."""

    def __init__(
        self,
        client: apiclient.ArtifactClient,
        *,
        retry_initial: float = reflectors.BACKOFF.initial,
        retry_max: float = reflectors.BACKOFF.cap,
    ) -> None:
        self._client = client
        self._items: dict[tuple[str, str], Artifact] = {}
        self._synced = asyncio.Event()
        self._reflector = reflectors.Reflector(
            self, self, what="artifact informer", expired=(apiclient.Gone,),
            backoff=backoffs.Backoff(retry_initial, retry_max))

    @property
    def resource_version(self) -> str:
        return self._reflector.resource_version

    @property
    def last_error(self) -> str:
        """Why the last list or watch failed (for the Unavailable message); never a token."""
        return self._reflector.last_error

    @last_error.setter
    def last_error(self, why: str) -> None:
        self._reflector.last_error = why

    @property
    def lists(self) -> int:
        """How many complete lists were made (tests read it to see a re-list)."""
        return self._reflector.lists

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, namespace: str, name: str) -> Artifact | None:
        return self._items.get((namespace, name))

    def __len__(self) -> int:
        return len(self._items)

    async def run(self) -> None:
        await self._reflector.run()

    # the reflector's ListWatch ----------------------------------------------------------------

    async def list(self) -> reflectors.Listed:
        items: list[dict[str, Any]] = []
        token = ""
        version = ""
        while True:
            page = await self._client.list_page(limit=PAGE_SIZE, continue_token=token)
            items.extend(page["items"])
            version = page["resourceVersion"] or version
            token = page["continueToken"]
            if not token:
                return reflectors.Listed(items, version)

    async def watch(self, resource_version: str) -> AsyncIterator[reflectors.Event]:
        async for event in self._client.watch(resource_version):
            kind, obj = event["type"], event["object"]
            if kind == "ERROR":
                if isinstance(kube.errors.from_status(obj), (kube.Expired,
                                                             kube.TooLargeResourceVersion)):
                    raise apiclient.Gone(str(obj.get("message", "expired")))
                raise apiclient.ApiError(f"watch error: {obj.get('message', '')}")
            yield reflectors.Event(kind, obj)

    # the reflector's Sink ---------------------------------------------------------------------

    async def replace(self, listed: reflectors.Listed) -> None:
        items: dict[tuple[str, str], Artifact] = {}
        for obj in listed.items:
            art = from_object(obj)
            items[(art.namespace, art.name)] = art
        self._items = items
        if not self._synced.is_set():
            log.info("artifact informer synced: %d artifacts at version %s", len(items),
                     listed.resource_version)
        self._synced.set()

    async def apply(self, event: reflectors.Event) -> None:
        art = from_object(event.object)
        if event.type in ("ADDED", "MODIFIED"):
            self._items[(art.namespace, art.name)] = art
        elif event.type == "DELETED":
            self._items.pop((art.namespace, art.name), None)
