"""Standalone preparation: certs, tokens and kubeconfigs created once and reused."""

from __future__ import annotations

import pathlib
import stat

import yaml

from apiserver.auth import static, user
from apiserver.flags import cli
from apiserver.wiring import standalone


def _prepare(data_dir: pathlib.Path, *extra: str) -> standalone.Prepared:
    argv = ["--standalone", "--data-dir", str(data_dir), "--port", "9443", *extra]
    return standalone.prepare(cli.parse(argv))


def test_creates_everything(tmp_path: pathlib.Path) -> None:
    prepared = _prepare(tmp_path / "d")
    data = tmp_path / "d"
    for name in ("ca.crt", "ca.key", "serving.crt", "serving.key", "tokens.csv",
                 "kubeconfig", "worker.kubeconfig", "plugin.kubeconfig",
                 "policy.yaml"):  # fmt: skip
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
    tokens = static.load(data / "tokens.csv")
    config = yaml.safe_load(prepared.kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:9443"
    admin = tokens.find(config["users"][0]["user"]["token"])
    assert admin is not None
    assert admin.name == "admin"
    assert user.MASTERS in admin.groups
    worker_config = yaml.safe_load(prepared.worker_kubeconfig.read_text())
    worker = tokens.find(worker_config["users"][0]["user"]["token"])
    assert worker is not None
    assert worker.name == prepared.settings.worker_username


def test_second_start_reuses_tokens_and_ca(tmp_path: pathlib.Path) -> None:
    first = _prepare(tmp_path)
    tokens = (tmp_path / "tokens.csv").read_text()
    ca = (tmp_path / "ca.crt").read_bytes()
    config = first.kubeconfig.read_text()
    _prepare(tmp_path)
    assert (tmp_path / "tokens.csv").read_text() == tokens
    assert (tmp_path / "ca.crt").read_bytes() == ca
    assert first.kubeconfig.read_text() == config


def test_new_worker_user_gets_a_token(tmp_path: pathlib.Path) -> None:
    _prepare(tmp_path)
    prepared = _prepare(tmp_path, "--worker-user", "someone-else")
    worker_config = yaml.safe_load(prepared.worker_kubeconfig.read_text())
    found = static.load(tmp_path / "tokens.csv").find(
        worker_config["users"][0]["user"]["token"]
    )
    assert found is not None
    assert found.name == "someone-else"


def test_greeting_is_exactly_two_lines(tmp_path: pathlib.Path) -> None:
    prepared = _prepare(tmp_path)
    assert standalone.greeting(prepared).splitlines() == [
        f"export KUBECONFIG={tmp_path.resolve()}/kubeconfig",
        "kubectl get modelartifacts -A",
    ]


def test_plugin_identity_is_bound_to_a_pod_on_its_node(tmp_path: pathlib.Path) -> None:
    prepared = _prepare(tmp_path, "--plugin-node", "node-a")
    plugin_config = yaml.safe_load(prepared.plugin_kubeconfig.read_text())
    token = plugin_config["users"][0]["user"]["token"]
    found = static.load(tmp_path / "tokens.csv").find(token)
    assert found is not None
    assert found.name == "system:serviceaccount:gpustack-system:model-manager-node"
    assert user.SERVICE_ACCOUNTS_GROUP in found.groups
    assert found.extra[user.NODE_NAME] == ("node-a",)
    assert found.extra[user.POD_NAME] == ("model-manager-node-node-a",)
    [pod_uid] = found.extra[user.POD_UID]
    # the same node next time: the same token and the same Pod
    _prepare(tmp_path, "--plugin-node", "node-a")
    again = static.load(tmp_path / "tokens.csv").find(token)
    assert again == found
    # another node: the same token (kubeconfig stays valid), a new Pod there
    _prepare(tmp_path, "--plugin-node", "node-b")
    moved = static.load(tmp_path / "tokens.csv").find(token)
    assert moved is not None
    assert moved.extra[user.NODE_NAME] == ("node-b",)
    assert moved.extra[user.POD_UID] != (pod_uid,)


def test_policy_file_is_created_once_and_kept(tmp_path: pathlib.Path) -> None:
    _prepare(tmp_path)
    path = tmp_path / "policy.yaml"
    assert path.read_text().startswith("# Local authorization policy")
    path.write_text("# mine\n")
    _prepare(tmp_path)
    assert path.read_text() == "# mine\n"


def test_other_nodes_plugin_identities_are_kept(tmp_path: pathlib.Path) -> None:
    """A token file with one plugin identity per node (bench/fleet's hollow nodes): a start
    keeps every one bound to its own node and hands plugin.kubeconfig the --plugin-node one."""
    prepared = _prepare(tmp_path, "--plugin-node", "node-a")
    path = tmp_path / "tokens.csv"
    others = [standalone.plugin_entry(f"node-{i}", prepared.settings) for i in range(3)]
    static.write(path, [*static.parse(path.read_text()), *others])
    again = _prepare(tmp_path, "--plugin-node", "node-a")
    table = static.load(path)
    for i, entry in enumerate(others):
        found = table.find(entry.token)
        assert found is not None
        assert found.extra[user.NODE_NAME] == (f"node-{i}",)
    first = yaml.safe_load(again.plugin_kubeconfig.read_text())["users"][0]["user"]["token"]
    mine = table.find(first)
    assert mine is not None and mine.extra[user.NODE_NAME] == ("node-a",)
    # node-1 already has an identity: plugin.kubeconfig carries it, nothing is rebound
    moved = _prepare(tmp_path, "--plugin-node", "node-1")
    token = yaml.safe_load(moved.plugin_kubeconfig.read_text())["users"][0]["user"]["token"]
    assert token == others[1].token
    still = static.load(path).find(first)
    assert still is not None and still.extra[user.NODE_NAME] == ("node-a",)
