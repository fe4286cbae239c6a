"""The fixture control plane checked against reality: the official ``kubernetes`` client must
deserialize every answer into its models, and the answers must match the recorded kube-apiserver
samples field by field (which fields are present or absent, and the texts)."""

from __future__ import annotations

import datetime
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from devkit.controlplane import ADMIN_TOKEN, ControlPlane, resources
from devkit.controlplane.frontproxy import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from openapi import plugin as plugin_api
from tests.integration.controlplane import samples


@pytest.fixture
def cluster(control_plane: ControlPlane) -> ControlPlane:
    samples.recorded_cluster(control_plane)
    return control_plane


def _api(cp: ControlPlane, tmp_path: pathlib.Path, token: str = ADMIN_TOKEN) -> Any:
    path = cp.write_kubeconfig(tmp_path / f"{token}.kubeconfig", token=token)
    return config.new_client_from_config(config_file=str(path), persist_config=False)  # type: ignore[no-untyped-call]


@pytest.fixture
def admin(cluster: ControlPlane, tmp_path: pathlib.Path) -> Iterator[Any]:
    api = _api(cluster, tmp_path)
    yield api
    api.close()


def _raw(response: Any) -> Any:
    return json.loads(response.data)


def _managed_shape(answer: dict[str, Any], sample: dict[str, Any]) -> None:
    got = answer["metadata"]["managedFields"]
    want = sample["metadata"]["managedFields"]
    assert samples.shape(got) == samples.shape(want)
    assert [samples.without(m, "manager", "time") for m in got] == [
        samples.without(m, "manager", "time") for m in want
    ]


# --- authentication -------------------------------------------------------------------


def test_token_review_of_a_bound_service_account_token(admin: Any) -> None:
    sample = samples.load("tokenreview-bound-sa.json")
    api = client.AuthenticationV1Api(admin)
    body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=samples.SA_TOKEN))
    model = api.create_token_review(body)
    assert isinstance(model, client.V1TokenReview)
    assert model.status.authenticated is True
    assert model.status.user.extra["authentication.kubernetes.io/node-name"] == ["node-a"]
    answer = _raw(api.create_token_review(body, _preload_content=False))
    assert answer["status"] == sample["status"]
    assert answer["spec"] == {"token": samples.SA_TOKEN}
    assert list(answer) == ["kind", "apiVersion", "metadata", "spec", "status"]
    _managed_shape(answer, sample)
    assert answer["metadata"]["managedFields"][0]["manager"] == "OpenAPI-Generator"


def test_token_review_refusals_match_the_samples(admin: Any) -> None:
    api = client.AuthenticationV1Api(admin)
    invalid = api.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token="garbage")),
        _preload_content=False,
    )
    assert _raw(invalid)["status"] == samples.load("tokenreview-invalid.json")["status"]
    wrong = samples.load("tokenreview-wrong-audience.json")
    spec = client.V1TokenReviewSpec(token=samples.SA_TOKEN, audiences=["gpustack-model-peer"])
    answer = _raw(api.create_token_review(client.V1TokenReview(spec=spec), _preload_content=False))
    assert answer["status"] == wrong["status"]
    _managed_shape(answer, wrong)
    model = api.create_token_review(client.V1TokenReview(spec=spec))
    assert model.status.authenticated is None and model.status.error


