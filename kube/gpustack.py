"""What the GPUStack server asks of model-manager, as typed helpers over the one ``kube.Client``.

``ModelManager`` (async) and ``SyncModelManager`` (the same calls, blocking, for code without an
event loop): create an artifact from a source, wait until it is resolved (with a timeout), read
its progress, list the node stores and the nodes that hold a digest, delete an artifact. Every
call goes through ``kube.Client``, so it uses the caller's kubeconfig and RBAC, and fails with
the product's typed errors (``kube.NotFound``, ``kube.Forbidden``, ``kube.Invalid`` ... and
``ResolutionTimeout`` here). Prefetching (ModelPrefetch) is not served yet, so it has no helper.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from kube import client as clients
from kube import errors, resources
from openapi import reasons, sources
from openapi import resources as contract

Obj = dict[str, Any]
HubKind = sources.HubKind


@dataclasses.dataclass(frozen=True, slots=True)
class HubSource:
    """A Hugging Face or ModelScope repository (``revision`` empty: the hub's default branch)."""

    kind: HubKind
    repository: str
    revision: str = ""
    secret_name: str = ""

    def spec(self) -> Obj:
        member: Obj = {"repository": self.repository}
        if self.revision:
            member["revision"] = self.revision
        if self.secret_name:
            member["secretRef"] = {"name": self.secret_name}
        return {self.kind: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimSource:
    claim_name: str
    path: str = ""

    def spec(self) -> Obj:
        member: Obj = {"claimName": self.claim_name}
        if self.path:
            member["path"] = self.path
        return {sources.CLAIM: member}


@dataclasses.dataclass(frozen=True, slots=True)
class ImageSource:
    reference: str
    """Pinned by digest (``name@sha256:...``)."""

    def spec(self) -> Obj:
        return {sources.IMAGE: {"reference": self.reference}}


Source = HubSource | ClaimSource | ImageSource


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
    raw: Obj = dataclasses.field(repr=False, compare=False)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Artifact:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        resolved = status.get("resolved") or {}
        condition: Obj = next((c for c in status.get("conditions") or ()
                          if c.get("type") == reasons.RESOLVED), {})
        return cls(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""), resolved=condition.get("status") == "True",
            reason=str(condition.get("reason") or ""),
            message=str(condition.get("message") or ""),
            revision=str(resolved.get("revision") or ""),
            manifest_digest=str(resolved.get("manifestDigest") or ""),
            size_bytes=int(resolved.get("sizeBytes") or 0), raw=dict(obj),
        )  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class NodeStore:
    """A node's cache as its NodeModelStore reports it."""

    node: str
    ready: bool
    total_bytes: int
    stored_bytes: int
    models: tuple[Obj, ...]
    """``status.models``: each a digest, its state and sizes."""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> NodeStore:
        status = obj.get("status") or {}
        capacity = status.get("capacity") or {}
        ready: Obj = next((c for c in status.get("conditions") or ()
                      if c.get("type") == reasons.READY), {})
        return cls(node=str((obj.get("metadata") or {}).get("name") or ""),
                   ready=ready.get("status") == "True",
                   total_bytes=int(capacity.get("totalBytes") or 0),
                   stored_bytes=int(capacity.get("storedBytes") or 0),
                   models=tuple(dict(m) for m in status.get("models") or ()))

    def holds(self, digest: str) -> bool:
        """The node holds ``digest`` published (state Ready)."""
        return any(m.get("digest") == digest and m.get("state") == "Ready" for m in self.models)


class ResolutionTimeout(errors.KubeError):
    """The artifact was not resolved within the time given; ``artifact`` is the last seen."""

    def __init__(self, artifact: Artifact, timeout: float) -> None:
        why = f" (last: {artifact.reason}: {artifact.message[:300]})" if artifact.reason else ""
        super().__init__(0, "Timeout", f"{artifact.namespace}/{artifact.name} was not resolved"
                                       f" within {timeout:g}s{why}")
        self.artifact = artifact


def _plain(obj: Any) -> Obj:
    found: Obj = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
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
        spec: Obj = {"source": source.spec()}
        if allow_patterns:
            spec["allowPatterns"] = list(allow_patterns)
        if ignore_patterns:
            spec["ignorePatterns"] = list(ignore_patterns)
        metadata: Obj = {"name": name, "namespace": namespace}
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

    async def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        """The artifact once its Resolved condition is True; ``ResolutionTimeout`` after
        ``timeout`` seconds (a failure the worker retries is waited through, as it may pass)."""
        last = await self.get_artifact(namespace, name)
        if last.resolved:
            return last
        try:
            async with asyncio.timeout(timeout):
                version = str(last.raw.get("metadata", {}).get("resourceVersion") or "")
                while True:
                    stream = self.api.watch(resources.ModelArtifact, namespace=namespace,
                                            fields={"metadata.name": name},
                                            resource_version=version or None)
                    async for kind, obj in stream:
                        if kind == "DELETED":
                            raise errors.NotFound(404, "NotFound",
                                                  f"{namespace}/{name} was deleted")
                        if kind in ("ADDED", "MODIFIED"):
                            last = Artifact.of(_plain(obj))
                            version = str(last.raw.get("metadata", {})
                                          .get("resourceVersion") or version)
                            if last.resolved:
                                return last
        except TimeoutError:
            raise ResolutionTimeout(last, timeout) from None

    async def progress(self, namespace: str, name: str) -> Obj:
        """The computed ``progress`` subresource (``ModelArtifactProgress``)."""
        answer = await self.api.request("GET", resources.progress_path(namespace, name))
        found = json.loads(answer.content)
        if not isinstance(found, dict):
            raise errors.ServerError(200, "BadResponse", "progress did not answer an object")
        return cast(Obj, found)

    async def node_stores(self) -> list[NodeStore]:
        listed = await self.api.list(resources.NodeModelStore)
        return [NodeStore.of(_plain(obj)) for obj in listed.items]

    async def nodes_holding(self, digest: str) -> list[str]:
        """The nodes whose cache holds ``digest`` published, by name."""
        return sorted(store.node for store in await self.node_stores() if store.holds(digest))


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

    def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        return self._runner.run(self._async.wait_resolved(namespace, name, timeout))

    def progress(self, namespace: str, name: str) -> Obj:
        return self._runner.run(self._async.progress(namespace, name))

    def node_stores(self) -> list[NodeStore]:
        return self._runner.run(self._async.node_stores())

    def nodes_holding(self, digest: str) -> list[str]:
        return self._runner.run(self._async.nodes_holding(digest))
