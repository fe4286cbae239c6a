"""What the GPUStack server asks of model-manager, as typed helpers over the one ``kube.Client``.

``ModelManager`` (async) and ``SyncModelManager`` (the same calls, blocking, for code without an
event loop): create an artifact from a source, wait until it is resolved (with a timeout), read
its progress, list the node stores and the nodes that hold a digest, delete an artifact, create
and delete a prefetch, and give the volume and the node-affinity term for a Pod that mounts an
artifact (``placement``, by the Pod webhook's own rules: ``kube/placement.py``). Every call goes
through ``kube.Client``, so it uses the caller's kubeconfig and RBAC, and fails with the
product's typed errors (``kube.NotFound``, ``kube.Forbidden``, ``kube.Invalid`` ... and
``ResolutionTimeout`` here, ``placement.NotMountable``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from lightkube.resources import storage_v1

from kube import client as clients
from kube import errors, resources
from kube import placement as placements
from openapi import resources as contract
from openapi import sources, states, wire
from openapi.kinds import modelartifact, nodemodelstore

HubKind = sources.HubKind
RETRY_SECONDS = 1.0
"""``wait_resolved``: how long it waits after the server could not be reached, then reads the
artifact again."""


@dataclasses.dataclass(frozen=True, slots=True)
class HubSource:
    """A Hugging Face or ModelScope repository (``revision`` empty: the hub's default branch)."""

    kind: HubKind
    repository: str
    revision: str = ""
    secret_name: str = ""

    def spec(self) -> wire.Obj:
        member: wire.Obj = {"repository": self.repository}
        if self.revision:
            member["revision"] = self.revision
        if self.secret_name:
            member["secretRef"] = {"name": self.secret_name}
        return {self.kind: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimSource:
    claim_name: str
    path: str = ""

    def spec(self) -> wire.Obj:
        member: wire.Obj = {"claimName": self.claim_name}
        if self.path:
            member["path"] = self.path
        return {sources.CLAIM: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSource:
    reference: str
    """Pinned by digest (``name@sha256:...``)."""

    def spec(self) -> wire.Obj:
        return {sources.IMAGE: {"reference": self.reference}}


Source = HubSource | ClaimSource | ImageSource


@dataclasses.dataclass(frozen=True, slots=True)
class PrefetchSpec:
    """A ModelPrefetch's spec: warm ``artifact`` (same namespace) on the nodes named and those
    ``node_selector`` matches; ``min_ready`` Ready nodes make it Available (0: every target);
    ``pinned`` keeps the copies against collection while the prefetch exists, until a copy went
    unused for ``ttl_after_last_use`` (a duration such as ``72h``; empty: no limit)."""

    artifact: str
    node_names: tuple[str, ...] = ()
    node_selector: Mapping[str, str] | None = None
    min_ready: int = 0
    pinned: bool = True
    ttl_after_last_use: str = ""

    def spec(self) -> wire.Obj:
        targets: wire.Obj = {}
        if self.node_names:
            targets["nodeNames"] = list(self.node_names)
        if self.node_selector is not None:
            targets["nodeSelector"] = dict(self.node_selector)
        if self.min_ready:
            targets["minReady"] = self.min_ready
        retention: wire.Obj = {"pinned": self.pinned}
        if self.ttl_after_last_use:
            retention["ttlAfterLastUse"] = self.ttl_after_last_use
        return {"artifactRef": {"name": self.artifact}, "targets": targets,
                "retention": retention}


@dataclasses.dataclass(frozen=True, slots=True)
class Artifact:
    """A ModelArtifact as the GPUStack server reads it."""

    namespace: str
    name: str
    uid: str
    resolved: bool
    reason: str
    """The Resolved condition's reason (``Resolving``, ``AccessDenied`` ...), empty before any."""
    message: str
    revision: str
    manifest_digest: str
    size_bytes: int
    raw: wire.Obj = dataclasses.field(repr=False, compare=False)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Artifact:
        meta = obj.get("metadata") or {}
        condition = modelartifact.resolved_condition(obj) or {}
        return cls(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""), resolved=condition.get("status") == wire.TRUE,
            reason=str(condition.get("reason") or ""),
            message=str(condition.get("message") or ""),
            revision=modelartifact.revision(obj),
            manifest_digest=modelartifact.manifest_digest(obj),
            size_bytes=modelartifact.size_bytes(obj) or 0, raw=dict(obj),
        )  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class NodeStore:
    """A node's cache as its NodeModelStore reports it."""

    node: str
    ready: bool
    total_bytes: int
    stored_bytes: int
    models: tuple[wire.Obj, ...]
    """``status.models``: each a digest, its state and sizes."""
    used_percent: int | None = None
    """``status.capacity.usedPercent`` (a multiple of 5), None before the plugin reported."""
    conditions: tuple[wire.Obj, ...] = ()
    """``status.conditions``: Ready, CapacityLow."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodeStore:
        conditions = tuple(dict(c) for c in wire.items(obj, "status", "conditions"))
        return cls(node=str((obj.get("metadata") or {}).get("name") or ""),
                   ready=nodemodelstore.ready(obj),
                   total_bytes=nodemodelstore.total_bytes(obj) or 0,
                   stored_bytes=nodemodelstore.stored_bytes(obj) or 0,
                   models=tuple(dict(m) for m in nodemodelstore.models(obj)),
                   used_percent=nodemodelstore.used_percent(obj),
                   conditions=conditions)

    def holds(self, digest: str) -> bool:
        """The node holds ``digest`` published (state Ready)."""
        found = self.entry(digest)
        return found is not None and nodemodelstore.entry_state(found) == states.READY

    def entry(self, digest: str) -> wire.Obj | None:
        """This node's ``status.models`` entry for ``digest`` (any state), None if unlisted."""
        return next((m for m in self.models if nodemodelstore.entry_digest(m) == digest), None)

    def condition(self, kind: str) -> wire.Obj | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)


class ResolutionTimeout(errors.KubeError):
    """The artifact was not resolved within the time given; ``artifact`` is the last seen."""

    def __init__(self, artifact: Artifact, timeout: float) -> None:
        why = f" (last: {artifact.reason}: {artifact.message[:300]})" if artifact.reason else ""
        super().__init__(0, "Timeout", f"{artifact.namespace}/{artifact.name} was not resolved"
                                       f" within {timeout:g}s{why}")
        self.artifact = artifact


def _plain(obj: Any) -> wire.Obj:
    found: wire.Obj = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return found


class ModelManager:
    """The helpers over ``api`` (a ``kube.Client``; closed by ``aclose`` only if ``owned``)."""

    def __init__(self, api: clients.Client, *, owned: bool = False) -> None:
        self.api = api
        self._owned = owned

    @classmethod
    def from_kubeconfig(cls, path: str, **options: Any) -> ModelManager:
        return cls(clients.Client.from_kubeconfig(path, **options), owned=True)

    async def aclose(self) -> None:
        if self._owned:
            await self.api.aclose()

    async def __aenter__(self) -> ModelManager:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def create_artifact(
        self, namespace: str, name: str, source: Source, *,
        allow_patterns: Sequence[str] = (), ignore_patterns: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
    ) -> Artifact:  # fmt: skip
        spec: wire.Obj = {"source": source.spec()}
        if allow_patterns:
            spec["allowPatterns"] = list(allow_patterns)
        if ignore_patterns:
            spec["ignorePatterns"] = list(ignore_patterns)
        metadata: wire.Obj = {"name": name, "namespace": namespace}
        if labels:
            metadata["labels"] = dict(labels)
        body = {"apiVersion": contract.GROUP_VERSION, "kind": contract.MODEL_ARTIFACT.kind,
                "metadata": metadata, "spec": spec}
        created = await self.api.create(resources.ModelArtifact.from_dict(body),
                                        namespace=namespace)
        return Artifact.of(_plain(created))

    async def get_artifact(self, namespace: str, name: str) -> Artifact:
        return Artifact.of(_plain(await self.api.get(resources.ModelArtifact, name,
                                                     namespace=namespace)))

    async def delete_artifact(self, namespace: str, name: str) -> None:
        await self.api.delete(resources.ModelArtifact, name, namespace=namespace)

    async def list_artifacts(self, namespace: str = "*") -> list[Artifact]:
        """The artifacts of ``namespace`` (``"*"``: every namespace, which needs a cluster-wide
        list grant)."""
        listed = await self.api.list(resources.ModelArtifact, namespace=namespace)
        return [Artifact.of(_plain(obj)) for obj in listed.items]

    async def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        """The artifact once its Resolved condition is True; ``ResolutionTimeout`` after
        ``timeout`` seconds (a failure the worker retries is waited through, as it may pass).
        It watches from the version it read; when that version cannot be served (410: compacted,
        or from before the server's store went back; 504 "Too large resource version") or the
        server cannot be reached for a while (it restarts), it reads the artifact again and
        watches from there."""
        last = await self.get_artifact(namespace, name)
        if last.resolved:
            return last
        try:
            async with asyncio.timeout(timeout):
                while True:
                    version = str(last.raw.get("metadata", {}).get("resourceVersion") or "")
                    stream = self.api.watch(resources.ModelArtifact, namespace=namespace,
                                            fields={"metadata.name": name},
                                            resource_version=version or None)
                    try:
                        async for kind, obj in stream:
                            if kind == "DELETED":
                                raise errors.NotFound(404, "NotFound",
                                                      f"{namespace}/{name} was deleted")
                            if kind in ("ADDED", "MODIFIED"):
                                last = Artifact.of(_plain(obj))
                                if last.resolved:
                                    return last
                    except (errors.Expired, errors.TooLargeResourceVersion):
                        pass  # read the artifact again, watch from what it says now
                    except errors.TLSError:
                        raise
                    except (errors.ConnectionFailed, errors.ServerError):
                        await asyncio.sleep(RETRY_SECONDS)
                    last = await self._read_again(namespace, name)
                    if last.resolved:
                        return last
        except TimeoutError:
            raise ResolutionTimeout(last, timeout) from None

    async def _read_again(self, namespace: str, name: str) -> Artifact:
        while True:
            try:
                return await self.get_artifact(namespace, name)
            except errors.TLSError:
                raise
            except (errors.ConnectionFailed, errors.ServerError):
                await asyncio.sleep(RETRY_SECONDS)

    async def progress(self, namespace: str, name: str) -> wire.Obj:
        """The computed ``progress`` subresource (``ModelArtifactProgress``)."""
        answer = await self.api.request("GET", resources.progress_path(namespace, name))
        found = json.loads(answer.content)
        if not isinstance(found, dict):
            raise errors.ServerError(200, "BadResponse", "progress did not answer an object")
        return cast(wire.Obj, found)

    async def node_stores(self) -> list[NodeStore]:
        listed = await self.api.list(resources.NodeModelStore)
        return [NodeStore.of(_plain(obj)) for obj in listed.items]

    async def nodes_holding(self, digest: str) -> list[str]:
        """The nodes whose cache holds ``digest`` published, by name."""
        return sorted(store.node for store in await self.node_stores() if store.holds(digest))

    async def placement(self, namespace: str, name: str, *,
                        volume_name: str = "model") -> placements.Placement:
        """The volume naming artifact ``name`` of ``namespace`` (UID and digest filled) and the
        nodes warm for its digest, by the rules the Pod webhook applies: a node counts while its
        NodeModelStore lists the digest Ready, the store is Ready and its CSINode lists the
        driver. Reads the artifact, the NodeModelStores and the CSINodes with the caller's
        credentials (a standalone server has no CSINodes: every store's node counts);
        ``placement.NotMountable`` while the plugin would refuse the artifact."""
        found = await self.get_artifact(namespace, name)
        placements.check(found.raw)
        stores = await self.api.list(resources.NodeModelStore)
        try:
            csinodes: list[wire.Obj] | None = [
                _plain(obj) for obj in (await self.api.list(storage_v1.CSINode)).items]
        except errors.NotFound:  # a standalone server serves no CSINodes: as its webhook does
            csinodes = None
        return placements.place(found.raw, [_plain(obj) for obj in stores.items], csinodes,
                                volume_name=volume_name)

    async def create_prefetch(self, namespace: str, name: str,
                              spec: PrefetchSpec | Mapping[str, Any], *,
                              labels: Mapping[str, str] | None = None) -> wire.Obj:
        """A ModelPrefetch (a ``PrefetchSpec``, or a spec spelled as the schema spells it); the
        created object. ``kube.Invalid`` when the spec does not fit the schema (no target, an
        artifact that is not a hub source), ``kube.Forbidden`` outside the caller's grant."""
        metadata: wire.Obj = {"name": name, "namespace": namespace}
        if labels:
            metadata["labels"] = dict(labels)
        body = {"apiVersion": contract.GROUP_VERSION, "kind": contract.MODEL_PREFETCH.kind,
                "metadata": metadata,
                "spec": spec.spec() if isinstance(spec, PrefetchSpec) else dict(spec)}
        created = await self.api.create(resources.ModelPrefetch.from_dict(body),
                                        namespace=namespace)
        return _plain(created)

    async def get_prefetch(self, namespace: str, name: str) -> wire.Obj:
        return _plain(await self.api.get(resources.ModelPrefetch, name, namespace=namespace))

    async def delete_prefetch(self, namespace: str, name: str) -> None:
        """Deleting a prefetch withdraws its intent: its pins leave on the worker's next pass."""
        await self.api.delete(resources.ModelPrefetch, name, namespace=namespace)


class SyncModelManager:
    """``ModelManager``'s calls, blocking: one private event loop for the object's life."""

    def __init__(self, kubeconfig: str, **options: Any) -> None:
        self._runner = asyncio.Runner()
        self._async = self._runner.run(self._open(kubeconfig, options))

    @staticmethod
    async def _open(kubeconfig: str, options: Mapping[str, Any]) -> ModelManager:
        return ModelManager.from_kubeconfig(kubeconfig, **options)

    def close(self) -> None:
        try:
            self._runner.run(self._async.aclose())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncModelManager:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def create_artifact(self, namespace: str, name: str, source: Source,
                        **options: Any) -> Artifact:
        return self._runner.run(self._async.create_artifact(namespace, name, source, **options))

    def get_artifact(self, namespace: str, name: str) -> Artifact:
        return self._runner.run(self._async.get_artifact(namespace, name))

    def delete_artifact(self, namespace: str, name: str) -> None:
        self._runner.run(self._async.delete_artifact(namespace, name))

    def list_artifacts(self, namespace: str = "*") -> list[Artifact]:
        return self._runner.run(self._async.list_artifacts(namespace))

    def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        return self._runner.run(self._async.wait_resolved(namespace, name, timeout))

    def progress(self, namespace: str, name: str) -> wire.Obj:
        return self._runner.run(self._async.progress(namespace, name))

    def node_stores(self) -> list[NodeStore]:
        return self._runner.run(self._async.node_stores())

    def nodes_holding(self, digest: str) -> list[str]:
        return self._runner.run(self._async.nodes_holding(digest))

    def placement(self, namespace: str, name: str, *,
                  volume_name: str = "model") -> placements.Placement:
        return self._runner.run(self._async.placement(namespace, name, volume_name=volume_name))

    def create_prefetch(self, namespace: str, name: str,
                        spec: PrefetchSpec | Mapping[str, Any], **options: Any) -> wire.Obj:
        return self._runner.run(self._async.create_prefetch(namespace, name, spec, **options))

    def get_prefetch(self, namespace: str, name: str) -> wire.Obj:
        return self._runner.run(self._async.get_prefetch(namespace, name))

    def delete_prefetch(self, namespace: str, name: str) -> None:
        self._runner.run(self._async.delete_prefetch(namespace, name))
