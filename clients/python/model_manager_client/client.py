"""``ModelManager``: the GPUStack server's async client of model-manager, on kubernetes-asyncio
(GPUStack's own Kubernetes stack): pass its configured ``ApiClient``, or connect by kubeconfig,
in cluster, or URL + bearer token + CA.

One artifact per source: ``ensure_artifact`` finds it by the label this client sets
(``SOURCE_LABEL``, a hash of the source and its patterns) or creates it. ``wait_resolved``
raises ``ResolutionFailed`` as soon as the worker reports a failure retrying cannot fix;
``copies``/``manifest`` read the computed subresources; ``watch_copies``/``wait_ready`` follow
the copies; deleting with ``cleanup`` asks the nodes to remove the bytes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio import watch as k8s_watch
from kubernetes_asyncio.client.exceptions import ApiException

from model_manager_client import types

GROUP = "worker.gpustack.ai"
VERSION = "v1"
ARTIFACTS = "modelartifacts"
PREFETCHES = "modelprefetches"
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""kubelet's node label: how a prefetch names nodes one by one."""
SOURCE_LABEL = "model-manager.gpustack.ai/source"
"""The label ``create_artifact`` sets: a hash of the source and its patterns."""
POLL_SECONDS = 2.0
WATCH_SECONDS = 60


def hub_source(kind: str, repository: str, revision: str = "",
               secret_name: str = "") -> dict[str, Any]:
    """``spec.source`` of a hub artifact (``kind``: ``huggingFace`` or ``modelScope``)."""
    member: dict[str, Any] = {"repository": repository}
    if revision:
        member["revision"] = revision
    if secret_name:
        member["secretRef"] = {"name": secret_name}
    return {kind: member}


