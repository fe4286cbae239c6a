"""Credentials that change under a running client: exec plugins and the projected
ServiceAccount token of in-cluster mode (rotated mid-way)."""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import sys

import pytest
import yaml

import kube
from devkit.controlplane import API_AUDIENCE, ControlPlane, UserInfo
from kube.auth import ExecCredentialAuth, ExecSpec

V1 = "client.authentication.k8s.io/v1"
PLUGIN = """\
import json, os, pathlib, sys
state = pathlib.Path(sys.argv[1])
with open(state / "runs", "a") as runs:
    runs.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
if (state / "fail").exists():
    print("plugin: credentials expired, run login", file=sys.stderr)
    sys.exit(3)
status = {"token": (state / "token").read_text().strip()}
expires = (state / "expires").read_text().strip() if (state / "expires").exists() else ""
if expires:
    status["expirationTimestamp"] = expires
print(json.dumps({"apiVersion": sys.argv[2], "kind": "ExecCredential", "status": status}))
"""


@pytest.fixture
def plugin_state(tmp_path: pathlib.Path) -> pathlib.Path:
    state = tmp_path / "plugin"
    state.mkdir()
    (state / "plugin.py").write_text(PLUGIN)
    (state / "token").write_text("exec-token-1")
    return state


def _runs(state: pathlib.Path) -> list[str]:
    path = state / "runs"
    return path.read_text().splitlines() if path.exists() else []


def _exec_kubeconfig(
    cp: ControlPlane, tmp_path: pathlib.Path, state: pathlib.Path, api_version: str
) -> pathlib.Path:
    return cp.write_kubeconfig(
        tmp_path / "exec.kubeconfig",
        exec_command=[sys.executable, str(state / "plugin.py"), str(state), api_version],
        exec_api_version=api_version,
    )


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
async def test_exec_plugin_token_is_used_and_cached(
    control_plane: ControlPlane, tmp_path: pathlib.Path, plugin_state: pathlib.Path,
    api_version: str,
) -> None:  # fmt: skip
    control_plane.add_token("exec-token-1", UserInfo("exec-user"))
    path = _exec_kubeconfig(control_plane, tmp_path, plugin_state, api_version)
    async with kube.Client.from_kubeconfig(path) as client:
        for _ in range(3):
            await client.version()
    runs = _runs(plugin_state)
    assert len(runs) == 1
    assert json.loads(runs[0]) == {
        "apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False},
    }  # fmt: skip
    users = {r.user for r in control_plane.recorder.requests("/version")}
    assert users == {"exec-user"}


async def test_exec_plugin_runs_again_after_a_401(
    control_plane: ControlPlane, tmp_path: pathlib.Path, plugin_state: pathlib.Path
) -> None:
    control_plane.add_token("exec-token-1", UserInfo("exec-user"))
    path = _exec_kubeconfig(control_plane, tmp_path, plugin_state, V1)
    async with kube.Client.from_kubeconfig(path) as client:
        await client.version()
        control_plane.remove_token("exec-token-1")
        control_plane.add_token("exec-token-2", UserInfo("exec-user-2"))
        (plugin_state / "token").write_text("exec-token-2")
        await client.version()
    assert len(_runs(plugin_state)) == 2
    assert [r.code for r in control_plane.recorder.requests("/version")] == [200, 401, 200]
    assert control_plane.recorder.requests("/version")[-1].user == "exec-user-2"


async def test_exec_plugin_token_is_renewed_at_its_expiration(
    control_plane: ControlPlane, tmp_path: pathlib.Path, plugin_state: pathlib.Path
) -> None:
    control_plane.add_token("exec-token-1", UserInfo("exec-user"))
    (plugin_state / "expires").write_text("2030-01-01T00:00:00Z")
    now = [datetime.datetime(2029, 12, 31, 23, 0, tzinfo=datetime.UTC)]
    spec = ExecSpec(
        "client.authentication.k8s.io/v1",
        sys.executable,
        (str(plugin_state / "plugin.py"), str(plugin_state), "client.authentication.k8s.io/v1"),
    )
    path = control_plane.write_kubeconfig(tmp_path / "k", token="unused")
    config = kube.from_kubeconfig(path)
    auth = ExecCredentialAuth(spec, clock=lambda: now[0])
    async with kube.Client(kube.ClusterConfig(config.single, auth, "test")) as client:
        await client.version()
        await client.version()
        assert auth.runs == 1
        now[0] = datetime.datetime(2030, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)
        await client.version()
        assert auth.runs == 2


