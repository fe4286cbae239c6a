"""Delivery in a cluster: one warm-up Pod per target node (``prefetches.Delivery``).

The Pod mounts the artifact's own CSI volume (driver ``model.csi.gpustack.ai``, the attributes a
consumer's volume carries: ``artifact``, ``artifactUID``, ``manifestDigest``, and the artifact's
Secret as ``nodePublishSecretRef``), so the node cache downloads, verifies and publishes exactly
as for any consumer, and the plugin's mount authorization stays the one rule. It runs under a
restricted security context (non-root, no privilege escalation, every capability dropped,
RuntimeDefault seccomp, read-only root, no ServiceAccount token), reads every file back and
exits. It lives in the prefetch's namespace and is owned by the prefetch (``ownerReferences``,
so deleting the prefetch collects it). Its image is a setting (``--prefetch-warmup-image``).

Where it goes is ``placement.py``'s: node affinity to its one node (never ``spec.nodeName``), so
kube-scheduler's filters hold (taints, cordons, resources), and only the plugin DaemonSet's keyed
tolerations; a node the plugin cannot run on, or whose taints those do not cover, gets no Pod
(``TaintNotTolerated``), nor one without a plugin Pod now (``Pending/NoNodePlugin``).

A Pod that succeeded is left as it is (the node is not warmed again while it exists). One that
failed (``Failed/DeliveryFailed`` with its reason) or that the scheduler cannot place
(``Failed/Unschedulable`` with the scheduler's message) is reported, and deleted after
``--prefetch-warmup-retry-interval`` (default five minutes) so a later pass makes a fresh one
(with the tolerations and taints of then).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from controllers import config as settings
from controllers.prefetches import placement
from controllers.prefetches import plan as prefetchplan
from controllers.runtime import informer
from openapi import keys, reasons, resources, volume, wire
from timing import clock as clocks

log = logging.getLogger(__name__)

SELECTOR = keys.WARMUP_SELECTOR
MOUNT = "/model"
READ_BACK = f"find {MOUNT} -type f -exec sha256sum {{}} + > /dev/null"

Create = Callable[[wire.Obj], Awaitable[wire.Obj]]
Delete = Callable[[str, str], Awaitable[None]]


class Placement(Protocol):
    async def synced(self) -> None: ...

    def tolerations(self, node: str) -> list[wire.Obj] | prefetchplan.Hold:
        """The tolerations a warm-up Pod on ``node`` carries, or why it gets none."""
        ...


def pod_name(prefetch: str, node: str) -> str:
    """``<prefetch>-warmup-<10 hex of the node>``: stable per (prefetch, node), at most 63."""
    tail = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"{prefetch[:45].rstrip('-.')}-warmup-{tail}"


def render(prefetch: wire.Obj, artifact: prefetchplan.Artifact, node: str, image: str,
           tolerations: Sequence[wire.Obj] = ()) -> wire.Obj:
    metadata = prefetch["metadata"]
    attributes = volume.attributes(prefetchplan.artifact_name(prefetch), artifact.uid,
                                   artifact.digest)
    csi: wire.Obj = {"driver": volume.DRIVER, "readOnly": True, "volumeAttributes": attributes}
    if artifact.secret:
        csi["nodePublishSecretRef"] = {"name": artifact.secret}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(metadata["name"], node),
            "namespace": metadata["namespace"],
            "labels": {keys.COMPONENT: keys.WARMUP, keys.MANAGED_BY: keys.APP,
                       keys.PREFETCH_UID: metadata["uid"]},
            "ownerReferences": [{
                "apiVersion": resources.GROUP_VERSION, "kind": resources.MODEL_PREFETCH.kind,
                "name": metadata["name"], "uid": metadata["uid"], "controller": True,
                "blockOwnerDeletion": False}],
        },
        "spec": {
            "affinity": placement.affinity(node),
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [dict(t) for t in tolerations],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            # keyword form: the string "image" is spelled only as a source kind (openapi.sources)
            "containers": [dict(
                name="warmup",
                image=image,
                command=["/bin/sh", "-c", READ_BACK],
                securityContext={"allowPrivilegeEscalation": False,
                                 "readOnlyRootFilesystem": True,
                                 "capabilities": {"drop": ["ALL"]}},
                resources={"requests": {"cpu": "10m", "memory": "16Mi"},
                           "limits": {"memory": "64Mi"}},
                volumeMounts=[{"name": "model", "mountPath": MOUNT, "readOnly": True}],
            )],
            "volumes": [{"name": "model", "csi": csi}],
        },
    }


def failure(pod: wire.Obj) -> str:
    """Why the Pod failed, empty while it has not."""
    status = pod.get("status") or {}
    if status.get("phase") != "Failed":
        return ""
    why = str(status.get("reason") or status.get("message") or "")
    for container in status.get("containerStatuses") or []:
        ended = ((container or {}).get("state") or {}).get("terminated") or {}
        if ended:
            why = why or f"exit code {ended.get('exitCode')}"
            why += f" ({ended.get('reason')})" if ended.get("reason") else ""
    return f"warm-up Pod {(pod.get('metadata') or {}).get('name')} failed: {why or 'unknown'}"


class WarmupPods:
    """``Delivery`` over the warm-up Pods' informer (every namespace, ``SELECTOR``) and where
    the plugin runs (``placement.PluginPlacement``)."""

    def __init__(self, pods: informer.Informer, create: Create, delete: Delete,
                 clock: clocks.Clock, where: Placement, *,
                 image: str = settings.DEFAULT_WARMUP_IMAGE,
                 retry_seconds: float = settings.DEFAULT_WARMUP_RETRY) -> None:
        self._pods = pods
        self._create = create
        self._delete = delete
        self._clock = clock
        self._where = where
        self.image = image
        self.retry_seconds = retry_seconds
        self._failed_at: dict[tuple[str, str], float] = {}

    async def warm(self, prefetch: wire.Obj, artifact: prefetchplan.Artifact,
                   nodes: Sequence[str]) -> Mapping[str, prefetchplan.Hold]:
        await self._pods.synced.wait()
        await self._where.synced()
        namespace = prefetchplan.namespace(prefetch)
        uid = str(prefetch["metadata"].get("uid") or "")
        held: dict[str, prefetchplan.Hold] = {}
        for node in nodes:
            name = pod_name(prefetch["metadata"]["name"], node)
            found = self._pods.get(namespace, name)
            owner = ((found or {}).get("metadata") or {}).get("labels") or {}
            if found is not None and owner.get(keys.PREFETCH_UID) != uid:
                continue  # an earlier prefetch of that name: its Pod goes with it
            if found is None:
                tolerations = self._where.tolerations(node)
                if isinstance(tolerations, prefetchplan.Hold):
                    held[node] = tolerations
                    continue
                await self._start(render(prefetch, artifact, node, self.image, tolerations),
                                  node)
                continue
            why = failure(found)
            hold = prefetchplan.failed(why) if why else None
            refused = placement.scheduling_failure(found)
            if refused:
                hold = prefetchplan.Hold(reasons.UNSCHEDULABLE, f"warm-up Pod {name} cannot be "
                                         f"scheduled on {node}: {refused}")
            if hold is not None:
                held[node] = hold
                await self._retry_later((namespace, name))
            else:
                self._failed_at.pop((namespace, name), None)
        return held

    async def _start(self, pod: wire.Obj, node: str) -> None:
        try:
            await self._create(pod)
            log.info("warm-up Pod %s/%s created for %s", pod["metadata"]["namespace"],
                     pod["metadata"]["name"], node)
        except Exception as exc:  # already there (the informer lags) or refused: next pass
            log.info("warm-up Pod %s/%s not created: %s", pod["metadata"]["namespace"],
                     pod["metadata"]["name"], getattr(exc, "message", exc))

    async def _retry_later(self, key: tuple[str, str]) -> None:
        now = self._clock.monotonic()
        first = self._failed_at.setdefault(key, now)
        if now - first >= self.retry_seconds:
            self._failed_at.pop(key, None)
            try:
                await self._delete(*key)
            except Exception as exc:
                log.info("failed warm-up Pod %s/%s not deleted: %s", *key,
                         getattr(exc, "message", exc))
