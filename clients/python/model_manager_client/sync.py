"""``SyncModelManager``: ``ModelManager``'s calls, blocking, on an event loop of its own in a
worker thread, so it works from plain code and from inside a running event loop alike (the
calling loop waits for the call)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from model_manager_client import client, types

T = TypeVar("T")


class SyncModelManager:
    def __init__(self, connect: Callable[[], Awaitable[client.ModelManager]]) -> None:
        """``connect``: builds the async client, on this object's loop (e.g.
        ``lambda: ModelManager.from_kubeconfig(path)``); see the classmethods."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="model-manager client")
        self._thread.start()
        try:
            self._async = self._call(connect())
        except BaseException:
            self._stop()
            raise

    @classmethod
    def from_kubeconfig(cls, path: str | None = None,
                        context: str | None = None) -> SyncModelManager:
        return cls(lambda: client.ModelManager.from_kubeconfig(path, context))

    @classmethod
    def from_url(cls, server: str, *, token: str | None = None,
                 ca_file: str | None = None) -> SyncModelManager:
        async def connect() -> client.ModelManager:
            return client.ModelManager.from_url(server, token=token, ca_file=ca_file)

        return cls(connect)

    def _call(self, work: Awaitable[T]) -> T:
        async def run() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self) -> None:
        try:
            self._call(self._async.close())
        finally:
            self._stop()

    def __enter__(self) -> SyncModelManager:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def ensure_artifact(self, namespace: str, name: str, source: Mapping[str, Any],
                        **options: Any) -> types.Artifact:
        return self._call(self._async.ensure_artifact(namespace, name, source, **options))

    def get_artifact(self, namespace: str, name: str) -> types.Artifact:
        return self._call(self._async.get_artifact(namespace, name))

    def delete_artifact(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        self._call(self._async.delete_artifact(namespace, name, cleanup=cleanup))

    def wait_resolved(self, namespace: str, name: str, timeout: float) -> types.Artifact:
        return self._call(self._async.wait_resolved(namespace, name, timeout))

    def copies(self, namespace: str, name: str) -> types.Copies:
        return self._call(self._async.copies(namespace, name))

    def manifest(self, namespace: str, name: str) -> types.Manifest:
        return self._call(self._async.manifest(namespace, name))

    def wait_ready(self, namespace: str, name: str, *, nodes: Sequence[str],
                   timeout: float) -> types.Copies:
        return self._call(self._async.wait_ready(namespace, name, nodes=nodes,
                                                 timeout=timeout))
