"""``kubectl auth can-i`` (with ``--list``) and ``kubectl auth whoami`` against the standalone
server over TLS, as the admin, as a tenant with its own token and with ``--as``/``--as-group``
impersonation, decided by the same local policy as every request; the review groups in
discovery so kubectl knows them; the oldest and newest supported kubectl."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import httpx
import pytest
import yaml

from devkit.harness import apiserver as support
from tests.integration.apiserver import test_standalone_authorization as authorization_suite
from tests.support import kubectl as kubectl_support
from tests.support.kubectl import Kubectl

POLICY = authorization_suite.POLICY  # alice reads team-a's artifacts and their progress
ALICE_TOKEN = "alice-tenant-token"
# kube's token file, plus this project's fifth column: the user's extra
TOKENS = f'{ALICE_TOKEN},alice,alice-uid,"tenants",team=a\n'
NEWEST = (kubectl_support.NEWEST if kubectl_support.NEWEST.exists()
          else kubectl_support.DEFAULT)
BINARIES = [pytest.param(kubectl_support.OLDEST, id="oldest"),
            pytest.param(NEWEST, id="newest")]
UNKNOWN = "doesn't have a resource type"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    data_dir = tmp_path_factory.mktemp("kubectl-auth")
    (data_dir / "policy.yaml").write_text(POLICY)
    tokens = data_dir / "tokens.csv"
    tokens.write_text(TOKENS)  # kept by the first start, which adds the admin and the others
    tokens.chmod(0o600)
    with support.running(data_dir) as running:
        yield running


@pytest.fixture(params=BINARIES)
def binary(request: pytest.FixtureRequest) -> pathlib.Path:
    found: pathlib.Path = request.param
    return found


def _kubeconfig_of(server: support.RunningServer, token: str, path: pathlib.Path) -> pathlib.Path:
    document = yaml.safe_load(server.kubeconfig.read_text())
    document["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


@pytest.fixture
def admin(server: support.RunningServer, tmp_path: pathlib.Path, binary: pathlib.Path) -> Kubectl:
    return kubectl_support.of_version(binary, server.kubeconfig, tmp_path / "admin-cache")


@pytest.fixture
def alice(server: support.RunningServer, tmp_path: pathlib.Path, binary: pathlib.Path) -> Kubectl:
    config = _kubeconfig_of(server, ALICE_TOKEN, tmp_path / "alice.kubeconfig")
    return kubectl_support.of_version(binary, config, tmp_path / "alice-cache")


def _can_i(kubectl: Kubectl, *args: str) -> str:
    """yes or no, checking kubectl's exit code agrees and that it knew the resource."""
    result = kubectl.run("auth", "can-i", *args, check=False)
    answer = result.stdout.strip()
    assert (answer, result.returncode) in (("yes", 0), ("no", 1)), result
    assert UNKNOWN not in result.stderr, result.stderr
    return answer


def test_a_tenant_may_what_its_role_grants(alice: Kubectl) -> None:
    assert _can_i(alice, "list", "modelartifacts", "-n", "team-a") == "yes"
    assert _can_i(alice, "get", "mart/qwen", "--subresource=progress", "-n", "team-a") == "yes"
    assert _can_i(alice, "list", "modelartifacts", "-n", "team-b") == "no"
    assert _can_i(alice, "delete", "modelartifacts/qwen", "-n", "team-a") == "no"
    assert _can_i(alice, "delete", "nodemodelstores") == "no"
    assert _can_i(alice, "get", "/version") == "yes"
    assert _can_i(alice, "get", "/metrics") == "no"
    # every authenticated user may ask (system:basic-user), and kubectl finds the kinds
    assert _can_i(alice, "create", "selfsubjectaccessreviews") == "yes"
    assert _can_i(alice, "create", "selfsubjectreviews.authentication.k8s.io") == "yes"


def test_the_admin_may_everything_and_impersonates(admin: Kubectl) -> None:
    assert _can_i(admin, "delete", "nodemodelstores") == "yes"
    assert _can_i(admin, "create", "modelartifacts", "-n", "team-b") == "yes"
    # the impersonated user is the subject, with the impersonated groups
    alice = ("--as", "alice", "--as-group", "tenants")
    assert _can_i(admin, "list", "modelartifacts", "-n", "team-a", *alice) == "yes"
    assert _can_i(admin, "list", "modelartifacts", "-n", "team-b", *alice) == "no"
    assert _can_i(admin, "delete", "nodemodelstores", "--as", "bob") == "no"
    assert _can_i(admin, "delete", "nodemodelstores", "--as", "bob",
                  "--as-group", "system:masters") == "yes"
    assert _can_i(admin, "get", "modelartifacts", "-n", "team-a", "--as", "carol",
                  "--as-group", "getters") == "yes"


