"""What the GPUStack server asks of model-manager, as typed helpers over the one ``kube.Client``.

``ModelManager`` (async) and ``SyncModelManager`` (the same calls, blocking, on a loop of its own
in a worker thread, so it also works inside a running event loop): create an artifact from a
source, wait until it is resolved (with a timeout; a failure retrying cannot fix raises at once),
read its progress, its copies (one row per node) and its manifest (the files), watch the copies,
wait until named nodes are ready, list the node stores and the nodes that hold a digest, delete
an artifact, create and delete a prefetch, and give the volume and the node-affinity term for a
Pod that mounts an artifact (``placement``, by the Pod webhook's own rules:
``kube/placement.py``). Every call goes through ``kube.Client``, so it uses the caller's
kubeconfig (or URL, token and CA) and RBAC, and fails with the product's typed errors
(``kube.NotFound``, ``kube.Forbidden``, ``kube.Invalid`` ... and ``ResolutionTimeout``,
``ResolutionFailed``, ``ReadyTimeout`` here, ``placement.NotMountable``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

from lightkube.resources import storage_v1

from kube import client as clients
from kube import errors, resources
from kube import placement as placements
from kube.delivery import Copies as Copies
from kube.delivery import Manifest as Manifest
from kube.delivery import ManifestFile as ManifestFile
from kube.delivery import NodeCopy as NodeCopy
from kube.delivery import ResolutionFailed as ResolutionFailed
from kube.gpustack_values import Artifact as Artifact
from kube.gpustack_values import ClaimSource as ClaimSource
from kube.gpustack_values import HubKind as HubKind
from kube.gpustack_values import HubSource as HubSource
from kube.gpustack_values import ImageSource as ImageSource
from kube.gpustack_values import NodeStore as NodeStore
from kube.gpustack_values import PrefetchSpec as PrefetchSpec
from kube.gpustack_values import Source as Source
from openapi import resources as contract
from openapi import wire
from openapi.kinds import modelprefetch

RETRY_SECONDS = 1.0
"""``wait_resolved``: how long it waits after the server could not be reached, then reads the
artifact again."""
POLL_SECONDS = 2.0
"""``watch_copies`` and ``wait_ready``: how often the computed ``copies`` is read again (it is
computed per request, so it has no watch of its own)."""
T = TypeVar("T")


class ResolutionTimeout(errors.KubeError):
    """The artifact was not resolved within the time given; ``artifact`` is the last seen."""

    def __init__(self, artifact: Artifact, timeout: float) -> None:
        why = f" (last: {artifact.reason}: {artifact.message[:300]})" if artifact.reason else ""
        super().__init__(0, "Timeout", f"{artifact.namespace}/{artifact.name} was not resolved"
                                       f" within {timeout:g}s{why}")
        self.artifact = artifact


class ReadyTimeout(errors.KubeError):
    """The nodes named were not all Ready within the time given; ``copies`` is the last seen."""

    def __init__(self, copies: Copies, nodes: Sequence[str], timeout: float) -> None:
        waiting = [f"{n}: {row.phase if row else 'not a target'}"
                   for n in nodes for row in [copies.node(n)] if not (row and row.ready)]
        super().__init__(0, "Timeout", f"{copies.namespace}/{copies.name} was not ready within "
                                       f"{timeout:g}s on {', '.join(waiting)[:300]}")
        self.copies = copies


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

    @classmethod
    def in_cluster(cls, **options: Any) -> ModelManager:
        return cls(clients.Client.in_cluster(**options), owned=True)

    @classmethod
    def from_url(cls, server: str, *, token: str | None = None, ca_file: str | None = None,
                 ca_data: str | None = None, **options: Any) -> ModelManager:
        """A server URL, a bearer token and the CA that signs the server's certificate (a
        file, or base64 PEM data): how the GPUStack server reaches a cluster."""
        return cls(clients.Client.from_url(server, token=token, ca_file=ca_file,
                                           ca_data=ca_data, **options), owned=True)

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

    async def delete_artifact(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        """Delete the artifact; with ``cleanup``, first its prefetches with cleanup
        (``delete_prefetch``), so the nodes they warmed remove the bytes at once. Copies no
        prefetch made (a Pod's mount) are left to the nodes' collection."""
        if cleanup:
            listed = await self.api.list(resources.ModelPrefetch, namespace=namespace)
            for found in listed.items:
                prefetch = _plain(found)
                if modelprefetch.artifact_name(prefetch) == name:
                    with contextlib.suppress(errors.NotFound):  # deleted meanwhile
                        await self.delete_prefetch(namespace, wire.text(prefetch, "metadata",
                                                                        "name"), cleanup=True)
        await self.api.delete(resources.ModelArtifact, name, namespace=namespace)

    async def list_artifacts(self, namespace: str = "*") -> list[Artifact]:
        """The artifacts of ``namespace`` (``"*"``: every namespace, which needs a cluster-wide
        list grant)."""
        listed = await self.api.list(resources.ModelArtifact, namespace=namespace)
        return [Artifact.of(_plain(obj)) for obj in listed.items]

    async def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        """The artifact once its Resolved condition is True; ``ResolutionFailed`` as soon as the
        worker reports a failure retrying alone cannot fix (``Artifact.terminal_reason``: no
        such repository or revision, access denied ...), with its reason and next retry time;
        ``ResolutionTimeout`` after ``timeout`` seconds (an outage, or a Secret still to be
        created, is waited through, as it may pass).
        It watches from the version it read; when that version cannot be served (410: compacted,
        or from before the server's store went back; 504 "Too large resource version") or the
        server cannot be reached for a while (it restarts), it reads the artifact again and
        watches from there."""
        last = await self.get_artifact(namespace, name)
        if last.resolved:
            return last
        if (failed := last.failure()) is not None:
            raise failed
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
                                if (failed := last.failure()) is not None:
                                    raise failed
                    except (errors.Expired, errors.TooLargeResourceVersion):
                        pass  # read the artifact again, watch from what it says now
                    except errors.TLSError:
                        raise
                    except (errors.ConnectionFailed, errors.ServerError):
                        await asyncio.sleep(RETRY_SECONDS)
                    last = await self._read_again(namespace, name)
                    if last.resolved:
                        return last
                    if (failed := last.failure()) is not None:
                        raise failed
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

    async def _computed(self, namespace: str, name: str, subresource: str) -> wire.Obj:
        answer = await self.api.request(
            "GET", resources.subresource_path(namespace, name, subresource))
        found = json.loads(answer.content)
        if not isinstance(found, dict):
            raise errors.ServerError(200, "BadResponse", f"{subresource} did not answer an "
                                                         "object")
        return cast(wire.Obj, found)

    async def progress(self, namespace: str, name: str) -> wire.Obj:
        """The computed ``progress`` subresource (``ModelArtifactProgress``)."""
        return await self._computed(namespace, name, "progress")

    async def copies(self, namespace: str, name: str) -> Copies:
        """The computed ``copies`` subresource: one row per node (needs ``get`` on
        ``modelartifacts/copies``, which no tenant role has)."""
        return Copies.of(await self._computed(namespace, name, "copies"))

    async def manifest(self, namespace: str, name: str) -> Manifest:
        """The files the artifact resolved to (``modelartifacts/{name}/manifest``)."""
        return Manifest.of(await self._computed(namespace, name, "manifest"))

    async def watch_copies(self, namespace: str, name: str, *,
                           interval: float = POLL_SECONDS) -> AsyncIterator[Copies]:
        """The copies now, then each time they change (read every ``interval`` seconds: the
        rows carry live bytes, which move between the stored thresholds). Ends when the
        artifact is deleted (``kube.NotFound``)."""
        last: Copies | None = None
        while True:
            found = await self.copies(namespace, name)
            if found != last:
                yield found
                last = found
            await asyncio.sleep(interval)

    async def wait_ready(self, namespace: str, name: str, *, nodes: Sequence[str],
                         timeout: float, interval: float = POLL_SECONDS) -> Copies:
        """The copies once every node of ``nodes`` holds the artifact Ready;
        ``ResolutionFailed`` at once on a terminal resolution failure; ``ReadyTimeout`` after
        ``timeout`` seconds (a node's failed attempt is retried by its plugin, so it is waited
        through; its row says why and when)."""
        last: Copies | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if (failed := (await self.get_artifact(namespace, name)).failure()):
                        raise failed
                    last = await self.copies(namespace, name)
                    if all((row := last.node(n)) is not None and row.ready for n in nodes):
                        return last
                    await asyncio.sleep(interval)
        except TimeoutError:
            if last is None:
                last = Copies(namespace, name, "", 0, (), "")
            raise ReadyTimeout(last, nodes, timeout) from None

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
        created object. ``kube.Invalid`` when the spec does not fit the schema or the grant (no
        binding, an artifact that is not a hub source, nodes outside the binding's stores,
        pinning without ``allowPinned``, past the budget), ``kube.Forbidden`` outside the
        caller's RBAC."""
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

    async def delete_prefetch(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        """Deleting a prefetch withdraws its intent: its pins leave on the worker's next pass.
        With ``cleanup`` (or ``retention.cleanupOnDelete`` already set) its target nodes also
        remove the bytes at once, each as soon as no Pod mounts them and nothing pins them."""
        if cleanup:
            await self.api.patch(resources.ModelPrefetch, name,
                                 {"spec": {"retention": {"cleanupOnDelete": True}}},
                                 namespace=namespace)
        await self.api.delete(resources.ModelPrefetch, name, namespace=namespace)


class SyncModelManager:
    """``ModelManager``'s calls, blocking: one event loop of its own in a worker thread for the
    object's life, so it works from plain code and from inside a running event loop alike (the
    calling loop is blocked for the call's time: prefer ``ModelManager`` there)."""

    def __init__(self, kubeconfig: str | None = None, *, server: str | None = None,
                 token: str | None = None, ca_file: str | None = None,
                 **options: Any) -> None:
        """``kubeconfig``; or ``server`` with ``token`` and ``ca_file``; or neither: in
        cluster."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="model-manager client")
        self._thread.start()
        try:
            self._async = self._call(self._open(kubeconfig, server, token, ca_file, options))
        except BaseException:
            self._stop()
            raise

    @staticmethod
    async def _open(kubeconfig: str | None, server: str | None, token: str | None,
                    ca_file: str | None, options: Mapping[str, Any]) -> ModelManager:
        if server is not None:
            return ModelManager.from_url(server, token=token, ca_file=ca_file, **options)
        if kubeconfig is not None:
            return ModelManager.from_kubeconfig(kubeconfig, **options)
        return ModelManager.in_cluster(**options)

    def _call(self, work: Awaitable[T]) -> T:
        async def run() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self) -> None:
        try:
            self._call(self._async.aclose())
        finally:
            self._stop()

    def __enter__(self) -> SyncModelManager:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def create_artifact(self, namespace: str, name: str, source: Source,
                        **options: Any) -> Artifact:
        return self._call(self._async.create_artifact(namespace, name, source, **options))

    def get_artifact(self, namespace: str, name: str) -> Artifact:
        return self._call(self._async.get_artifact(namespace, name))

    def delete_artifact(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        self._call(self._async.delete_artifact(namespace, name, cleanup=cleanup))

    def list_artifacts(self, namespace: str = "*") -> list[Artifact]:
        return self._call(self._async.list_artifacts(namespace))

    def wait_resolved(self, namespace: str, name: str, timeout: float) -> Artifact:
        return self._call(self._async.wait_resolved(namespace, name, timeout))

    def progress(self, namespace: str, name: str) -> wire.Obj:
        return self._call(self._async.progress(namespace, name))

    def copies(self, namespace: str, name: str) -> Copies:
        return self._call(self._async.copies(namespace, name))

    def manifest(self, namespace: str, name: str) -> Manifest:
        return self._call(self._async.manifest(namespace, name))

    def wait_ready(self, namespace: str, name: str, *, nodes: Sequence[str], timeout: float,
                   interval: float = POLL_SECONDS) -> Copies:
        return self._call(self._async.wait_ready(namespace, name, nodes=nodes, timeout=timeout,
                                                 interval=interval))

    def node_stores(self) -> list[NodeStore]:
        return self._call(self._async.node_stores())

    def nodes_holding(self, digest: str) -> list[str]:
        return self._call(self._async.nodes_holding(digest))

    def placement(self, namespace: str, name: str, *,
                  volume_name: str = "model") -> placements.Placement:
        return self._call(self._async.placement(namespace, name, volume_name=volume_name))

    def create_prefetch(self, namespace: str, name: str,
                        spec: PrefetchSpec | Mapping[str, Any], **options: Any) -> wire.Obj:
        return self._call(self._async.create_prefetch(namespace, name, spec, **options))

    def get_prefetch(self, namespace: str, name: str) -> wire.Obj:
        return self._call(self._async.get_prefetch(namespace, name))

    def delete_prefetch(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        self._call(self._async.delete_prefetch(namespace, name, cleanup=cleanup))