async def test_exec_plugin_failure_is_a_credential_error(
    control_plane: ControlPlane, tmp_path: pathlib.Path, plugin_state: pathlib.Path
) -> None:
    (plugin_state / "fail").write_text("")
    path = _exec_kubeconfig(control_plane, tmp_path, plugin_state, V1)
    async with kube.Client.from_kubeconfig(path) as client:
        with pytest.raises(kube.CredentialError) as caught:
            await client.version()
    assert "exited with 3" in caught.value.message
    assert "run login" in caught.value.message
    assert control_plane.recorder.count("/version") == 0


async def test_exec_plugin_with_an_unknown_api_version_is_refused(
    control_plane: ControlPlane, tmp_path: pathlib.Path, plugin_state: pathlib.Path
) -> None:
    path = _exec_kubeconfig(
        control_plane, tmp_path, plugin_state, "client.authentication.k8s.io/v1alpha1"
    )
    with pytest.raises(kube.CredentialError, match="not supported"):
        kube.Client.from_kubeconfig(path)


async def test_in_cluster_token_rotation_is_picked_up(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    first, plugin, _pod = control_plane.plugin_pod("node-a")
    directory = tmp_path / "serviceaccount"
    env = control_plane.write_service_account(directory, first)
    async with kube.Client.in_cluster(env=env, service_account_dir=directory) as c:
        assert c.namespace == "gpustack-system"
        await c.version()
        control_plane.add_token("sa-token-2", plugin, audiences=[API_AUDIENCE])
        control_plane.write_service_account(directory, "sa-token-2")
        control_plane.remove_token(first)
        await c.version()
    requests = control_plane.recorder.requests("/version")
    assert [(r.code, r.user) for r in requests] == [(200, plugin.name)] * 2


async def test_in_cluster_rereads_the_token_after_a_401(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    """A rewrite the stat check cannot see (same inode, size and mtime) is caught by the 401."""
    control_plane.add_token("sa-token-A", UserInfo("sa"))
    directory = tmp_path / "serviceaccount"
    env = control_plane.write_service_account(directory, "sa-token-A")
    token = directory / "token"
    async with kube.Client.in_cluster(env=env, service_account_dir=directory) as c:
        await c.version()
        before = os.stat(token)
        with open(token, "r+") as handle:
            handle.write("sa-token-B")
        os.utime(token, ns=(before.st_atime_ns, before.st_mtime_ns))
        control_plane.remove_token("sa-token-A")
        control_plane.add_token("sa-token-B", UserInfo("sa-b"))
        await c.version()
    requests = control_plane.recorder.requests("/version")
    assert [(r.code, r.user) for r in requests] == [
        (200, "sa"), (401, ""), (200, "sa-b"),
    ]  # fmt: skip


def test_in_cluster_needs_the_environment(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kube.ConfigError, match="KUBERNETES_SERVICE_HOST"):
        kube.in_cluster(env={}, service_account_dir=tmp_path)
    with pytest.raises(kube.ConfigError, match="missing"):
        kube.in_cluster(
            env={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            service_account_dir=tmp_path,
        )


async def test_token_file_in_a_kubeconfig_is_read(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    control_plane.add_token("file-token", UserInfo("from-file"))
    (tmp_path / "token").write_text("file-token\n")
    path = control_plane.write_kubeconfig(tmp_path / "k", token_file=tmp_path / "token")
    document = yaml.safe_load(path.read_text())
    assert document["users"][0]["user"] == {"tokenFile": str(tmp_path / "token")}
    async with kube.Client.from_kubeconfig(path) as client:
        await client.version()
    assert control_plane.recorder.requests("/version")[0].user == "from-file"


async def test_a_plugin_pod_token_reviews_with_its_pod_and_node(
    control_plane: ControlPlane, tmp_path: pathlib.Path
) -> None:
    from lightkube.models.authentication_v1 import TokenReviewSpec
    from lightkube.resources.authentication_v1 import TokenReview
    from lightkube.resources.core_v1 import Pod

    token, user, pod = control_plane.plugin_pod("node-b")
    admin = control_plane.write_kubeconfig(tmp_path / "admin", token="fixture-admin-token")
    async with kube.Client.from_kubeconfig(admin) as client:
        review = await client.create(TokenReview(spec=TokenReviewSpec(token=token)))
        assert review.status is not None and review.status.user is not None
        extra = review.status.user.extra or {}
        assert extra["authentication.kubernetes.io/node-name"] == ["node-b"]
        assert extra["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
        found = await client.get(Pod, pod["metadata"]["name"], namespace="gpustack-system")
        assert found.spec is not None and found.spec.nodeName == "node-b"
        peer = await client.create(
            TokenReview(spec=TokenReviewSpec(token=token, audiences=["gpustack-model-peer"]))
        )
        assert peer.status is not None and peer.status.authenticated is None
    assert user.name == "system:serviceaccount:gpustack-system:model-manager-node"
