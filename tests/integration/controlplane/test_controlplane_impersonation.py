"""The fixture's impersonation filter, as kube-apiserver's: each Impersonate-* part authorized
for the real caller with the verb ``impersonate`` (kube's 403 on refusal), groups/UID/extras
without a user a 500, and the impersonated identity the one RBAC, the reviews and an APIService
backend (its ``X-Remote-*`` headers, no ``Impersonate-*``) see."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import httpx
import pytest

from devkit.controlplane import (
    ADMIN_TOKEN,
    ControlPlane,
    FrontProxy,
    Rule,
    UserInfo,
)
from tests.integration.controlplane import backend
from tests.support.kubectl import Kubectl

GROUP, VERSION = "example.gpustack.ai", "v1"
WIDGETS = f"/apis/{GROUP}/{VERSION}/namespaces/team-a/widgets"
REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
ALICE_TOKEN = "t-alice"
WIDGET_LIST = {"kind": "WidgetList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {},
               "items": []}  # fmt: skip


@pytest.fixture
def cp(tmp_path: pathlib.Path) -> Iterator[ControlPlane]:
    # a front proxy that publishes X-Remote-Uid, so the impersonated UID is forwarded too
    with ControlPlane(tmp_path / "cp", front_proxy=FrontProxy(uid_headers=("X-Remote-Uid",))
                      ) as plane:  # fmt: skip
        plane.add_token(ALICE_TOKEN, UserInfo("alice", uid="alice-uid", groups=("tenants",)))
        yield plane


@pytest.fixture
def widgets(cp: ControlPlane) -> Iterator[backend.Backend]:
    with backend.running(cp, GROUP, VERSION, {
        WIDGETS: lambda seen: backend.json_answer(WIDGET_LIST),
    }) as running:  # fmt: skip
        yield running


def _client(cp: ControlPlane, token: str) -> httpx.Client:
    return httpx.Client(base_url=cp.url, verify=cp.trust(), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def _may_impersonate(cp: ControlPlane) -> None:
    """alice may act as bob with group devs, extra scopes=view and UID bob-uid, and bob may
    list widgets in team-a."""
    cp.policy.grant("alice", [
        Rule(("impersonate",), ("",), ("users",), ("bob",)),
        Rule(("impersonate",), ("",), ("groups",), ("devs",)),
        Rule(("impersonate",), ("authentication.k8s.io",), ("userextras/scopes",), ("view",)),
        Rule(("impersonate",), ("authentication.k8s.io",), ("uids",), ("bob-uid",)),
    ], name="alice-impersonates-bob")  # fmt: skip
    cp.policy.grant("bob", Rule(("list",), (GROUP,), ("widgets",)), namespace="team-a",
                    name="bob-lists-widgets")  # fmt: skip


def test_the_backend_sees_the_impersonated_identity_and_no_impersonate_headers(
    cp: ControlPlane, widgets: backend.Backend
) -> None:
    _may_impersonate(cp)
    headers = [("Impersonate-User", "bob"), ("Impersonate-Group", "devs"),
               ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Uid", "bob-uid")]
    with _client(cp, ALICE_TOKEN) as client:
        listed = client.get(WIDGETS, headers=headers)
    assert listed.status_code == 200, listed.text
    assert listed.json() == WIDGET_LIST
    (seen,) = widgets.requests(WIDGETS)
    assert seen.one("X-Remote-User") == "bob"
    assert seen.all("X-Remote-Group") == ["devs", "system:authenticated"]
    assert seen.one("X-Remote-Uid") == "bob-uid"
    assert seen.one("X-Remote-Extra-Scopes") == "view"
    assert not {name for name in seen.names() if name.startswith("impersonate-")}
    assert "authorization" not in seen.names()
    # recorded as the real caller, as kube's audit log names the user who impersonated
    (entry,) = cp.recorder.requests(WIDGETS)
    assert entry.user == "alice"


def test_rbac_and_the_reviews_see_the_impersonated_user(cp: ControlPlane) -> None:
    _may_impersonate(cp)
    as_bob = {"Impersonate-User": "bob"}
    with _client(cp, ALICE_TOKEN) as client:
        review = client.post(REVIEW, json={"apiVersion": "authentication.k8s.io/v1",
                                           "kind": "SelfSubjectReview"}, headers=as_bob)
        assert review.status_code == 201, review.text
        assert review.json()["status"]["userInfo"] == {
            "username": "bob", "groups": ["system:authenticated"]}  # fmt: skip
        # bob may not list pods: the refusal names bob, not alice
        pods = client.get("/api/v1/namespaces/team-a/pods", headers=as_bob)
        assert pods.status_code == 403
        assert pods.json()["message"] == (
            'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the '
            'namespace "team-a"')


def test_a_service_account_gets_its_groups_unless_groups_are_given(cp: ControlPlane) -> None:
    sa_name = "system:serviceaccount:gpustack-system:worker"
    cp.policy.grant("alice", Rule(("impersonate",), ("",), ("serviceaccounts",), ("worker",)),
                    namespace="gpustack-system", name="alice-impersonates-worker")
    cp.policy.grant("alice", Rule(("impersonate",), ("",), ("groups",), ("ops",)),
                    name="alice-impersonates-ops")
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    with _client(cp, ALICE_TOKEN) as client:
        plain = client.post(REVIEW, json=body, headers={"Impersonate-User": sa_name})
        grouped = client.post(REVIEW, json=body, headers=[("Impersonate-User", sa_name),
                                                          ("Impersonate-Group", "ops")])
        elsewhere = client.post(REVIEW, json=body, headers={
            "Impersonate-User": "system:serviceaccount:kube-system:worker"})
    assert plain.status_code == 201, plain.text
    assert plain.json()["status"]["userInfo"] == {"username": sa_name, "groups": [
        "system:serviceaccounts", "system:serviceaccounts:gpustack-system",
        "system:authenticated"]}  # fmt: skip
    assert grouped.json()["status"]["userInfo"]["groups"] == ["ops", "system:authenticated"]
    assert elsewhere.status_code == 403
    assert elsewhere.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'serviceaccounts "worker" is forbidden: User "alice" cannot impersonate '
                   'resource "serviceaccounts" in API group "" in the namespace "kube-system"',
        "reason": "Forbidden", "details": {"name": "worker", "kind": "serviceaccounts"},
        "code": 403,
    }  # fmt: skip


@pytest.mark.parametrize(("headers", "message", "details"), [
    pytest.param(
        [("Impersonate-User", "carol")],
        'users "carol" is forbidden: User "alice" cannot impersonate resource "users" in API '
        'group "" at the cluster scope',
        {"name": "carol", "kind": "users"}, id="user"),
    pytest.param(
        [("Impersonate-User", "bob"), ("Impersonate-Group", "devs"),
         ("Impersonate-Group", "system:masters")],
        'groups "system:masters" is forbidden: User "alice" cannot impersonate resource '
        '"groups" in API group "" at the cluster scope',
        {"name": "system:masters", "kind": "groups"}, id="group"),
    pytest.param(
        [("Impersonate-User", "bob"), ("Impersonate-Extra-Scopes", "edit")],
        'userextras.authentication.k8s.io "edit" is forbidden: User "alice" cannot impersonate '
        'resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster '
        'scope',
        {"name": "edit", "group": "authentication.k8s.io", "kind": "userextras"}, id="extra"),
    pytest.param(
        [("Impersonate-User", "bob"), ("Impersonate-Uid", "root-uid")],
        'uids.authentication.k8s.io "root-uid" is forbidden: User "alice" cannot impersonate '
        'resource "uids" in API group "authentication.k8s.io" at the cluster scope',
        {"name": "root-uid", "group": "authentication.k8s.io", "kind": "uids"}, id="uid"),
])  # fmt: skip
def test_a_part_not_granted_is_kubes_403_and_nothing_is_forwarded(
    cp: ControlPlane, widgets: backend.Backend, headers: list[tuple[str, str]], message: str,
    details: dict[str, str],
) -> None:
    _may_impersonate(cp)
    with _client(cp, ALICE_TOKEN) as client:
        refused = client.get(WIDGETS, headers=headers)
    assert refused.status_code == 403, refused.text
    assert refused.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": message, "reason": "Forbidden",
                              "details": details, "code": 403}  # fmt: skip
    assert widgets.requests(WIDGETS) == []


@pytest.mark.parametrize(("headers", "requested"), [
    pytest.param([("Impersonate-Group", "devs")], "[{Group  devs    }]", id="group"),
    pytest.param([("Impersonate-Uid", "bob-uid")],
                 "[{UID  bob-uid  authentication.k8s.io/v1  }]", id="uid"),
    pytest.param([("Impersonate-Group", "a"), ("Impersonate-Group", "b"),
                  ("Impersonate-Extra-Scopes", "view"), ("Impersonate-Uid", "u")],
                 "[{Group  a    } {Group  b    } {UserExtra  view  authentication.k8s.io/v1  "
                 "scopes} {UID  u  authentication.k8s.io/v1  }]", id="all-three"),
])  # fmt: skip
def test_groups_uid_or_extras_without_a_user_are_kubes_500(
    cp: ControlPlane, headers: list[tuple[str, str]], requested: str
) -> None:
    with _client(cp, ADMIN_TOKEN) as client:  # even system:masters
        answer = client.get("/api/v1/namespaces/default/pods?limit=1", headers=headers)
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.text == (
        f'Internal Server Error: "/api/v1/namespaces/default/pods?limit=1": requested '
        f"{requested} without impersonating a user\n")


def test_system_masters_may_impersonate_anyone(
    cp: ControlPlane, widgets: backend.Backend
) -> None:
    cp.policy.grant("getter", Rule(("list",), (GROUP,), ("widgets",)), namespace="team-a",
                    name="getter-lists-widgets")
    with _client(cp, ADMIN_TOKEN) as client:
        listed = client.get(WIDGETS, headers={"Impersonate-User": "getter"})
        refused = client.get("/api/v1/namespaces/team-a/secrets",
                             headers={"Impersonate-User": "getter"})
    assert listed.status_code == 200, listed.text
    assert widgets.requests(WIDGETS)[0].one("X-Remote-User") == "getter"
    assert refused.status_code == 403
    assert 'User "getter" cannot list resource "secrets"' in refused.json()["message"]


def test_kubectl_as_is_honoured_and_refused_with_kubes_texts(
    cp: ControlPlane, tmp_path: pathlib.Path
) -> None:
    _may_impersonate(cp)
    cp.policy.grant("bob", Rule(("list",), ("",), ("configmaps",)), namespace="team-a",
                    name="bob-lists-configmaps")
    kubectl = Kubectl(cp.write_kubeconfig(tmp_path / "alice.kubeconfig", token=ALICE_TOKEN),
                      tmp_path / "cache")
    listed = kubectl.run("get", "configmaps", "-n", "team-a", "--as", "bob", "-o", "name")
    assert listed.stdout.strip() == ""
    refused = kubectl.fails("get", "configmaps", "-n", "team-a", "--as", "carol")
    assert ('Error from server (Forbidden): users "carol" is forbidden: User "alice" cannot '
            'impersonate resource "users" in API group "" at the cluster scope') in refused
