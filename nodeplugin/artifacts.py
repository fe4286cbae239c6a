"""An in-memory copy of every ModelArtifact, kept by list + watch (the informer).

Mount authorization reads it by ``(namespace, name)`` in O(1). Until the first complete list the
cache is not ``synced`` and mounts answer Unavailable. After a disconnect the watch resumes from the
last resource version seen (events and bookmarks); a 410 Gone lists again from scratch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from nodeplugin import apiclient
from openapi import sources

log = logging.getLogger(__name__)

PAGE_SIZE = 500
QUICK_END_SECONDS = 1.0
HUB_KINDS = sources.HUB_KINDS
SOURCE_KINDS = sources.KINDS


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


def from_object(obj: dict[str, Any]) -> Artifact:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    source = spec.get("source") or {}
    kind = next((k for k in SOURCE_KINDS if isinstance(source.get(k), dict)), "")
    hub: dict[str, Any] = source.get(kind) or {} if kind in HUB_KINDS else {}
    resolved = status.get("resolved") or {}
    condition: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Resolved"), {}
    )
    return Artifact(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        source_kind=kind,
        repository=str(hub.get("repository", "")),
        allow_patterns=tuple(str(p) for p in spec.get("allowPatterns") or ()),
        ignore_patterns=tuple(str(p) for p in spec.get("ignorePatterns") or ()),
        resolved=condition.get("status") == "True",
        resolved_reason=str(condition.get("reason", "")),
        revision=str(resolved.get("revision", "")),
        manifest_digest=str(resolved.get("manifestDigest", "")),
        secret_name=str((hub.get("secretRef") or {}).get("name", "")),
    )


class Informer:
    """Keeps ``get(namespace, name)`` current; ``run()`` is the long-lived task."""

    def __init__(
        self,
        client: apiclient.ArtifactClient,
        *,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
    ) -> None:
        self._client = client
        self._items: dict[tuple[str, str], Artifact] = {}
        self._synced = asyncio.Event()
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self.resource_version = ""
        self.last_error = ""
        """Why the last list or watch failed (for the Unavailable message); never a token."""
        self.lists = 0
        """How many complete lists were made (tests read it to see a re-list)."""

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
        delay = self._retry_initial
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                began = time.monotonic()
                await self._watch()
                if time.monotonic() - began >= QUICK_END_SECONDS:
                    delay = self._retry_initial  # a watch that ran its course: resume at once
                    continue
                # A watch that ends at once, again and again, must not spin: back off.
            except apiclient.Gone:
                log.info("artifact watch: resource version %s too old; listing again",
                         self.resource_version)
                need_list = True
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error = str(exc) or type(exc).__name__
                log.warning("artifact informer: %s; retrying in %.1fs", self.last_error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_max)

    async def _list(self) -> None:
        items: dict[tuple[str, str], Artifact] = {}
        token = ""
        version = ""
        while True:
            page = await self._client.list_page(limit=PAGE_SIZE, continue_token=token)
            for obj in page["items"]:
                art = from_object(obj)
                items[(art.namespace, art.name)] = art
            version = page["resourceVersion"] or version
            token = page["continueToken"]
            if not token:
                break
        self._items = items
        self.resource_version = version
        self.lists += 1
        self.last_error = ""
        if not self._synced.is_set():
            log.info("artifact informer synced: %d artifacts at version %s", len(items), version)
        self._synced.set()

    async def _watch(self) -> None:
        async for event in self._client.watch(self.resource_version):
            kind = event["type"]
            obj = event["object"]
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise apiclient.Gone(str(obj.get("message", "expired")))
                raise apiclient.ApiError(f"watch error: {obj.get('message', '')}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if kind in ("ADDED", "MODIFIED"):
                art = from_object(obj)
                self._items[(art.namespace, art.name)] = art
            elif kind == "DELETED":
                art = from_object(obj)
                self._items.pop((art.namespace, art.name), None)
            if version:
                self.resource_version = version