def test_a_token_bound_to_another_audience_is_no_api_credential(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """A ServiceAccount token for a non-API audience (the plugins' port, the peer port): kube's
    authenticator refuses it as a request credential (401) and a TokenReview without audiences
    (the API's), and a review naming its audience authenticates it, saying that audience."""
    cluster.add_token("plugin-audience", samples.plugin_user(), audiences=[plugin_api.AUDIENCE])
    api = client.AuthenticationV1Api(_api(cluster, tmp_path, "plugin-audience"))
    with pytest.raises(ApiException) as refused:
        api.create_self_subject_review(client.V1SelfSubjectReview())
    assert refused.value.status == 401
    assert json.loads(refused.value.body)["reason"] == "Unauthorized"
    reviews = client.AuthenticationV1Api(_api(cluster, tmp_path))
    plain = client.V1TokenReviewSpec(token="plugin-audience")
    answer = _raw(reviews.create_token_review(client.V1TokenReview(spec=plain),
                                              _preload_content=False))
    assert answer["status"] == {"user": {}, "error": (
        f'[invalid bearer token, token audiences ["{plugin_api.AUDIENCE}"] is invalid for the '
        'target audiences ["https://kubernetes.default.svc"]]')}
    bound = client.V1TokenReviewSpec(token="plugin-audience", audiences=[plugin_api.AUDIENCE])
    model = reviews.create_token_review(client.V1TokenReview(spec=bound))
    assert model.status.authenticated is True and model.status.audiences == [plugin_api.AUDIENCE]


def test_self_subject_review_as_the_service_account(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    sample = samples.load("selfsubjectreview-sa.json")
    api = client.AuthenticationV1Api(_api(cluster, tmp_path, samples.SA_TOKEN))
    model = api.create_self_subject_review(client.V1SelfSubjectReview())
    assert model.status.user_info.username == sample["status"]["userInfo"]["username"]
    review = client.V1SelfSubjectReview()
    answer = _raw(api.create_self_subject_review(review, _preload_content=False))
    assert answer["status"] == sample["status"]
    assert samples.shape(answer["metadata"]) == samples.shape(sample["metadata"])


def test_self_subject_review_can_be_unserved_like_before_1_28(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "old", serve_selfsubjectreview=False, git_version="v1.27.9") as cp:
        api = client.AuthenticationV1Api(_api(cp, tmp_path))
        with pytest.raises(ApiException) as missing:
            api.create_self_subject_review(client.V1SelfSubjectReview())
        assert missing.value.status == 404
        assert json.loads(missing.value.body) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound",
            "details": {}, "code": 404,
        }  # fmt: skip
        assert client.VersionApi(_api(cp, tmp_path)).get_code().minor == "27"


def test_unknown_token_is_401_like_kube(cluster: ControlPlane, tmp_path: pathlib.Path) -> None:
    api = client.CoreV1Api(_api(cluster, tmp_path, "no-such-token"))
    with pytest.raises(ApiException) as refused:
        api.list_namespaced_pod("default")
    assert refused.value.status == 401
    assert json.loads(refused.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    }  # fmt: skip


def test_client_certificate_callers_are_users(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    pair = cluster.issue_client_cert("node-admin", ["ops", "readers"])
    path = cluster.write_kubeconfig(tmp_path / "cert.kubeconfig", client=pair)
    api = config.new_client_from_config(config_file=str(path), persist_config=False)  # type: ignore[no-untyped-call]
    authn = client.AuthenticationV1Api(api)
    info = authn.create_self_subject_review(client.V1SelfSubjectReview()).status.user_info
    assert info.username == "node-admin"
    assert info.groups == ["ops", "readers", "system:authenticated"]
    assert info.extra["authentication.kubernetes.io/credential-id"][0].startswith("X509SHA256=")


# --- authorization --------------------------------------------------------------------


def _sar(sample: dict[str, Any]) -> Any:
    spec = sample["spec"]
    return client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=spec.get("user"), groups=spec.get("groups"), uid=spec.get("uid"),
        resource_attributes=client.V1ResourceAttributes(**spec["resourceAttributes"])
        if "resourceAttributes" in spec else None,
        non_resource_attributes=client.V1NonResourceAttributes(**spec["nonResourceAttributes"])
        if "nonResourceAttributes" in spec else None,
    ))  # fmt: skip


@pytest.mark.parametrize("name", ["sar-allowed.json", "sar-denied.json", "sar-nonresource.json"])
def test_subject_access_reviews_match_the_samples(admin: Any, name: str) -> None:
    sample = samples.load(name)
    api = client.AuthorizationV1Api(admin)
    model = api.create_subject_access_review(_sar(sample))
    assert isinstance(model, client.V1SubjectAccessReview)
    assert model.status.allowed is sample["status"]["allowed"]
    answer = _raw(api.create_subject_access_review(_sar(sample), _preload_content=False))
    assert answer["status"] == sample["status"]
    assert answer["spec"] == sample["spec"]
    _managed_shape(answer, sample)


def test_get_does_not_grant_a_subresource(cluster: ControlPlane, admin: Any) -> None:
    cluster.policy.grant(
        "bob", samples.Rule(("get",), ("worker.gpustack.ai",), ("modelartifacts",)),
        namespace="team-a", name="bob-get",
    )  # fmt: skip
    api = client.AuthorizationV1Api(admin)

    def allowed(subresource: str) -> Any:
        attrs = client.V1ResourceAttributes(
            namespace="team-a", verb="get", group="worker.gpustack.ai",
            resource="modelartifacts", subresource=subresource, name="qwen",
        )  # fmt: skip
        spec = client.V1SubjectAccessReviewSpec(user="bob", resource_attributes=attrs)
        return api.create_subject_access_review(client.V1SubjectAccessReview(spec=spec)).status

    assert allowed("").allowed is True
    assert allowed("").reason == (
        'RBAC: allowed by RoleBinding "bob-get/team-a" of Role "bob-get" to User "bob"'
    )
    assert allowed("progress").allowed is False


