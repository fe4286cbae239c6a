"""The official ``kubernetes`` Python client, configured from a generated kubeconfig."""

from __future__ import annotations

import pathlib
from typing import Any

from kubernetes import client, config, watch

GROUP = "worker.gpustack.ai"
VERSION = "v1"


def custom_objects(kubeconfig: pathlib.Path) -> Any:
    """A ``CustomObjectsApi`` (untyped: the client library ships no type hints)."""
    api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), persist_config=False
    )
    return client.CustomObjectsApi(api_client)


def events(api: Any, namespace: str, resource_version: str, *, count: int) -> list[Any]:
    """The first ``count`` watch events on modelartifacts in ``namespace`` after the revision."""
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    seen: list[tuple[str, dict[str, Any]]] = []
    for event in stream.stream(
        api.list_namespaced_custom_object, GROUP, VERSION, namespace, "modelartifacts",
        resource_version=resource_version, timeout_seconds=10,
    ):  # fmt: skip
        seen.append((event["type"], event["object"]))
        if len(seen) == count:
            stream.stop()
    return seen


def artifact(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B-Instruct"}}},
    }
