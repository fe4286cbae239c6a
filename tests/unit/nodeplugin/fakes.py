"""Fakes for the node plugin's unit tests: an API client, a mounter, artifact objects, the node
store's API."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import kube
from nodeplugin import apiclient
from nodeplugin.cache import targets

DIGEST = "sha256:" + "0f" * 32


def artifact_object(
    name: str = "qwen",
    namespace: str = "team-a",
    *,
    uid: str = "uid-1",
    digest: str = DIGEST,
    resolved: bool = True,
    source: dict[str, Any] | None = None,
    version: str = "1",
    anchor_proof: str | None = None,
) -> dict[str, Any]:
    """``anchor_proof``: resolved to its anchor without the hub (``digestSource: Expected``, no
    commit), with that proof ("" for none, as before issue 35)."""
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Resolved", "status": "True" if resolved else "False",
             "reason": "Resolved" if resolved else "Resolving"}
        ]
    }
    if resolved and anchor_proof is not None:
        status["resolved"] = {"manifestDigest": digest, "digestSource": "Expected",
                              "resolvedTime": "2026-01-01T00:00:00Z"}
        if anchor_proof:
            status["resolved"]["anchorProof"] = anchor_proof
    elif resolved:
        status["resolved"] = {"revision": "c" * 40, "manifestDigest": digest,
                              "digestSource": "Hub", "fileCount": 1, "sizeBytes": 1}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace, "uid": uid,
                     "resourceVersion": version},
        "spec": {"source": source or {"huggingFace": {"repository": "org/qwen",
                                                      "revision": "main"}}},
        "status": status,
    }


class FakeClient:
    """Pages from ``pages``; watch events from a queue (``None`` ends a watch, an exception is
    raised)."""

    def __init__(self, pages: list[apiclient.ListPage]) -> None:
        self.pages = pages
        self.list_calls: list[str] = []
        self.watch_calls: list[str] = []
        self.events: asyncio.Queue[apiclient.WatchEvent | Exception | None] = asyncio.Queue()
        self.fail_lists = 0

    async def list_page(self, *, limit: int, continue_token: str) -> apiclient.ListPage:
        self.list_calls.append(continue_token)
        if self.fail_lists:
            self.fail_lists -= 1
            raise apiclient.ApiError("connection refused")
        index = int(continue_token) if continue_token else 0
        return self.pages[index]

    async def watch(self, resource_version: str) -> AsyncIterator[apiclient.WatchEvent]:
        self.watch_calls.append(resource_version)
        while True:
            item = await self.events.get()
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    async def aclose(self) -> None:
        return None


def page(items: list[dict[str, Any]], version: str, next_token: str = "") -> apiclient.ListPage:
    return apiclient.ListPage(items=items, resourceVersion=version, continueToken=next_token)


class FakeMounter:
    """Records binds by canonical target instead of making them; ``fail`` makes the next bind
    raise. Like the real mounter it refuses a target that is not a directory (a symlink)."""

    def __init__(self) -> None:
        self.mounted: dict[str, list[str]] = {}
        self.fail: BaseException | None = None

    def bind_readonly(
        self, source: str, target: targets.Target, *, readonly_source: bool = False
    ) -> None:
        if self.fail is not None:
            err, self.fail = self.fail, None
            raise err
        os.close(target.open_directory())
        self.mounted.setdefault(target.path, []).append(source)

    def unmount(self, target: targets.Target) -> bool:
        stack = self.mounted.get(target.path)
        if not stack:
            return False
        stack.pop()
        if not stack:
            del self.mounted[target.path]
        return True

    def make_view(self, source: str, target: targets.Target) -> bool:
        return False  # binds from the tree itself, as the real mounter does without a view


Events = asyncio.Queue[tuple[str, dict[str, Any]]]


class FakeStoreApi:
    """``nodestore.source.StoreApi`` in memory: one NodeModelStore, ConfigMaps, recorded status
    writes. ``put``/``delete``/``put_config_map`` change them as the worker would, feeding the
    open watches."""

    def __init__(self) -> None:
        self.store: dict[str, Any] | None = None
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[dict[str, Any]] = []
        self.version = 1
        self.fail_writes: BaseException | None = None
        self.fail_lists = 0
        """How many of the next lists of the object fail (connection refused)."""
        self._store_watchers: list[Events] = []
        self._cm_watchers: dict[tuple[str, str], list[Events]] = {}

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return obj

    def put(self, obj: dict[str, Any]) -> None:
        kind = "ADDED" if self.store is None else "MODIFIED"
        self.store = self._bump(obj)
        for queue in self._store_watchers:
            queue.put_nowait((kind, self.store))

    def roll(self, obj: dict[str, Any] | None, error: BaseException) -> None:
        """The server's store went back (an empty one, an older copy): the object is now
        ``obj`` with no event for it, and every open watch of it fails with ``error`` (the
        410 or 504 such a server answers)."""
        self.store = self._bump(obj) if obj is not None else None
        for queue in self._store_watchers:
            queue.put_nowait(error)

    def delete(self) -> None:
        gone, self.store = self.store, None
        if gone is not None:
            for queue in self._store_watchers:
                queue.put_nowait(("DELETED", gone))

    def put_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None:
        kind = "MODIFIED" if (namespace, name) in self.config_maps else "ADDED"
        cm = self._bump({"metadata": {"name": name, "namespace": namespace}, "data": data})
        self.config_maps[(namespace, name)] = cm
        for queue in self._cm_watchers.get((namespace, name), []):
            queue.put_nowait((kind, cm))

    async def list_store(self, name: str) -> tuple[dict[str, Any] | None, str]:
        if self.fail_lists:
            self.fail_lists -= 1
            raise kube.ConnectionFailed(0, "ConnectionFailed", "connection refused")
        found = self.store if self.store and self.store["metadata"]["name"] == name else None
        return found, str(self.version)

    async def watch_store(self, name: str, resource_version: str
                          ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        queue: Events = asyncio.Queue()
        self._store_watchers.append(queue)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._store_watchers.remove(queue)

    async def write_status(self, name: str, status: dict[str, Any]) -> None:
        if self.fail_writes is not None:
            raise self.fail_writes
        if self.store is None:
            raise kube.NotFound(404, "NotFound", f"nodemodelstores {name!r} not found")
        self.writes.append(status)
        # Like the server, a status write is a change of the object its watchers see.
        self.store = self._bump(dict(self.store, status=status))
        for queue in self._store_watchers:
            queue.put_nowait(("MODIFIED", self.store))

    async def list_config_map(self, namespace: str, name: str
                              ) -> tuple[dict[str, Any] | None, str]:
        return self.config_maps.get((namespace, name)), str(self.version)

    async def watch_config_map(self, namespace: str, name: str, resource_version: str
                               ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        queue: Events = asyncio.Queue()
        self._cm_watchers.setdefault((namespace, name), []).append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._cm_watchers[(namespace, name)].remove(queue)


def node_store(name: str = "node-1", *, generation: int = 1, spec: dict[str, Any] | None = None,
               uid: str = "nms-uid-1") -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1", "kind": "NodeModelStore",
        "metadata": {"name": name, "uid": uid, "generation": generation},
        "spec": spec if spec is not None else {},
    }


@contextlib.asynccontextmanager
async def started_plugin(tmp: pathlib.Path, files: dict[str, bytes], clock: Any
                         ) -> AsyncIterator[tuple[Any, FakeStoreApi, str]]:  # fmt: skip
    """A started plugin of node-1 importing ``files`` (one resolved artifact naming their
    digest), over the fake API client, the fake store API and the fake mounter: the plugin,
    the store API and the digest. Stopped on exit."""
    from nodeplugin import plugin
    from nodeplugin.materialize import local

    digest = local.write_import(tmp / "imports", files)
    client = FakeClient([page([artifact_object(digest=digest)], "3")])
    api = FakeStoreApi()
    config = plugin.Config(node_name="node-1", endpoint=f"unix://{tmp}/csi.sock",
                           root=str(tmp / "cache"), kubelet_dir=str(tmp / "kubelet"),
                           import_dir=str(tmp / "imports"))
    running = await plugin.start(config, client=client, store_api=api, clock=clock,
                                 mount=FakeMounter())
    await running.informer.wait_synced()
    await running.stock.settle()
    try:
        yield running, api, digest
    finally:
        await running.stop(0)
