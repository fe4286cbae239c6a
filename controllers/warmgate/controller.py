"""Release a gated Pod once nodes hold every digest it mounts (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Protocol

from controllers.runtime import client as clients
from controllers.runtime import controller as runtime
from controllers.runtime import errors, events, informer
from openapi import keys, placement, podvolumes, reasons, warmgate, wire
from openapi.kinds import modelartifact
from timing import clock as clocks

log = logging.getLogger(__name__)

Key = tuple[str, str]
DIGEST_INDEX: Final = "digest"
ARTIFACT_INDEX: Final = "artifact"
RECHECK_SECONDS: Final = 30.0
"""How often a waiting Pod is looked at again even if nothing it is indexed by changed."""


class Warm(Protocol):
    def warm_nodes(self, digest: str) -> list[str]: ...


class Index(Protocol):
    def subscribe(self, listener: Callable[[str], None]) -> None: ...


class Pods(Protocol):
    async def patch_pod(self, namespace: str, name: str, operations: list[wire.Obj]) -> None: ...


def _digests(pod: wire.Obj) -> list[str]:
    return podvolumes.digests(pod)


def _artifacts(pod: wire.Obj) -> list[str]:
    namespace = wire.text(pod, "metadata", "namespace")
    return list(dict.fromkeys(f"{namespace}/{v.artifact}"
                              for v in podvolumes.model_volumes(pod) if v.artifact))


def _as_pod(pod: wire.Obj) -> wire.Obj:
    """The Pod as an Event's involvedObject names it (a listed item may carry no kind)."""
    return {**pod, "apiVersion": "v1", "kind": "Pod"}


class WarmGate:
    name = "warmgate"

    def __init__(self, pods: informer.Informer, patcher: Pods, warm: Warm,
                 index: Index, artifacts: informer.Informer, recorder: events.Recorder,
                 clock: clocks.Clock, *, concurrency: int = 2) -> None:
        self._pods = pods
        self._patcher = patcher
        self._warm = warm
        self._artifacts = artifacts
        self._recorder = recorder
        self._told: dict[str, str] = {}
        """Pod UID -> the last reason its Event gave (one Event per reason, not per look)."""
        self.released = 0
        self.controller: runtime.Controller[Key] = runtime.Controller(
            "warmgate", self.reconcile, clock, keys=pods.keys, concurrency=concurrency)
        pods.add_index(DIGEST_INDEX, _digests)
        pods.add_index(ARTIFACT_INDEX, _artifacts)
        pods.add_handler(self._pod_changed)
        artifacts.add_handler(self._artifact_changed)
        index.subscribe(self._digest_changed)

    async def run(self) -> None:
        await self.controller.run()

    def stop(self) -> None:
        self.controller.stop()

    def _pod_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        if new is None:
            self._told.pop(wire.text(old, "metadata", "uid"), None)
            return
        self.controller.enqueue(clients.key_of(new))

    def _digest_changed(self, digest: str) -> None:
        for key in self._pods.index_keys(DIGEST_INDEX, digest):
            self.controller.enqueue(key)

    def _artifact_changed(self, old: wire.Obj | None, new: wire.Obj | None) -> None:
        namespace, name = clients.key_of(new or old or {})
        for key in self._pods.index_keys(ARTIFACT_INDEX, f"{namespace}/{name}"):
            self.controller.enqueue(key)

    def _tell(self, pod: wire.Obj, kind: events.Kind, reason: str, message: str) -> None:
        uid = wire.text(pod, "metadata", "uid")
        said = f"{reason}: {message}"
        if self._told.get(uid) == said:
            return
        self._told[uid] = said
        self._recorder.record(_as_pod(pod), kind, reason, message)

    def _gone(self, pod: wire.Obj) -> str:
        """Why an artifact a model volume names cannot be mounted now; ``""`` when none is."""
        namespace = wire.text(pod, "metadata", "namespace")
        for each in podvolumes.model_volumes(pod):
            if not each.artifact:
                continue
            found = self._artifacts.get(namespace, each.artifact)
            if found is None or found["metadata"].get("deletionTimestamp"):
                return f"ModelArtifact {each.artifact!r} is gone"
            uid = wire.text(found, "metadata", "uid")
            if each.artifact_uid and uid != each.artifact_uid:
                return (f"ModelArtifact {each.artifact!r} was re-created (UID {uid}, the volume "
                        f"names {each.artifact_uid})")
            if each.manifest_digest and modelartifact.manifest_digest(found) not in (
                    "", each.manifest_digest):
                return (f"ModelArtifact {each.artifact!r} now resolves to another digest than "
                        f"the volume's {each.manifest_digest}")
        return ""

    async def reconcile(self, key: Key) -> runtime.Result:
        pod = self._pods.get(*key)
        if pod is None or not warmgate.gated(pod) or pod["metadata"].get("deletionTimestamp"):
            return runtime.DONE
        gone = self._gone(pod)
        if gone:
            self._tell(pod, "Warning", reasons.MODEL_ARTIFACT_GONE,
                       f"{gone}: the Pod stays gated by {keys.WARM_NODE_GATE} (delete it, or "
                       "create it again naming an artifact that exists)")
            return runtime.DONE
        digests = podvolumes.digests(pod)
        held = [(digest, self._warm.warm_nodes(digest)) for digest in digests]
        cold = [digest for digest, nodes in held if not nodes]
        if cold or not digests:
            what = cold[0] if cold else "(no manifestDigest on its model volumes)"
            self._tell(pod, "Normal", reasons.WAITING_FOR_WARM_NODE,
                       f"no node holds {what} Ready yet: the Pod stays gated by "
                       f"{keys.WARM_NODE_GATE} until one does (a ModelPrefetch warms one)")
            return runtime.Result(requeue_after=RECHECK_SECONDS)
        operations = warmgate.release_patch(
            pod, [placement.expression(nodes) for _, nodes in held])
        try:
            await self._patcher.patch_pod(*key, operations)
        except errors.NotFound:
            return runtime.DONE
        except errors.ApiError as exc:
            if exc.code in (409, 422):  # changed since read (the tests of the patch): look again
                log.info("warmgate: %s/%s changed while being released; looking again", *key)
                return runtime.Result(retry=True)
            raise
        self.released += 1
        nodes = sorted({node for _, found in held for node in found})
        self._tell(pod, "Normal", reasons.WARM_NODE_FOUND,
                   f"released to the nodes holding its model now: {', '.join(nodes[:8])}"
                   + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else ""))
        return runtime.DONE
