"""The same calls through kube/ (lightkube's typed models): every answer of the fixture control
plane decodes into lightkube's models and round-trips to the recorded sample."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from lightkube.models.authentication_v1 import TokenReviewSpec
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authentication_v1 import SelfSubjectReview, TokenReview
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Node, PersistentVolumeClaim, Pod, Secret
from lightkube.resources.storage_v1 import CSINode

import kube
from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from devkit.controlplane.frontproxy import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from kube import decoding
from tests.integration.controlplane import samples


@pytest.fixture
def cluster(control_plane: ControlPlane) -> ControlPlane:
    samples.recorded_cluster(control_plane)
    return control_plane


def _client(cp: ControlPlane, tmp_path: pathlib.Path, token: str = ADMIN_TOKEN) -> kube.Client:
    return kube.Client.from_kubeconfig(
        cp.write_kubeconfig(tmp_path / f"{token}.kubeconfig", token=token)
    )


async def test_reviews_decode_into_lightkube_models(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    async with _client(cluster, tmp_path) as client:
        review = await client.create(TokenReview(spec=TokenReviewSpec(token=samples.SA_TOKEN)))
        assert review.status is not None and review.status.user is not None
        assert review.status.to_dict() == samples.load("tokenreview-bound-sa.json")["status"]
        refused = await client.create(TokenReview(spec=TokenReviewSpec(token="nope")))
        assert refused.status is not None and refused.status.authenticated is None
        assert refused.status.error == "invalid bearer token"

        sample = samples.load("sar-allowed.json")
        attrs = ResourceAttributes(**sample["spec"]["resourceAttributes"])
        sar = await client.create(SubjectAccessReview(spec=SubjectAccessReviewSpec(
            user="alice", groups=["tenants", "system:authenticated"], uid="alice-uid",
            resourceAttributes=attrs,
        )))  # fmt: skip
        assert sar.status is not None
        assert sar.status.to_dict() == sample["status"]
        assert sar.metadata is not None and sar.metadata.managedFields
        assert sar.metadata.managedFields[0].manager == "model-manager"

    async with _client(cluster, tmp_path, samples.SA_TOKEN) as plugin:
        me = await plugin.create(SelfSubjectReview())
        assert me.status is not None and me.status.userInfo is not None
        expected = samples.load("selfsubjectreview-sa.json")["status"]["userInfo"]
        assert me.status.userInfo.to_dict() == expected


@pytest.mark.parametrize(
    ("name", "kind", "model"),
    [
        ("pod-bound-to-node.json", resources.PODS, Pod),
        ("node.json", resources.NODES, Node),
        ("csinode.json", resources.CSINODES, CSINode),
        ("lease.json", resources.LEASES, Lease),
        # Recorded from a real node (kube-samples/README.md): kubelet's CSINode before any
        # driver registers, its Node and node Lease, an empty ConfigMap, Secret and claim.
        ("csinode-no-drivers.json", resources.CSINODES, CSINode),
        ("node-ready.json", resources.NODES, Node),
        ("lease-node.json", resources.LEASES, Lease),
        ("pod-running.json", resources.PODS, Pod),
        ("configmap-empty.json", resources.CONFIGMAPS, ConfigMap),
        ("secret-empty.json", resources.SECRETS, Secret),
        ("pvc-pending.json", resources.PVCS, PersistentVolumeClaim),
    ],
)
async def test_recorded_objects_round_trip(
    cluster: ControlPlane, tmp_path: pathlib.Path, name: str, kind: resources.Kind, model: Any
) -> None:
    sample = samples.load(name)
    cluster.seed(kind, sample)
    meta = sample["metadata"]
    async with _client(cluster, tmp_path) as client:
        obj = await client.get(model, meta["name"], namespace=meta.get("namespace"))
        path = kind.base_path(meta.get("namespace", "")) + "/" + meta["name"]
        raw = await client.request("GET", path)
    expected = samples.without(sample, "metadata.resourceVersion")
    assert samples.without(raw.json(), "metadata.resourceVersion") == expected
    # lightkube's models drop explicit nulls (CSINode's "topologyKeys": null) and hold a null
    # where Go writes a nil required list as [] (kubelet's CSINode: "drivers": null, filled by
    # kube.decoding); nothing else.
    filled = decoding.fill_nulls(model, json.loads(json.dumps(expected)))
    assert samples.without(obj.to_dict(), "metadata.resourceVersion") == _no_nulls(filled)


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


async def test_authentication_configmap_and_version(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    async with _client(cluster, tmp_path) as client:
        config_map = await client.get(ConfigMap, CONFIGMAP_NAME, namespace=CONFIGMAP_NAMESPACE)
        assert config_map.data is not None
        sample = samples.load("extension-apiserver-authentication.json")
        assert sorted(config_map.data) == sorted(sample["data"])
        assert config_map.data["requestheader-allowed-names"] == '["front-proxy-client"]'
        assert await client.version() == samples.load("version.json")


async def test_pods_on_a_node_are_listed_by_field_selector(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    cluster.seed(resources.PODS, samples.load("pod-bound-to-node.json"))
    async with _client(cluster, tmp_path) as client:
        on_a = await client.list(
            Pod, namespace="gpustack-system", fields={"spec.nodeName": "node-a"}
        )
        on_b = await client.list(
            Pod, namespace="gpustack-system", fields={"spec.nodeName": "node-b"}
        )
        everywhere = await client.list(Pod, namespace="*")
    assert [p.metadata.name for p in on_a.items if p.metadata] == ["plugin-a"]
    assert on_b.items == []
    assert len(everywhere.items) == 1
