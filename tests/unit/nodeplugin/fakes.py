"""Fakes for the node plugin's unit tests: an API client, a mounter, artifact objects."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

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
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Resolved", "status": "True" if resolved else "False",
             "reason": "Resolved" if resolved else "Resolving"}
        ]
    }
    if resolved:
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

    def bind_readonly(self, source: str, target: targets.Target) -> None:
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