def test_forbidden_status_has_the_recorded_shape(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    sample = samples.load("forbidden-status.json")
    api = client.CoreV1Api(_api(cluster, tmp_path, samples.ALICE_TOKEN))
    with pytest.raises(ApiException) as refused:
        api.list_namespaced_config_map("team-b")
    body = json.loads(refused.value.body)
    assert samples.shape(body) == samples.shape(
        samples.without(sample, "details.group")  # the core group is "" and so omitted
    )
    assert body["message"] == sample["message"].replace(
        "modelartifacts.peerbench.gpustack.test", "configmaps"
    ).replace('"modelartifacts"', '"configmaps"').replace('"peerbench.gpustack.test"', '""')
    assert body["details"] == {"kind": "configmaps"}


def test_self_subject_access_review_answers_for_the_caller(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    api = client.AuthorizationV1Api(_api(cluster, tmp_path, samples.ALICE_TOKEN))
    attrs = client.V1ResourceAttributes(
        namespace="team-a", verb="list", group="worker.gpustack.ai", resource="modelartifacts"
    )
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
    )
    assert api.create_self_subject_access_review(review).status.allowed is True
    attrs.namespace = "team-b"
    assert api.create_self_subject_access_review(review).status.allowed is False


# --- non-resource ---------------------------------------------------------------------


def test_version_matches_the_sample(admin: Any) -> None:
    sample = samples.load("version.json")
    info = client.VersionApi(admin).get_code()
    assert info.git_version == sample["gitVersion"]
    answer = _raw(client.VersionApi(admin).get_code(_preload_content=False))
    assert answer == sample


# --- objects --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "read"),
    [
        ("pod-bound-to-node.json", resources.PODS,
         lambda a: client.CoreV1Api(a).read_namespaced_pod),
        ("node.json", resources.NODES, lambda a: client.CoreV1Api(a).read_node),
        ("csinode.json", resources.CSINODES, lambda a: client.StorageV1Api(a).read_csi_node),
        ("lease.json", resources.LEASES,
         lambda a: client.CoordinationV1Api(a).read_namespaced_lease),
    ],
)  # fmt: skip
def test_recorded_objects_read_back_as_models(
    cluster: ControlPlane, admin: Any, name: str, kind: resources.Kind, read: Any
) -> None:
    sample = samples.load(name)
    cluster.seed(kind, sample)
    meta = sample["metadata"]
    args = (meta["name"], meta["namespace"]) if kind.namespaced else (meta["name"],)
    model = read(admin)(*args)
    assert model.metadata.uid == meta["uid"]
    answer = _raw(read(admin)(*args, _preload_content=False))
    assert samples.without(answer, "metadata.resourceVersion") == samples.without(
        sample, "metadata.resourceVersion"
    )


