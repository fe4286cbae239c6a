"""``kubectl auth can-i`` (with ``--list``) and ``kubectl auth whoami`` in standalone mode, with
``--as``/``--as-group`` impersonation, decided by the same local policy as every request; the
oldest and newest supported kubectl."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.apiserver import test_standalone_authorization as authorization_suite
from tests.support import apiserver as support
from tests.support import kubectl as kubectl_support
from tests.support.kubectl import Kubectl

POLICY = authorization_suite.POLICY  # alice reads team-a's artifacts and their progress
BINARIES = [pytest.param(kubectl_support.OLDEST, id="1.27"),
            pytest.param(kubectl_support.NEWEST, id="1.33")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    data_dir = tmp_path_factory.mktemp("self-reviews")
    (data_dir / "policy.yaml").write_text(POLICY)
    with support.running(data_dir) as running:
        yield running


def _kubectl(server: support.RunningServer, tmp: pathlib.Path, binary: pathlib.Path) -> Kubectl:
    if not binary.exists():
        pytest.skip(f"{binary} is not installed")
    return Kubectl(server.kubeconfig, tmp / "cache", binary)


@pytest.mark.parametrize("binary", BINARIES)
def test_can_i_answers_as_the_policy_decides(server: support.RunningServer,
                                            tmp_path: pathlib.Path,
                                            binary: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path, binary)
    alice = ("--as", "alice")
    assert kubectl.run("auth", "can-i", "list", "modelartifacts", "-n", "team-a",
                       *alice).stdout.strip() == "yes"
    refused = kubectl.run("auth", "can-i", "list", "modelartifacts", "-n", "team-b", *alice,
                          check=False)
    assert (refused.returncode, refused.stdout.strip()) == (1, "no")
    refused = kubectl.run("auth", "can-i", "delete", "modelartifacts/qwen", "-n", "team-a",
                          *alice, check=False)
    assert (refused.returncode, refused.stdout.strip()) == (1, "no")
    assert kubectl.run("auth", "can-i", "get", "modelartifacts", "--subresource=progress",
                       "-n", "team-a", *alice).stdout.strip() == "yes"
    # the admin (system:masters) may do everything; a group given with --as-group counts
    assert kubectl.run("auth", "can-i", "delete", "nodemodelstores").stdout.strip() == "yes"
    assert kubectl.run("auth", "can-i", "delete", "nodemodelstores", "--as", "bob",
                       "--as-group", "system:masters").stdout.strip() == "yes"
    assert kubectl.run("auth", "can-i", "get", "/version", "--as", "bob").stdout.strip() == "yes"


@pytest.mark.parametrize("binary", BINARIES)
def test_can_i_list_shows_the_rules(server: support.RunningServer, tmp_path: pathlib.Path,
                                    binary: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path, binary)
    listed = kubectl.run("auth", "can-i", "--list", "-n", "team-a", "--as", "alice").stdout
    rows = {line.split()[0]: line for line in listed.splitlines()[1:] if line.strip()}
    assert "modelartifacts.worker.gpustack.ai" in rows, listed
    assert "[get list watch]" in rows["modelartifacts.worker.gpustack.ai"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rows, listed
    elsewhere = kubectl.run("auth", "can-i", "--list", "-n", "team-b", "--as", "alice").stdout
    assert "modelartifacts.worker.gpustack.ai" not in elsewhere


@pytest.mark.parametrize("binary", BINARIES)
def test_whoami_names_the_caller(server: support.RunningServer, tmp_path: pathlib.Path,
                                 binary: pathlib.Path) -> None:
    kubectl = _kubectl(server, tmp_path, binary)
    admin = json.loads(kubectl.run("auth", "whoami", "-o", "json").stdout)
    assert admin["status"]["userInfo"]["username"] == "admin"
    assert "system:masters" in admin["status"]["userInfo"]["groups"]
    alice = json.loads(kubectl.run("auth", "whoami", "-o", "json", "--as", "alice",
                                   "--as-group", "tenants").stdout)
    assert alice["status"]["userInfo"]["username"] == "alice"
    assert set(alice["status"]["userInfo"]["groups"]) == {"tenants", "system:authenticated"}


def test_bad_reviews_are_refused_naming_the_field(server: support.RunningServer) -> None:
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    with server.client() as client:
        both = client.post(path, json={"spec": {"resourceAttributes": {"verb": "get"},
                                                "nonResourceAttributes": {"path": "/x"}}})
        neither = client.post(path, json={"spec": {}})
        wrong = client.post(path, json={"spec": {"resourceAttributes": {"verb": 3}}})
        long = client.post(path, json={"spec": {"resourceAttributes": {"name": "n" * 5000}}})
        get = client.get(path)
    for response in (both, neither):
        assert response.status_code == 422, response.text
        assert ("exactly one of nonResourceAttributes or resourceAttributes must be specified"
                in response.json()["message"])
    assert wrong.status_code == 422 and "spec.resourceAttributes.verb" in wrong.text
    assert long.status_code == 422 and "Too long" in long.text and "nnnnnnnnnn" not in long.text
    assert get.status_code == 405 and get.json()["kind"] == "Status"


def test_a_caller_without_a_token_may_not_ask(server: support.RunningServer) -> None:
    with httpx.Client(base_url=server.url, verify=support.ssl_context(server.ca_file)) as anon:
        refused = anon.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
    assert refused.status_code == 403, refused.text
    assert ('User \\"system:anonymous\\" cannot create resource \\"selfsubjectreviews\\"'
            in refused.text)
