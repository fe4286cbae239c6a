"""Reading and making the real cluster's objects: kubectl's JSON, conditions, a resolved
ModelArtifact's volume attributes, consumer Pods, and the waits the end-to-end tests and the
pod-start benchmark share."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from devkit.realnode import release_values, rig
from openapi import reasons, volume
from openapi.kinds import modelartifact

DRIVER = volume.DRIVER
BUSYBOX = "docker.io/library/busybox:latest"


def json_of(cluster: rig.Rig, *args: str, user: str = "admin") -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json", user=user).stdout)


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The status of ``obj``'s condition ``kind``, or None when it has none."""
    for entry in obj.get("status", {}).get("conditions", []):
        if entry.get("type") == kind:
            return str(entry.get("status"))
    return None


STORE = "all-nodes"
"""The ModelStore ``grant`` makes: every node in one pool."""
BINDING = "grant"
"""The ModelStoreBinding ``grant`` makes in a namespace."""


def grant(cluster: rig.Rig, namespace: str) -> None:
    """The administrator's pool layer for the tests: every node in the ModelStore ``STORE``,
    and ``namespace`` granted it (1 TiB, pinning allowed) by the binding ``BINDING``: a
    ModelPrefetch is admitted only under a binding of its namespace (docs/api.md). Applying it
    again changes nothing (the binding's fields are frozen, so it is always the same)."""
    cluster.apply(textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelStore
        metadata: {{name: {STORE}}}
        spec: {{nodeSelector: {{}}}}
        ---
        apiVersion: worker.gpustack.ai/v1
        kind: ModelStoreBinding
        metadata: {{name: {BINDING}, namespace: {namespace}}}
        spec:
          storeRefs: [{{name: {STORE}}}]
          quota: {{bytes: 1099511627776}}
          allowPinned: true
        """))  # fmt: skip


def prefetch_manifest(namespace: str, name: str, artifact: str, node: str, *,
                      pinned: bool = False, binding: str = BINDING) -> str:
    """A ModelPrefetch of ``artifact`` onto ``node`` under ``binding`` (``grant``'s by
    default)."""
    return textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelPrefetch
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          artifactRef: {{name: {artifact}}}
          bindingRef: {{name: {binding}}}
          placement:
            nodeSelector:
              matchLabels: {{kubernetes.io/hostname: {node}}}
          retention: {{pinned: {"true" if pinned else "false"}}}
        """)  # fmt: skip


def wait_store_ready(cluster: rig.Rig, timeout: float = 240) -> None:
    def ready() -> bool:
        return condition(json_of(cluster, "get", "nodemodelstores", cluster.node_name),
                         reasons.READY) == "True"  # fmt: skip

    cluster.wait("NodeModelStore Ready", ready, timeout=timeout,
                 namespace=release_values.NAMESPACE)  # fmt: skip


def artifact(cluster: rig.Rig, namespace: str, name: str, repository: str, *,
             user: str = "admin", revision: str | None = None) -> dict[str, str]:  # fmt: skip
    """Create a ModelArtifact of a Hugging Face repository (at ``revision``, else its default)
    as ``user`` and wait for its resolution; the CSI volume attributes naming it."""
    pinned = f", revision: {revision}" if revision else ""
    cluster.apply(textwrap.dedent(f"""\
        apiVersion: worker.gpustack.ai/v1
        kind: ModelArtifact
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          source:
            huggingFace: {{repository: {repository}{pinned}}}
        """), user=user)  # fmt: skip

    def resolved() -> dict[str, Any] | None:
        got = json_of(cluster, "get", "modelartifacts", name, "-n", namespace, user=user)
        return got if condition(got, reasons.RESOLVED) == "True" else None

    got = cluster.wait(f"ModelArtifact {namespace}/{name} resolved", resolved, timeout=120,
                       namespace=release_values.NAMESPACE)  # fmt: skip
    assert isinstance(got, dict)
    return volume.context(volume.attributes(name, got["metadata"]["uid"],
                                            modelartifact.manifest_digest(got)))


def pod(name: str, namespace: str, script: str, *, attributes: dict[str, str] | None = None,
        label: str = "reader", read_only: bool = True, node: str | None = None) -> str:  # fmt: skip
    """A busybox Pod running ``script``, with the model volume at ``/models`` when
    ``attributes`` are given (``read_only=False`` leaves ``readOnly`` off the volumeMount, so
    that a refused write shows the plugin's own read-only mount), only on ``node`` when given
    (a ``kubernetes.io/hostname`` node selector: kube-scheduler still places it)."""
    volume = ""
    if attributes is not None:
        flag = ", readOnly: true" if read_only else ""
        volume = textwrap.indent(textwrap.dedent(f"""\
              volumeMounts: [{{name: model, mountPath: /models{flag}}}]
          volumes:
            - name: model
              csi:
                driver: {DRIVER}
                volumeAttributes: {json.dumps(attributes)}
            """), "  ")
    selector = f"\n          nodeSelector: {{kubernetes.io/hostname: {node}}}" if node else ""
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: {namespace}, labels: {{e2e: {label}}}}}
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1{selector}
          containers:
            - name: reader
              image: {BUSYBOX}
              imagePullPolicy: Never
              command: [sh, -c, {json.dumps(script)}]
        """) + volume


def failed_mount(cluster: rig.Rig, name: str, namespace: str, needle: str, *,
                 timeout: float = 150) -> str:  # fmt: skip
    """The Pod's FailedMount message naming ``needle``, once it shows; the Pod is still
    ContainerCreating then."""

    def refused() -> str | None:
        events = json_of(cluster, "get", "events", "-n", namespace, "--field-selector",
                         f"involvedObject.name={name}")["items"]  # fmt: skip
        messages = [e.get("message", "") for e in events if e.get("reason") == "FailedMount"]
        return next((m for m in messages if needle in m), None)

    message = cluster.wait(f"{namespace}/{name}'s FailedMount naming {needle}", refused,
                           timeout=timeout, namespace=namespace)  # fmt: skip
    got = json_of(cluster, "get", "pod", name, "-n", namespace)
    waiting = got["status"]["containerStatuses"][0]["state"].get("waiting", {})
    assert waiting.get("reason") == "ContainerCreating", got["status"]
    return str(message)