def test_extension_apiserver_authentication_has_the_recorded_keys(
    cluster: ControlPlane, admin: Any
) -> None:
    sample = samples.load("extension-apiserver-authentication.json")
    model = client.CoreV1Api(admin).read_namespaced_config_map(CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
    assert isinstance(model, client.V1ConfigMap)
    assert sorted(model.data) == sorted(sample["data"])
    for key, value in sample["data"].items():
        if key.endswith("-file"):
            assert model.data[key].startswith("-----BEGIN CERTIFICATE-----\n")
            assert model.data[key].endswith("-----END CERTIFICATE-----\n")
        else:
            assert model.data[key] == value
    assert model.data["requestheader-client-ca-file"] == cluster.front_proxy.ca_bundle.decode()


def test_pods_by_node_name_and_a_configmap_watch(cluster: ControlPlane, admin: Any) -> None:
    core = client.CoreV1Api(admin)
    sample = samples.load("pod-bound-to-node.json")
    cluster.seed(resources.PODS, sample)
    elsewhere = samples.without(sample, "metadata.uid")
    elsewhere["metadata"]["name"] = "plugin-b"
    elsewhere["spec"]["nodeName"] = "node-b"
    cluster.seed(resources.PODS, elsewhere)
    on_a = core.list_namespaced_pod("gpustack-system", field_selector="spec.nodeName=node-a")
    assert [p.metadata.name for p in on_a.items] == ["plugin-a"]
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_pod("gpustack-system", field_selector="spec.nope=x")
    assert bad.value.status == 400
    assert json.loads(bad.value.body)["message"] == "field label not supported: spec.nope"

    start = core.list_namespaced_config_map(CONFIGMAP_NAMESPACE).metadata.resource_version
    cluster.front_proxy.rotate()
    cluster.publish_authentication()
    stream = watch.Watch()  # type: ignore[no-untyped-call]
    seen = []
    for event in stream.stream(
        core.list_namespaced_config_map, CONFIGMAP_NAMESPACE, resource_version=start,
        field_selector=f"metadata.name={CONFIGMAP_NAME}", timeout_seconds=30,
    ):  # fmt: skip
        seen.append(event)
        stream.stop()
    assert seen[0]["type"] == "MODIFIED"
    assert isinstance(seen[0]["object"], client.V1ConfigMap)
    assert seen[0]["object"].data["requestheader-client-ca-file"] == (
        cluster.front_proxy.ca_bundle.decode()
    )


def test_writes_conflicts_and_deletes(admin: Any) -> None:
    core = client.CoreV1Api(admin)
    secret = core.create_namespaced_secret(
        "default", client.V1Secret(metadata=client.V1ObjectMeta(name="hub"),
                                   string_data=None, data={"token": "aGk="}),
    )  # fmt: skip
    assert secret.metadata.uid and secret.data == {"token": "aGk="}
    core.patch_namespaced_secret("hub", "default", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_secret("hub", "default", secret)
    assert stale.value.status == 409
    assert json.loads(stale.value.body)["message"] == (
        'Operation cannot be fulfilled on secrets "hub": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )
    gone = core.delete_namespaced_secret("hub", "default")  # the client hands back the raw dict
    assert gone == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": "hub", "kind": "secrets", "uid": secret.metadata.uid},
    }  # fmt: skip
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_secret("hub", "default")
    assert json.loads(missing.value.body)["message"] == 'secrets "hub" not found'
    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_config_map(
            "absent", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"))
        )
    assert no_namespace.value.status == 404


def test_leases_events_and_claims(admin: Any) -> None:
    coordination = client.CoordinationV1Api(admin)
    lease = coordination.create_namespaced_lease("kube-system", client.V1Lease(
        metadata=client.V1ObjectMeta(name="model-manager"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    ))  # fmt: skip
    lease.spec.holder_identity = "b"
    renewed = coordination.replace_namespaced_lease("model-manager", "kube-system", lease)
    assert renewed.spec.holder_identity == "b"
    with pytest.raises(ApiException) as lost:
        coordination.replace_namespaced_lease("model-manager", "kube-system", lease)
    assert lost.value.status == 409

    core = client.CoreV1Api(admin)
    event = core.create_namespaced_event("default", client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="nms."),
        involved_object=client.V1ObjectReference(kind="Node", name="node-a"),
        reason="InvalidSetting", message="watermarks out of range", type="Warning",
    ))  # fmt: skip
    assert event.metadata.name.startswith("nms.")
    by_reason = core.list_namespaced_event("default", field_selector="reason=InvalidSetting")
    assert [e.metadata.name for e in by_reason.items] == [event.metadata.name]
    modern = client.EventsV1Api(admin).create_namespaced_event("default", client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="e1"), reason="Resolved",
        event_time=datetime.datetime(2026, 12, 1, 9, 0, tzinfo=datetime.UTC),
        reporting_controller="model-manager", reporting_instance="x", action="Resolve",
        type="Normal",
    ))  # fmt: skip
    assert modern.reason == "Resolved"

    create_claim = core.create_namespaced_persistent_volume_claim
    claim = create_claim("default", client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name="weights"),
        spec=client.V1PersistentVolumeClaimSpec(access_modes=["ReadOnlyMany"]),
    ))  # fmt: skip
    assert claim.status.phase == "Pending"
    deleted = core.delete_namespaced_persistent_volume_claim("weights", "default")
    assert isinstance(deleted, client.V1PersistentVolumeClaim)


def test_node_configz_through_the_proxy(cluster: ControlPlane, admin: Any) -> None:
    cluster.seed(resources.NODES, samples.load("node.json"))
    cluster.set_configz("node-a", {"imageGCHighThresholdPercent": 85})
    core = client.CoreV1Api(admin)
    answer = core.connect_get_node_proxy_with_path("node-a", "configz", _preload_content=False)
    assert json.loads(answer.data) == {"kubeletconfig": {"imageGCHighThresholdPercent": 85}}
    cluster.set_configz_error("node-a")
    with pytest.raises(ApiException) as unreachable:
        core.connect_get_node_proxy_with_path("node-a", "configz")
    assert unreachable.value.status == 503