def _rows(listed: str) -> dict[str, str]:
    lines = listed.splitlines()
    assert lines[0].split()[:2] == ["Resources", "Non-Resource"], listed
    return {line.split()[0]: line for line in lines[1:] if line.strip()}


def test_can_i_list_shows_the_rules(admin: Kubectl, alice: Kubectl) -> None:
    rows = _rows(alice.run("auth", "can-i", "--list", "-n", "team-a").stdout)
    assert "[get list watch]" in rows["modelartifacts.worker.gpustack.ai"]
    assert "[get list watch]" in rows["modelartifacts.worker.gpustack.ai/progress"]
    assert "[create]" in rows["selfsubjectaccessreviews.authorization.k8s.io"]
    assert "[create]" in rows["selfsubjectreviews.authentication.k8s.io"]
    assert "[/version]" in rows and "*.*" not in rows
    elsewhere = _rows(alice.run("auth", "can-i", "--list", "-n", "team-b").stdout)
    assert "modelartifacts.worker.gpustack.ai" not in elsewhere
    impersonated = admin.run("auth", "can-i", "--list", "-n", "team-a", "--as", "alice").stdout
    assert _rows(impersonated) == rows
    everything = _rows(admin.run("auth", "can-i", "--list").stdout)
    assert "[*]" in everything["*.*"]


def test_whoami_names_the_caller(admin: Kubectl, alice: Kubectl) -> None:
    table = admin.run("auth", "whoami").stdout
    assert table.split("\n")[1].split() == ["Username", "admin"], table
    assert "[system:masters system:authenticated]" in table
    own = json.loads(alice.run("auth", "whoami", "-o", "json").stdout)
    assert own["kind"] == "SelfSubjectReview"
    assert own["status"]["userInfo"] == {
        "username": "alice", "uid": "alice-uid", "groups": ["tenants", "system:authenticated"],
        "extra": {"team": ["a"]}}
    impersonated = json.loads(admin.run("auth", "whoami", "-o", "json", "--as", "alice",
                                        "--as-group", "tenants").stdout)
    assert impersonated["status"]["userInfo"] == {
        "username": "alice", "groups": ["tenants", "system:authenticated"]}


def test_discovery_names_the_review_groups(alice: Kubectl) -> None:
    listed = alice.run("api-resources", "--api-group=authorization.k8s.io", "-o", "name").stdout
    assert listed.split() == ["selfsubjectaccessreviews.authorization.k8s.io",
                              "selfsubjectrulesreviews.authorization.k8s.io"]
    listed = alice.run("api-resources", "--api-group=authentication.k8s.io", "-o", "name").stdout
    assert listed.split() == ["selfsubjectreviews.authentication.k8s.io"]
    versions = alice.run("api-versions").stdout.split()
    assert {"authentication.k8s.io/v1", "authorization.k8s.io/v1",
            "worker.gpustack.ai/v1"} <= set(versions)


def test_bad_reviews_are_refused_naming_the_field(server: support.RunningServer) -> None:
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    with server.client() as client:
        both = client.post(path, json={"spec": {"resourceAttributes": {"verb": "get"},
                                                "nonResourceAttributes": {"path": "/x"}}})
        neither = client.post(path, json={"spec": {}})
        wrong = client.post(path, json={"spec": {"resourceAttributes": {"verb": 3}}})
        long = client.post(path, json={"spec": {"resourceAttributes": {"name": "n" * 5000}}})
        kind = client.post(path, json={"kind": "x" * 5000, "spec": {}})
        get = client.get(path)
    for response in (both, neither):
        assert response.status_code == 422, response.text
        assert ("exactly one of nonResourceAttributes or resourceAttributes must be specified"
                in response.json()["message"])
    assert wrong.status_code == 422 and "spec.resourceAttributes.verb" in wrong.text
    assert long.status_code == 422 and "Too long" in long.text and "nnnnnnnnnn" not in long.text
    assert kind.status_code == 400 and len(kind.content) < 1024, kind.text
    assert get.status_code == 405 and get.json()["kind"] == "Status"


def test_a_caller_without_a_token_may_not_ask(server: support.RunningServer) -> None:
    with httpx.Client(base_url=server.url, verify=support.ssl_context(server.ca_file)) as anon:
        refused = anon.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
    assert refused.status_code == 403, refused.text
    assert ('User \\"system:anonymous\\" cannot create resource \\"selfsubjectreviews\\"'
            in refused.text)
