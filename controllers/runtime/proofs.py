"""The worker's record of what the hub verified, per namespace and digest (the "before" of an
anchor's proof, ``controllers/resolver/anchoring.py``).

Each time an artifact resolves or revalidates from the hub's own listing, the worker writes
``(namespace, digest) -> (artifact, uid, verified time)``. The record outlives the artifact, so
an artifact anchored to that digest in that namespace may still resolve to its anchor after the
hub-verified one was deleted (within the revalidation interval of its last verification, the
same freshness a live artifact has between two checks). Only the worker writes it, somewhere no
client can: the API server keeps it in its own storage under keys no API serves
(``apiserver/wiring/proofs.py``); ``python -m controllers`` keeps it in memory (``InMemory``),
for as long as the process runs.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Protocol

from openapi import wire
from timing import clock as clocks


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    namespace: str
    digest: str
    artifact: str
    """The name of the artifact the hub verified."""
    uid: str
    verified: datetime.datetime
    """When the hub last confirmed it (``status.resolved.lastValidatedTime``)."""

    def to_json(self) -> wire.Obj:
        return {"namespace": self.namespace, "digest": self.digest, "artifact": self.artifact,
                "uid": self.uid, "verifiedTime": clocks.rfc3339(self.verified)}

    @classmethod
    def from_json(cls, found: wire.Obj) -> Record | None:
        """The record, None when ``found`` is not one (a foreign or damaged value)."""
        verified = clocks.parse(found.get("verifiedTime"))
        fields = [found.get(k) for k in ("namespace", "digest", "artifact", "uid")]
        if verified is None or not all(isinstance(f, str) and f for f in fields):
            return None
        namespace, digest, artifact, uid = (str(f) for f in fields)
        return cls(namespace, digest, artifact, uid, verified)


class Ledger(Protocol):
    """Where the records are kept; raises ``controllers.runtime.errors.ApiError`` when it cannot
    say."""

    async def read(self, namespace: str, digest: str) -> Record | None: ...

    async def write(self, record: Record) -> None:
        """Keep ``record`` for its namespace and digest, replacing the one there unless that
        one was verified later."""
        ...

    async def delete(self, namespace: str, digest: str, uid: str) -> None:
        """Drop the record of that namespace and digest if artifact ``uid`` made it."""
        ...


class InMemory:
    """A ``Ledger`` in this process only (``python -m controllers``, tests)."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], Record] = {}

    async def read(self, namespace: str, digest: str) -> Record | None:
        return self.records.get((namespace, digest))

    async def write(self, record: Record) -> None:
        kept = self.records.get((record.namespace, record.digest))
        if kept is None or kept.verified <= record.verified:
            self.records[(record.namespace, record.digest)] = record

    async def delete(self, namespace: str, digest: str, uid: str) -> None:
        found = self.records.get((namespace, digest))
        if found is not None and found.uid == uid:
            del self.records[(namespace, digest)]