def source_key(source: Mapping[str, Any], allow_patterns: Sequence[str] = (),
               ignore_patterns: Sequence[str] = ()) -> str:
    """The ``SOURCE_LABEL`` value of a source and its patterns (40 hex digits)."""
    text = json.dumps([source, sorted(allow_patterns), sorted(ignore_patterns)],
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _error(exc: ApiException) -> types.ModelManagerError:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    reason = body.get("reason") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    status = int(exc.status or 0)
    kind = {404: types.NotFound, 403: types.Forbidden, 409: types.AlreadyExists,
            422: types.Invalid}.get(status, types.ModelManagerError)
    return kind(status, str(reason or exc.reason or ""), str(message or exc.reason or ""))


class ModelManager:
    def __init__(self, api: k8s.ApiClient, *, owned: bool = False) -> None:
        """``api``: a configured ``kubernetes_asyncio.client.ApiClient`` (closed by
        ``close`` only if ``owned``)."""
        self.api = api
        self.custom = k8s.CustomObjectsApi(api)
        self._owned = owned

    # --- connecting ----------------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(cls, path: str | None = None,
                              context: str | None = None) -> ModelManager:
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(config_file=path, context=context,
                                          client_configuration=configuration)
        return cls(k8s.ApiClient(configuration), owned=True)

    @classmethod
    def in_cluster(cls) -> ModelManager:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
        return cls(k8s.ApiClient(configuration), owned=True)

    @classmethod
    def from_url(cls, server: str, *, token: str | None = None,
                 ca_file: str | None = None) -> ModelManager:
        """A server URL (through a proxy, as GPUStack reaches clusters), a bearer token and the
        CA that signs the server's certificate (none: the system's trust store)."""
        if not server.startswith(("https://", "http://")):
            raise types.ModelManagerError(0, "BadConfig", "the server is not an http(s) URL")
        configuration = k8s.Configuration(host=server.rstrip("/"))
        if token:
            configuration.api_key = {"BearerToken": f"Bearer {token}"}
        if ca_file:
            configuration.ssl_ca_cert = ca_file
        return cls(k8s.ApiClient(configuration), owned=True)

    async def close(self) -> None:
        if self._owned:
            await self.api.close()

    async def __aenter__(self) -> ModelManager:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # --- artifacts -------------------------------------------------------------------------

    async def create_artifact(self, namespace: str, name: str, source: Mapping[str, Any], *,
                              allow_patterns: Sequence[str] = (),
                              ignore_patterns: Sequence[str] = (),
                              labels: Mapping[str, str] | None = None) -> types.Artifact:
        spec: dict[str, Any] = {"source": dict(source)}
        if allow_patterns:
            spec["allowPatterns"] = list(allow_patterns)
        if ignore_patterns:
            spec["ignorePatterns"] = list(ignore_patterns)
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ModelArtifact",
                "metadata": {"name": name, "namespace": namespace, "labels": {
                    **(labels or {}),
                    SOURCE_LABEL: source_key(source, allow_patterns, ignore_patterns)}},
                "spec": spec}
        try:
            created = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, ARTIFACTS, body)
        except ApiException as exc:
            raise _error(exc) from None
        return types.Artifact.of(created)

    async def find_artifact(self, namespace: str, source: Mapping[str, Any], *,
                            allow_patterns: Sequence[str] = (),
                            ignore_patterns: Sequence[str] = ()) -> types.Artifact | None:
        """The artifact this client created for that source and patterns, None if none."""
        key = source_key(source, allow_patterns, ignore_patterns)
        try:
            listed = await self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, ARTIFACTS, label_selector=f"{SOURCE_LABEL}={key}")
        except ApiException as exc:
            raise _error(exc) from None
        items = [types.Artifact.of(obj) for obj in listed.get("items") or []]
        return min(items, key=lambda a: a.name) if items else None

    async def ensure_artifact(self, namespace: str, name: str, source: Mapping[str, Any], *,
                              allow_patterns: Sequence[str] = (),
                              ignore_patterns: Sequence[str] = ()) -> types.Artifact:
        """The artifact of that source (found by its label), created as ``name`` if none."""
        found = await self.find_artifact(namespace, source, allow_patterns=allow_patterns,
                                         ignore_patterns=ignore_patterns)
        if found is not None:
            return found
        return await self.create_artifact(namespace, name, source,
                                          allow_patterns=allow_patterns,
                                          ignore_patterns=ignore_patterns)

    async def get_artifact(self, namespace: str, name: str) -> types.Artifact:
        try:
            return types.Artifact.of(await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, ARTIFACTS, name))
        except ApiException as exc:
            raise _error(exc) from None

    async def delete_artifact(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        """With ``cleanup``, its prefetches are deleted first with cleanup, so their nodes
        remove the bytes at once (once no Pod mounts them)."""
        try:
            if cleanup:
                listed = await self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PREFETCHES)
                for prefetch in listed.get("items") or []:
                    if types.text(prefetch, "spec", "artifactRef", "name") == name:
                        with contextlib.suppress(types.NotFound):  # deleted meanwhile
                            await self.delete_prefetch(
                                namespace, types.text(prefetch, "metadata", "name"),
                                cleanup=True)
            await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, ARTIFACTS, name)
        except ApiException as exc:
            raise _error(exc) from None

    async def wait_resolved(self, namespace: str, name: str,
                            timeout: float) -> types.Artifact:
        """The artifact once resolved; ``ResolutionFailed`` as soon as a failure retrying
        cannot fix shows; ``ResolutionTimeout`` after ``timeout`` seconds. A watch from the
        version read, read again (relist) when it ends or expires."""
        last = await self.get_artifact(namespace, name)

        async def follow() -> types.Artifact:
            nonlocal last
            while True:
                _judge(last)
                if last.resolved:
                    return last
                stream = k8s_watch.Watch()
                try:
                    async for event in stream.stream(
                            self.custom.list_namespaced_custom_object, GROUP, VERSION,
                            namespace, ARTIFACTS, field_selector=f"metadata.name={name}",
                            resource_version=last.resource_version,
                            timeout_seconds=WATCH_SECONDS):
                        kind, obj = event.get("type"), event.get("object")
                        if kind == "DELETED":
                            raise types.NotFound(404, "NotFound", f"{namespace}/{name} was "
                                                 "deleted")
                        if kind in ("ADDED", "MODIFIED") and isinstance(obj, Mapping):
                            last = types.Artifact.of(obj)
                            _judge(last)
                            if last.resolved:
                                return last
                        if kind == "ERROR":
                            break  # expired (410): read again, watch from there
                except ApiException as exc:
                    if exc.status not in (410, 504):
                        raise _error(exc) from None
                finally:
                    stream.stop()
                    await stream.close()  # its own ApiClient's session
                last = await self.get_artifact(namespace, name)

        try:
            return await asyncio.wait_for(follow(), timeout)
        except asyncio.TimeoutError:
            raise types.ResolutionTimeout(last, timeout) from None

    # --- the computed subresources ---------------------------------------------------------

    async def _computed(self, namespace: str, name: str, subresource: str) -> dict[str, Any]:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{ARTIFACTS}/{name}/{subresource}"
        try:
            found = await self.api.call_api(
                path, "GET", header_params={"Accept": "application/json"},
                response_types_map={200: "object"}, auth_settings=["BearerToken"],
                _return_http_data_only=True)
        except ApiException as exc:
            raise _error(exc) from None
        if not isinstance(found, dict):
            raise types.ModelManagerError(200, "BadResponse", f"{subresource}: not an object")
        return found

    async def progress(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._computed(namespace, name, "progress")

    async def copies(self, namespace: str, name: str) -> types.Copies:
        """One row per node (``get`` on ``modelartifacts/copies``: not a tenant's grant)."""
        return types.Copies.of(await self._computed(namespace, name, "copies"))

    async def manifest(self, namespace: str, name: str) -> types.Manifest:
        return types.Manifest.of(await self._computed(namespace, name, "manifest"))

    async def watch_copies(self, namespace: str, name: str, *,
                           interval: float = POLL_SECONDS) -> AsyncIterator[types.Copies]:
        """The copies now and each time they change (read every ``interval`` seconds: they are
        computed per request, with live bytes, and have no watch of their own)."""
        last: types.Copies | None = None
        while True:
            found = await self.copies(namespace, name)
            if found != last:
                yield found
                last = found
            await asyncio.sleep(interval)

    async def wait_ready(self, namespace: str, name: str, *, nodes: Sequence[str],
                         timeout: float, interval: float = POLL_SECONDS) -> types.Copies:
        """The copies once every node of ``nodes`` is Ready; ``ResolutionFailed`` at once;
        ``ReadyTimeout`` after ``timeout`` seconds."""
        last: types.Copies | None = None

        async def follow() -> types.Copies:
            nonlocal last
            while True:
                _judge(await self.get_artifact(namespace, name))
                last = await self.copies(namespace, name)
                if all((row := last.node(n)) is not None and row.ready for n in nodes):
                    return last
                await asyncio.sleep(interval)

        try:
            return await asyncio.wait_for(follow(), timeout)
        except asyncio.TimeoutError:
            raise types.ReadyTimeout(last, tuple(nodes), timeout) from None

    # --- prefetches --------------------------------------------------------------------------

    async def create_prefetch(self, namespace: str, name: str, artifact: str, *,
                              binding: str,
                              nodes: Sequence[str] = (),
                              match_labels: Mapping[str, str] | None = None,
                              pinned: bool = False,
                              cleanup_on_delete: bool = False) -> dict[str, Any]:
        """A ModelPrefetch in the upstream shape, under the namespace's ModelStoreBinding
        ``binding``: ``nodes`` by ``kubernetes.io/hostname``, ``match_labels`` by labels; neither:
        every node of the binding's stores. ``pinned`` needs the binding's ``allowPinned``."""
        selector: dict[str, Any] = {}
        if match_labels:
            selector["matchLabels"] = dict(match_labels)
        if nodes:
            selector["matchExpressions"] = [{"key": HOSTNAME_LABEL, "operator": "In",
                                             "values": list(nodes)}]
        retention: dict[str, Any] = {"pinned": pinned}
        if cleanup_on_delete:
            retention["cleanupOnDelete"] = True
        spec: dict[str, Any] = {"artifactRef": {"name": artifact},
                                "bindingRef": {"name": binding}, "retention": retention}
        if selector:
            spec["placement"] = {"nodeSelector": selector}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ModelPrefetch",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        try:
            created: dict[str, Any] = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PREFETCHES, body)
        except ApiException as exc:
            raise _error(exc) from None
        return created

    async def delete_prefetch(self, namespace: str, name: str, *, cleanup: bool = False) -> None:
        try:
            if cleanup:
                await self.custom.patch_namespaced_custom_object(  # type: ignore[call-arg]
                    GROUP, VERSION, namespace, PREFETCHES, name,
                    {"spec": {"retention": {"cleanupOnDelete": True}}},
                    _content_type="application/merge-patch+json")
            await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PREFETCHES, name)
        except ApiException as exc:
            raise _error(exc) from None


def _judge(artifact: types.Artifact) -> None:
    if artifact.terminal_reason:
        raise types.ResolutionFailed(artifact)
