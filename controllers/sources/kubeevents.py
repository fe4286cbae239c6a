"""Events in a cluster: ``core/v1`` Events about a ModelArtifact, in its namespace, as
``model-manager-worker`` (``kubectl describe mart`` and ``kubectl get events`` show them).

Recording never blocks a reconcile: the write runs as a task, and a failure (RBAC, the API down)
is logged and dropped; an Event is a courtesy, status is the record.
"""

from __future__ import annotations

import asyncio
import logging
import secrets as random

from lightkube.resources import core_v1

import kube
from controllers.runtime import events
from openapi import install, resources, wire
from timing import clock as clocks

log = logging.getLogger(__name__)

COMPONENT = install.WORKER_SERVICE_ACCOUNT
MESSAGE_LIMIT = 1024


class KubeRecorder:
    def __init__(self, client: kube.Client, clock: clocks.Clock) -> None:
        self._client = client
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    def record(self, obj: wire.Obj, kind: events.Kind, reason: str, message: str) -> None:
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata.get("name") or "")
        now = clocks.rfc3339(self._clock.now())
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{random.token_hex(8)}", "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion", resources.GROUP_VERSION),
                               "kind": obj.get("kind", "ModelArtifact"), "name": name,
                               "namespace": namespace, "uid": metadata.get("uid", ""),
                               "resourceVersion": metadata.get("resourceVersion", "")},
            "reason": reason, "message": message[:MESSAGE_LIMIT], "type": kind,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        task = asyncio.create_task(self._write(body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, body: wire.Obj) -> None:
        try:
            await self._client.create(core_v1.Event.from_dict(body))  # type: ignore[type-var]
        except kube.KubeError as exc:
            log.info("could not record an Event (%s %s)", exc.code, exc.reason)

    async def flush(self) -> None:
        """Wait for the Events being written (a stop waits for them)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)
