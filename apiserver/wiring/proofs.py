"""The worker's record of the hub's verifications (``controllers.runtime.proofs.Ledger``), kept
in the server's own storage for the embedded controllers.

One JSON value per namespace and digest at ``/anchorproofs/<namespace>/<digest hex>``: keys no
API serves, so no client reads or writes them (as ``leases.py``'s). Writes are compare-and-swap
on the storage revision, retried a few times against a racing writer (another leader's last
pass), and never replace a later verification with an older one. A storage failure reaches the
resolver as its client's error, and the record is written again with the artifact's next pass.
"""

from __future__ import annotations

import orjson

from apiserver.registry import statuses
from apiserver.storage import interface
from controllers.runtime import errors, proofs

PREFIX = "/anchorproofs/"
ATTEMPTS = 3


def key(namespace: str, digest: str) -> str:
    return f"{PREFIX}{namespace}/{digest.removeprefix('sha256:')}"


def _failed(exc: interface.StorageError) -> errors.ApiError:
    status = statuses.from_storage(exc)
    return errors.from_status(status.code, status.message)


def _decode(record: interface.Record) -> proofs.Record | None:
    try:
        found = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        return None
    return proofs.Record.from_json(found) if isinstance(found, dict) else None


class StoreLedger:
    def __init__(self, storage: interface.Store) -> None:
        self._storage = storage

    async def _get(self, namespace: str, digest: str) -> interface.Record | None:
        try:
            return await self._storage.get(key(namespace, digest))
        except interface.StorageError as exc:
            raise _failed(exc) from None

    async def read(self, namespace: str, digest: str) -> proofs.Record | None:
        found = await self._get(namespace, digest)
        return None if found is None else _decode(found)

    async def write(self, record: proofs.Record) -> None:
        value = orjson.dumps(record.to_json())
        where = key(record.namespace, record.digest)
        for _ in range(ATTEMPTS):
            found = await self._get(record.namespace, record.digest)
            kept = None if found is None else _decode(found)
            if kept is not None and kept.verified > record.verified:
                return  # a later verification (another artifact's) is there already
            try:
                if found is None:
                    await self._storage.create(where, value)
                elif found.value != value:
                    await self._storage.update(where, value, expected_revision=found.revision)
                return
            except (interface.KeyExists, interface.RevisionConflict, interface.KeyNotFound):
                continue
            except interface.StorageError as exc:
                raise _failed(exc) from None
        raise errors.Conflict(f"the record {where} kept changing; written with the next pass")

    async def delete(self, namespace: str, digest: str, uid: str) -> None:
        found = await self._get(namespace, digest)
        record = None if found is None else _decode(found)
        if found is None or (record is not None and record.uid != uid):
            return
        try:
            await self._storage.delete(found.key, expected_revision=found.revision)
        except (interface.KeyNotFound, interface.RevisionConflict):
            return  # gone, or rewritten by a newer verification: nothing of uid's to drop
        except interface.StorageError as exc:
            raise _failed(exc) from None
