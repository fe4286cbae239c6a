"""Review bodies: what we send equals what kube's webhook clients send; what kube answers (the
recorded samples) parses into the right outcome."""

from __future__ import annotations

from apiserver.auth import attributes, reviews
from apiserver.auth import user as users
from tests.unit.apiserver.auth import samples


def test_sar_spec_equals_the_recorded_ones() -> None:
    for name in ("sar-allowed", "sar-denied"):
        recorded = samples.load(name)["spec"]
        alice = users.UserInfo(recorded["user"], uid=recorded["uid"],
                               groups=tuple(recorded["groups"]))
        ra = recorded["resourceAttributes"]
        found = attributes.parse(
            alice, "GET",
            f"/apis/{ra['group']}/v1/namespaces/{ra['namespace']}/modelartifacts/{ra['name']}/"
            "progress", "")
        spec = reviews.access_review_spec(found)
        assert spec["resourceAttributes"] == {**ra, "version": "v1"}
        assert {k: v for k, v in spec.items() if k != "resourceAttributes"} == {
            k: v for k, v in recorded.items() if k != "resourceAttributes"}


def test_non_resource_sar_spec_equals_the_recorded_one() -> None:
    recorded = samples.load("sar-nonresource")["spec"]
    aggregator = users.UserInfo(recorded["user"], groups=tuple(recorded["groups"]))
    spec = reviews.access_review_spec(attributes.parse(aggregator, "GET", "/openapi/v2", ""))
    assert spec == recorded


def test_sar_answers() -> None:
    allowed = reviews.parse_access_review(samples.load("sar-allowed"))
    assert allowed.allowed and not allowed.denied and allowed.reason.startswith("RBAC: allowed")
    denied = reviews.parse_access_review(samples.load("sar-denied"))
    assert not denied.allowed and not denied.denied and denied.reason == ""
    assert reviews.parse_access_review({"status": "nonsense"}).allowed is False
    assert reviews.parse_access_review([]).allowed is False


def test_token_review_answers() -> None:
    bound = reviews.parse_token_review(samples.load("tokenreview-bound-sa"))
    assert bound.authenticated and bound.user is not None
    assert bound.user.name == "system:serviceaccount:gpustack-system:model-manager-node"
    assert bound.user.extra[users.NODE_NAME] == ("node-a",)
    assert bound.user.extra[users.POD_NAME] == ("plugin-a",)
    assert bound.audiences == ("https://kubernetes.default.svc",)
    invalid = reviews.parse_token_review(samples.load("tokenreview-invalid"))
    assert not invalid.authenticated and invalid.error == "invalid bearer token"
    assert invalid.user is None  # "user": {} names nobody
    wrong = reviews.parse_token_review(samples.load("tokenreview-wrong-audience"))
    assert not wrong.authenticated and "is invalid for the target audiences" in wrong.error


def test_token_review_request_body() -> None:
    assert reviews.token_review("t") == {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "t"}}
    assert reviews.token_review("t", ("a", "b"))["spec"] == {"token": "t", "audiences": ["a", "b"]}


def test_self_subject_review_answer() -> None:
    found = reviews.user_info(samples.load("selfsubjectreview-sa")["status"]["userInfo"])
    assert found is not None
    assert found.name == "system:serviceaccount:gpustack-system:model-manager-node"
    assert found.uid == "13dd404c-0056-41bf-b858-e4232a8c48a2"
    assert users.AUTHENTICATED in found.groups
    assert reviews.user_info({}) is None
