"""Leases kept in the server's own storage, for electing one controllers leader among API server
processes that share it (several replicas on one etcd, or ``--processes``) when no cluster is
configured.

``controllers.runtime.leader.LeaseApi`` over ``storage.interface.Store``: a
``coordination.k8s.io/v1`` Lease object stored as JSON at ``/leases/<namespace>/<name>``, its
storage revision serving as its resourceVersion, so create and update are compare-and-swap
exactly as on kube-apiserver.
The keys are the server's own (no API serves them). Storage failures take their Status from the
registry's one mapping (``statuses.from_storage``) and reach the elector as its client's errors.
"""

from __future__ import annotations

import orjson

from apiserver.registry import statuses
from apiserver.storage import interface
from controllers.runtime import errors
from openapi import wire

PREFIX = "/leases/"


def _key(namespace: str, name: str) -> str:
    return f"{PREFIX}{namespace}/{name}"


def _decode(record: interface.Record) -> wire.Obj:
    lease: wire.Obj = orjson.loads(record.value)
    lease.setdefault("metadata", {})["resourceVersion"] = str(record.revision)
    return lease


def _encode(lease: wire.Obj) -> tuple[str, bytes, int]:
    metadata = dict(lease.get("metadata") or {})
    version = str(metadata.pop("resourceVersion", "") or "0")
    body = orjson.dumps({**lease, "metadata": metadata})
    key = _key(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
    return key, body, int(version) if version.isdigit() else 0


def _failed(exc: interface.StorageError) -> errors.ApiError:
    status = statuses.from_storage(exc)
    return errors.from_status(status.code, status.message)


class StoreLeases:
    def __init__(self, storage: interface.Store) -> None:
        self._storage = storage

    async def get(self, namespace: str, name: str) -> wire.Obj:
        try:
            record = await self._storage.get(_key(namespace, name))
        except interface.StorageError as exc:
            raise _failed(exc) from None
        if record is None:
            raise errors.NotFound(f"lease {namespace}/{name} not found")
        return _decode(record)

    async def create(self, lease: wire.Obj) -> wire.Obj:
        key, body, _ = _encode(lease)
        try:
            return _decode(await self._storage.create(key, body))
        except interface.StorageError as exc:
            raise _failed(exc) from None

    async def update(self, lease: wire.Obj) -> wire.Obj:
        key, body, version = _encode(lease)
        try:
            return _decode(await self._storage.update(key, body, expected_revision=version))
        except interface.StorageError as exc:
            raise _failed(exc) from None
