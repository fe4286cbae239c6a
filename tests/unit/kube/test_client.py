"""kube.Client's decoding against the fixture control plane: one object that does not fit its
model is skipped by a list and a watch (the rest goes on), warned about once per name and counted;
a get of it is a typed error; answers to writes decode Go's nulls too."""

from __future__ import annotations

import asyncio
import base64
import logging
import pathlib
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.storage_v1 import CSINodeSpec
from lightkube.resources.core_v1 import Secret
from lightkube.resources.storage_v1 import CSINode
from prometheus_client import REGISTRY

import kube
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from tests.support import slowlist

CONTENT = base64.b64encode(b"hf_s3cr3t").decode()


def _client(cp: ControlPlane, tmp_path: pathlib.Path) -> kube.Client:
    return kube.Client.from_kubeconfig(cp.write_kubeconfig(tmp_path / "kc", token=ADMIN_TOKEN))


def _secret(cp: ControlPlane, name: str, *, fits: bool = True) -> None:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"},
                            "type": "Opaque", "data": {"token": CONTENT}}
    if not fits:
        body["immutable"] = "yes"  # a bool in the model
    cp.seed(resources.SECRETS, body)


def _skipped() -> float:
    value = REGISTRY.get_sample_value(
        "gpustack_model_manager_kube_client_undecodable_objects_total", {"resource": "secrets"})
    return value or 0.0


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "kube.decoding" and r.levelno == logging.WARNING]


async def test_one_object_that_does_not_fit_is_skipped_by_list_and_watch(
    control_plane: ControlPlane, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    for name, fits in (("a", True), ("b", False), ("c", True)):
        _secret(control_plane, name, fits=fits)
    before = _skipped()
    async with _client(control_plane, tmp_path) as client:
        listed = await client.list(Secret, namespace="default")
        assert [s.metadata.name for s in listed.items if s.metadata] == ["a", "c"]
        await client.list(Secret, namespace="default", chunk_size=1)  # a relist, paged
        assert _skipped() == before + 2  # every skip counts
        (warning,) = _warnings(caplog)  # warned about once
        assert "secrets default/b skipped" in warning and "$.immutable" in warning
        assert CONTENT not in warning and "yes" not in warning

        with pytest.raises(kube.Undecodable) as caught:
            await client.get(Secret, "b", namespace="default")
        assert caught.value.code == 200 and "$.immutable" in caught.value.message

        stream = client.watch(Secret, namespace="default",
                              resource_version=listed.resource_version, bookmarks=True)
        _secret(control_plane, "d", fits=False)
        _secret(control_plane, "e")
        kind, seen = await asyncio.wait_for(anext(stream), 30)
        while kind == "BOOKMARK":
            kind, seen = await asyncio.wait_for(anext(stream), 30)
        assert kind == "ADDED" and seen.metadata is not None and seen.metadata.name == "e"
        await stream.aclose()  # type: ignore[attr-defined]
    assert _skipped() == before + 3
    assert len(_warnings(caplog)) == 2 and "default/d" in _warnings(caplog)[1]


async def test_answers_to_writes_decode_gos_nulls(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """kube-apiserver answers a CSINode created with no drivers with ``"drivers": null``."""
    async with _client(control_plane, tmp_path) as client:
        created = await client.create(CSINode(metadata=ObjectMeta(name="node-a"),
                                              spec=CSINodeSpec(drivers=[])))
        assert created.spec.drivers == []
        raw = await client.request("GET", "/apis/storage.k8s.io/v1/csinodes/node-a")
        assert raw.json()["spec"] == {"drivers": None}
        patched = await client.patch(CSINode, "node-a", {"metadata": {"labels": {"a": "b"}}})
        assert patched.spec.drivers == [] and patched.metadata is not None
        assert patched.metadata.labels == {"a": "b"}
        replaced = await client.replace(patched)
        assert replaced.spec.drivers == []
        assert (await client.get(CSINode, "node-a")).spec.drivers == []
        assert [n.spec.drivers for n in (await client.list(CSINode)).items] == [[]]


async def test_a_request_may_wait_longer_than_the_clients_timeout_when_asked() -> None:
    """A LIST page waits as long as the server allows a request (``kube.LIST_TIMEOUT``), not the
    client's 10 s: a fleet starting together queues its lists at the server, and a page given up
    early would make the informer list again from the first page."""
    async with slowlist.serving(0.6) as url, \
            kube.Client.from_url(url, token="t", timeout=0.2) as client:
        with pytest.raises(kube.KubeError):
            await client.request("GET", "/apis/x/v1/things")
        waited = await client.request("GET", "/apis/x/v1/things", timeout=5.0)
        assert waited.json()["metadata"]["resourceVersion"] == "7"
    assert kube.LIST_TIMEOUT >= 60.0  # kube-apiserver's own limit on a request
