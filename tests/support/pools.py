"""The pool layer a prefetch test needs, over HTTP as an administrator would write it: a
ModelStore and a ModelStoreBinding granting a namespace its nodes, and a wait until the node
stores are merged from the store (``NodeModelStore.spec.store``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import httpx

GROUP = "/apis/worker.gpustack.ai/v1"
ALL = "all-nodes"


def store(client: httpx.Client, name: str = ALL, selector: Mapping[str, str] | None = None,
          **spec: object) -> None:
    """A ModelStore (``{}``: every node); an existing one of that name is kept."""
    body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelStore",
            "metadata": {"name": name},
            "spec": {"nodeSelector": dict(selector or {}), **spec}}
    created = client.post(f"{GROUP}/modelstores", json=body)
    assert created.status_code in (201, 409), created.text


def grant(client: httpx.Client, namespace: str, *, name: str = "grant",
          stores: Iterable[str] = (ALL,), quota: int = 1 << 40,
          allow_pinned: bool = True) -> None:
    """A ModelStoreBinding in ``namespace`` over ``stores``."""
    body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelStoreBinding",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"storeRefs": [{"name": s} for s in stores], "quota": {"bytes": quota},
                     "allowPinned": allow_pinned}}
    created = client.post(f"{GROUP}/namespaces/{namespace}/modelstorebindings", json=body)
    assert created.status_code == 201, created.text


def merged(client: httpx.Client, nodes: Iterable[str], store_name: str = ALL,
           timeout: float = 60.0) -> None:
    """Until each node's store is merged from ``store_name``."""
    deadline = time.monotonic() + timeout
    for node in nodes:
        while True:
            spec = client.get(f"{GROUP}/nodemodelstores/{node}").json().get("spec") or {}
            if spec.get("store") == store_name:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{node}'s store is not merged from {store_name}: {spec}")
            time.sleep(0.05)


def setup(client: httpx.Client, namespace: str, nodes: Iterable[str], **options: object) -> None:
    """Every node in one store, and ``namespace`` granted it (``grant``'s options)."""
    store(client)
    grant(client, namespace, **options)  # type: ignore[arg-type]
    merged(client, nodes)
