"""``controllers.runtime.client.Client`` over the registry: how embedded controllers reach the API.

Every call goes through the same ``ResourceStore`` methods the HTTP routes use (strategies,
validation, the status path keeping spec and metadata), and a status write passes the same
worker-only guard, as the identity this client was built for: a fixed user and worker name, or
(``worker``) the worker identity as the server currently knows it, so a status write while the
identity is unknown is refused with the reason. Registry errors become
``controllers.runtime.errors`` here, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from apiserver import errors
from apiserver.admission import writers
from apiserver.auth import user as users
from apiserver.auth import worker as workers
from apiserver.registry import build, codec, options, selectors, store
from controllers.runtime import client as clients
from controllers.runtime import errors as controller_errors
from openapi import wire


def _translate(exc: errors.StatusError) -> controller_errors.ApiError:
    return controller_errors.from_status(exc.code, exc.message)


class RegistryClient:
    def __init__(self, registry: build.Registry, *, user: users.UserInfo | None = None,
                 worker_username: str = "",
                 worker: Callable[[], workers.WorkerIdentity] | None = None) -> None:
        self._registry = registry
        self._user = user
        fixed = workers.WorkerIdentity.configured(worker_username)
        self._worker = worker or (lambda: fixed)
        self._stores = {
            clients.MODEL_ARTIFACTS: registry.modelartifacts,
            clients.NODE_MODEL_STORES: registry.nodemodelstores,
            clients.MODEL_PREFETCHES: registry.modelprefetches,
            clients.MODEL_STORES: registry.modelstores,
            clients.MODEL_STORE_BINDINGS: registry.modelstorebindings,
        }

    def _store(self, resource: clients.Resource) -> store.ResourceStore:
        found = self._stores.get(resource)
        if found is None:
            raise controller_errors.NotFound(f"this server does not serve {resource.plural}")
        return found

    async def list(self, resource: clients.Resource, *, namespace: str = "",
                   label_selector: str = "") -> clients.ListResult:
        try:
            opts = options.ListOptions(label_selector=selectors.parse_labels(label_selector))
            result = await self._store(resource).list(namespace, opts)
        except errors.StatusError as exc:
            raise _translate(exc) from exc
        return clients.ListResult(result.items(), str(result.revision))

    async def watch(self, resource: clients.Resource, *, resource_version: str,
                    namespace: str = "", label_selector: str = ""
                    ) -> AsyncIterator[clients.WatchEvent]:
        try:
            opts = options.WatchOptions(
                label_selector=selectors.parse_labels(label_selector),
                resource_version=resource_version, allow_bookmarks=True)
            events = self._store(resource).watch(namespace, opts)
        except errors.StatusError as exc:
            raise _translate(exc) from exc
        async for event in events:
            if event.type == "ERROR":
                status = event.status or {}
                raise controller_errors.from_status(int(status.get("code") or 500),
                                                    str(status.get("message") or ""))
            if event.type == "BOOKMARK":
                yield clients.WatchEvent(
                    "BOOKMARK", {"metadata": {"resourceVersion": str(event.revision)}})
            elif event.record is not None and event.type in ("ADDED", "MODIFIED", "DELETED"):
                yield clients.WatchEvent(event.type, codec.decode(event.record))

    async def get(self, resource: clients.Resource, namespace: str, name: str) -> wire.Obj:
        try:
            return await self._store(resource).get(namespace, name)
        except errors.StatusError as exc:
            raise _translate(exc) from exc

    async def create(self, resource: clients.Resource, obj: wire.Obj) -> wire.Obj:
        namespace, _ = clients.key_of(obj)
        try:
            return await self._store(resource).create(obj, namespace=namespace)
        except errors.StatusError as exc:
            raise _translate(exc) from exc

    async def update(self, resource: clients.Resource, obj: wire.Obj) -> wire.Obj:
        namespace, name = clients.key_of(obj)
        try:
            return await self._store(resource).update(obj, namespace=namespace, name=name)
        except errors.StatusError as exc:
            raise _translate(exc) from exc

    async def delete(self, resource: clients.Resource, namespace: str, name: str) -> None:
        try:
            await self._store(resource).delete(namespace, name)
        except errors.StatusError as exc:
            raise _translate(exc) from exc

    async def update_status(self, resource: clients.Resource, obj: wire.Obj) -> wire.Obj:
        namespace, name = clients.key_of(obj)
        try:
            resource_store = self._store(resource)
            identity = self._worker()
            who = self._user or identity.user or users.UserInfo("")
            writers.require_worker(who, identity, what=f"a {resource.kind}'s status")
            return await resource_store.update_status(obj, namespace=namespace, name=name)
        except errors.StatusError as exc:
            raise _translate(exc) from exc
