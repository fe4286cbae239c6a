"""The revision mark kept in kube-apiserver (``storage.marks.Mark``): an annotation of the
controllers' Lease in the server's namespace (``--leader-elect-lease-name``, created when
absent), which outlives the server's Pod and its volumes (an emptyDir store). RBAC: the chart's
``leases`` create, get and update on that one Lease, which the leader election uses too (it keeps
the annotation: it updates the Lease as read). And the Event a fence is told with, about that
Lease (``events`` create).

Conflicts with the leader election's renewals are read again and retried; the mark is only ever
raised.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources import coordination_v1, core_v1

import kube
from apiserver.storage import interface, marks
from timing import backoff as backoffs

log = logging.getLogger(__name__)

ANNOTATION = "worker.gpustack.ai/revision-mark"
"""The Lease annotation holding the mark (a decimal revision)."""
ATTEMPTS = 5
"""Reads and writes of the Lease per raise (a conflict with a renewal reads it again)."""
START_TIMEOUT = 30.0
"""How long the first read waits for kube-apiserver (the server does not start without it)."""
START_RETRY = backoffs.Backoff(0.2, 2.0)
"""The first read's retries until then: 0.2 s doubling to 2 s."""
COMPONENT = "model-manager-apiserver"
REASON = "StoreWentBack"


class LeaseMark:
    def __init__(self, client: kube.Client, *, namespace: str, name: str,
                 start_timeout: float = START_TIMEOUT) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name
        self.where = f"Lease {namespace}/{name}"
        self._start_timeout = start_timeout

    async def read(self) -> int:
        deadline = time.monotonic() + self._start_timeout
        failures = 0
        while True:
            try:
                return _mark_of(await self.lease())
            except (kube.ServerError, kube.ConnectionFailed) as exc:
                failures += 1
                delay = START_RETRY.delay(failures)
                if time.monotonic() + delay > deadline:
                    raise interface.Unavailable(
                        f"cannot read the revision mark on {self.where}: {exc}") from exc
                await asyncio.sleep(delay)
            except kube.KubeError as exc:
                raise interface.StorageError(
                    f"cannot read the revision mark on {self.where}: {exc}") from exc

    async def write(self, revision: int) -> None:
        try:
            for _ in range(ATTEMPTS):
                lease = await self.lease()
                if lease is None:
                    created = coordination_v1.Lease(metadata=ObjectMeta(
                        name=self.name, namespace=self.namespace,
                        annotations={ANNOTATION: str(revision)}))
                    try:
                        await self._client.create(created)
                        return
                    except kube.AlreadyExists:
                        continue
                if _mark_of(lease) >= revision:
                    return
                metadata = lease.metadata or ObjectMeta()
                metadata.annotations = {**(metadata.annotations or {}),
                                        ANNOTATION: str(revision)}
                lease.metadata = metadata
                try:
                    await self._client.replace(lease)
                    return
                except kube.Conflict:
                    continue
        except kube.KubeError as exc:
            raise interface.StorageError(
                f"cannot record the revision mark on {self.where}: {exc}") from exc
        raise interface.StorageError(
            f"cannot record the revision mark on {self.where}: {ATTEMPTS} conflicts in a row")

    async def lease(self) -> coordination_v1.Lease | None:
        """The Lease, None when there is none."""
        try:
            return await self._client.get(coordination_v1.Lease, self.name,
                                          namespace=self.namespace)
        except kube.NotFound:
            return None


def _mark_of(lease: coordination_v1.Lease | None) -> int:
    annotations = (lease.metadata.annotations if lease and lease.metadata else None) or {}
    try:
        return max(0, int(annotations.get(ANNOTATION, "0")))
    except ValueError:
        return 0


async def tell(client: kube.Client, mark: LeaseMark, fence: marks.Fence) -> None:
    """A Warning Event about the Lease that held the mark: ``kubectl get events`` in the
    server's namespace shows that the store went back (failures are logged, nothing more)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        lease = await mark.lease()
    except kube.KubeError:
        lease = None
    meta = lease.metadata if lease is not None and lease.metadata else ObjectMeta()
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{mark.name}.{secrets.token_hex(8)}",
                     "namespace": mark.namespace},
        "involvedObject": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "name": mark.name, "namespace": mark.namespace,
                           "uid": meta.uid or "", "resourceVersion": meta.resourceVersion or ""},
        "reason": REASON, "message": fence.describe(), "type": "Warning",
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
    try:
        await client.create(core_v1.Event.from_dict(body))  # type: ignore[type-var]
    except kube.KubeError as exc:
        log.warning("could not record the Event of the fence (%s %s)", exc.code, exc.reason)
