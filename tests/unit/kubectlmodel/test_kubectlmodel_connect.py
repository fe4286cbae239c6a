"""``kubectlmodel.connect`` and the command line: kubectl's order for the kubeconfig, the
namespace default, the flags before or after the subcommand, kubectl's error spelling."""

from __future__ import annotations

import pathlib

import pytest
import yaml

import kube
from kubectlmodel import __main__ as cli
from kubectlmodel import connect


def kubeconfig(path: pathlib.Path, server: str, namespace: str | None = None) -> pathlib.Path:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "main", "context": context},
                     {"name": "other", "context": {"cluster": "c", "user": "u",
                                                   "namespace": "elsewhere"}}]}))
    return path


def test_the_flag_then_kubeconfig_then_home(tmp_path: pathlib.Path) -> None:
    flag = kubeconfig(tmp_path / "flag", "https://flag:1")
    listed = kubeconfig(tmp_path / "listed", "https://listed:1", "team-a")
    home = kubeconfig(tmp_path / "home" / ".kube" / "config", "https://home:1")
    env = {"KUBECONFIG": f"{tmp_path / 'absent'}:{listed}", "HOME": str(home.parents[1])}
    assert connect.cluster(connect.Target(kubeconfig=str(flag)), env).server == "https://flag:1"
    found = connect.cluster(connect.Target(), env)
    assert (found.server, found.namespace) == ("https://listed:1", "team-a")
    assert connect.cluster(connect.Target(), {"HOME": env["HOME"]}).server == "https://home:1"
    other = connect.cluster(connect.Target(context="other"), env)
    assert other.namespace == "elsewhere"


def test_no_kubeconfig_anywhere(tmp_path: pathlib.Path) -> None:
    with pytest.raises(kube.ConfigError, match="no kubeconfig"):
        connect.cluster(connect.Target(), {"HOME": str(tmp_path)})


async def test_the_namespace_is_the_flag_else_the_contexts_else_default(
        tmp_path: pathlib.Path) -> None:
    plain = kubeconfig(tmp_path / "plain", "https://x:1")
    scoped = kubeconfig(tmp_path / "scoped", "https://x:1", "team-a")
    for target, expected in ((connect.Target(kubeconfig=str(plain)), "default"),
                             (connect.Target(kubeconfig=str(scoped)), "team-a"),
                             (connect.Target(kubeconfig=str(scoped), namespace="b"), "b")):
        client, namespace = connect.client(target, {})
        await client.aclose()
        assert namespace == expected


def test_connection_flags_go_before_or_after_the_subcommand() -> None:
    after = cli.parser().parse_args(["progress", "x", "-n", "a", "--context", "c", "-w"])
    assert (after.namespace, after.context, after.watch, after.kubeconfig) == ("a", "c", True,
                                                                               None)
    before = cli.parser().parse_args(["-n", "a", "--kubeconfig", "k", "why", "x"])
    assert (before.namespace, before.kubeconfig, before.request_timeout) == ("a", "k", 30.0)


def test_errors_are_spelled_as_kubectl_spells_them() -> None:
    assert cli.report(kube.NotFound(404, "NotFound", 'modelartifacts "x" not found')) == (
        'Error from server (NotFound): modelartifacts "x" not found')
    assert cli.report(kube.ConfigError("no kubeconfig")) == "error: no kubeconfig"
    assert cli.report(kube.ConnectionFailed(0, "ConnectionFailed", "refused")) == (
        "error: refused")


def test_main_reports_a_missing_kubeconfig(tmp_path: pathlib.Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert cli.main(["nodes"]) == 1
    assert capsys.readouterr().err.startswith("error: no kubeconfig")
