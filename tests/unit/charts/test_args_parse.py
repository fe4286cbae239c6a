"""Every rendering of the chart starts the real programs: each container's args (``$(VAR)``
expanded the way kubelet does) go through the real parsers of ``python -m apiserver`` and
``python -m nodeplugin`` and their checks after parsing, so a flag renamed or removed in the code
(or invented in the chart) fails here. Files the flags name are mounted from the chart's
volumes; they are created in a temporary directory standing in for the container.

Nothing is started: ``apiserver.flags.cli.parse`` and
``nodeplugin.__main__.problem``/``config_from`` only read flags and check files exist.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

import pytest

from apiserver.flags import cli as apiserver_cli
from apiserver.flags import config as apiserver_config
from controllers import config as controller_settings
from devkit import helm
from nodeplugin import __main__ as plugin_cli

NS = helm.NAMESPACE
ETCD_TLS = ["apiserver.storage.backend=etcd",
            "apiserver.storage.etcd.servers={https://etcd-0:2379,https://etcd-1:2379}",
            "apiserver.storage.etcd.tlsSecret=etcd-client", "apiserver.processes=2"]
RENDERINGS: dict[str, tuple[list[pathlib.Path], list[str]]] = {
    "defaults": ([], []),
    "full": ([helm.FULL_VALUES], []),
    "etcd": ([], ETCD_TLS),
    "etcd-replicas": ([], ["apiserver.storage.backend=etcd", "apiserver.replicas=3",
                           "apiserver.storage.etcd.servers={http://etcd:2379}"]),
    "controllers-none": ([], ["apiserver.controllers.mode=none"]),
    "sqlite-processes": ([], ["apiserver.processes=2"]),
    "warmup": ([], ["apiserver.controllers.prefetchWarmupImage=registry.local/sh:1",
                    "apiserver.controllers.prefetchWarmupRetryInterval=1h30m"]),
    "no-leader-election": ([], ["apiserver.controllers.leaderElect=false"]),
    "tuned": ([], ["apiserver.authentication.apiAudiences={https://kubernetes.default.svc}",
                   "apiserver.authentication.requestheaderAllowedNames={front-proxy-client}",
                   "modelManager.scrub.interval=1h30m", "modelManager.scrub.bytesPerSecond=1024",
                   "modelManager.logLevel=DEBUG", "apiserver.logLevel=ERROR"]),
}  # fmt: skip


@pytest.fixture(scope="module", params=sorted(RENDERINGS))
def rendering(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    values, sets = RENDERINGS[request.param]
    return request.param, helm.template(values=values, sets=sets).docs()


class Container:
    """A container's filesystem in ``root``: its volume mounts as directories, with the keys of
    each mounted Secret as files (what kubelet would put there)."""

    def __init__(self, root: pathlib.Path, pod: dict[str, Any], spec: dict[str, Any]) -> None:
        self.root = root
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.mounts: dict[str, dict[str, Any]] = {}
        for mount in spec.get("volumeMounts") or []:
            path = mount["mountPath"]
            self.mounts[path] = volumes[mount["name"]]
            self.inside(path).mkdir(parents=True, exist_ok=True)
            if "secret" in volumes[mount["name"]]:
                for key in ("tls.crt", "tls.key", "ca.crt"):  # a kubernetes.io/tls Secret
                    (self.inside(path) / key).write_text("placeholder\n")

    def inside(self, path: str) -> pathlib.Path:
        return self.root / path.lstrip("/")

    def mounted(self, path: str) -> str:
        """The mount holding ``path``; a path in no volume would land on the read-only root."""
        found = [m for m in self.mounts if path == m or path.startswith(m.rstrip("/") + "/")]
        assert found, f"{path} is in no volume of the container"
        return max(found, key=len)

    def remap(self, args: list[str], flags: tuple[str, ...]) -> list[str]:
        """``--flag=/container/path`` -> the same path under ``root`` for the named flags."""
        mapped = []
        for arg in args:
            flag, sep, value = arg.partition("=")
            if sep and flag in flags:
                self.mounted(value)
                value = str(self.inside(value))
            mapped.append(f"{flag}{sep}{value}")
        return mapped


def _exact_flags(parser: argparse.ArgumentParser, args: list[str]) -> None:
    """argparse accepts a prefix of a flag (``--work`` for ``--workers``): a flag renamed to a
    longer name would still parse, so every name must be one the parser spells exactly."""
    spelled = set(parser._option_string_actions)  # exact option strings, the parser's own map
    unknown = [a.partition("=")[0] for a in args if a.partition("=")[0] not in spelled]
    assert unknown == [], f"not flags of {parser.prog}: {unknown}"
    # nor an old name kept one release as an alias (controllers.config.add_renamed)
    old = [a.partition("=")[0] for a in args
           if type(parser._option_string_actions[a.partition("=")[0]]).__name__ == "_Renamed"]
    assert old == [], f"old flag names of {parser.prog}: {old}"


def _parse_apiserver(args: list[str], capsys: pytest.CaptureFixture[str]
                     ) -> apiserver_config.Settings:
    try:
        return apiserver_cli.parse(args)
    except SystemExit:
        raise AssertionError(f"python -m apiserver refused the chart's args {args}:\n"
                             f"{capsys.readouterr().err}") from None


APISERVER_PATHS = ("--data-dir", "--tls-cert-file", "--tls-private-key-file", "--etcd-cafile",
                   "--etcd-certfile", "--etcd-keyfile")


def test_the_api_server_parses_the_charts_args(
    rendering: tuple[str, list[dict[str, Any]]], tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, docs = rendering
    deployment = helm.one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    spec = helm.container(docs, "Deployment", "apiserver")
    assert spec["command"] == ["python", "-m", "apiserver"]
    args = helm.expanded_args(spec)
    assert not [a for a in args if "$(" in a], args
    _exact_flags(apiserver_cli.parser(), args)
    box = Container(tmp_path, pod, spec)
    settings = _parse_apiserver(box.remap(args, APISERVER_PATHS), capsys)

    assert not settings.standalone and settings.delegation is not None
    assert settings.delegation.kubeconfig is None  # in-cluster: the Pod's ServiceAccount
    assert settings.port == spec["ports"][0]["containerPort"]
    assert settings.namespace == NS
    assert settings.data_dir == box.inside(box.mounted("/var/lib/model-manager"))
    for path in (settings.tls_cert_file, settings.tls_private_key_file):
        assert path.is_file() and "tls" in str(path)
    # the worker identity is the Deployment's ServiceAccount
    assert settings.worker_username == f"system:serviceaccount:{NS}:{pod['serviceAccountName']}"
    cs = settings.controller_settings
    # the flag names the settings ConfigMap the chart renders (monitoring adds a dashboard one)
    assert helm.one(docs, "ConfigMap", cs.settings_configmap)
    assert settings.controllers == (
        "none" if name == "controllers-none" else "embedded")
    assert cs.leader_elect is (name not in ("controllers-none", "no-leader-election"))
    # the warm-up Pods' image and retry interval are the values'
    assert (cs.prefetch_warmup_image, cs.prefetch_warmup_retry) == {
        "full": ("registry.example.test/tools/busybox:1.36", 90.0),
        "warmup": ("registry.local/sh:1", 5400.0),
    }.get(name, (controller_settings.DEFAULT_WARMUP_IMAGE,
                 controller_settings.DEFAULT_WARMUP_RETRY))
    etcd = name.startswith("etcd") or name == "full"
    assert settings.storage.backend == ("etcd" if etcd else "sqlite")
    if name in ("etcd", "full"):
        assert settings.storage.etcd is not None and settings.storage.etcd.ca_file is not None
        assert settings.storage.etcd.ca_file.is_file()
        assert settings.storage.processes == 2
    if name == "sqlite-processes":  # several processes on the one store.db, in one Pod
        assert settings.storage.processes == 2 and settings.storage.backend == "sqlite"
    daemonsets = helm.by_kind(docs, "DaemonSet")
    if daemonsets:
        plugin_pod = daemonsets[0]["spec"]["template"]
        # status guard rule 1 names the DaemonSet's ServiceAccount, in its namespace
        assert settings.plugin_service_account == plugin_pod["spec"]["serviceAccountName"]
        assert settings.plugin_namespace == daemonsets[0]["metadata"]["namespace"]
        # live progress finds the DaemonSet's Pods on their HTTPS port
        plugin = helm.container(docs, "DaemonSet", "plugin")
        assert cs.plugin_port == next(p["containerPort"] for p in plugin["ports"]
                                      if p["name"] == "https")  # fmt: skip
        wanted = dict(pair.split("=", 1) for pair in cs.plugin_selector.split(","))
        assert wanted.items() <= plugin_pod["metadata"]["labels"].items()


def test_the_node_plugin_parses_the_charts_args(
    rendering: tuple[str, list[dict[str, Any]]], tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("NODE_NAME", "POD_NAMESPACE", "SECURE_PORT", "WORKER_USER", "CSI_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)  # only what the chart passes counts
    _, docs = rendering
    pod = helm.pod_spec(docs, "DaemonSet")
    spec = helm.container(docs, "DaemonSet", "plugin")
    assert spec["command"] == ["python", "-m", "nodeplugin"]
    args = helm.expanded_args(spec, fields={"spec.nodeName": "gpu-node-7"})
    assert not [a for a in args if "$(" in a], args
    _exact_flags(plugin_cli.parser(), args)
    box = Container(tmp_path, pod, spec)
    parsed = plugin_cli.parser().parse_args(args)  # an unknown flag exits 2 here
    assert plugin_cli.problem(parsed) is None
    config = plugin_cli.config_from(parsed)
    assert config.node_name == "gpu-node-7"
    assert config.kubeconfig is None  # in-cluster: the projected token
    assert config.namespace == NS
    assert config.secure_port == next(p["containerPort"] for p in spec["ports"]
                                      if p["name"] == "https")  # fmt: skip
    # the cache and kubelet's pods directory are the hostPath volumes, mounted where the flags
    # say (pods with Bidirectional propagation, so the bind mounts reach the consuming Pods)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert box.mounts[box.mounted(config.root)] is volumes["cache"]
    pods_dir = config.kubelet_dir.rstrip("/") + "/pods"
    assert box.mounts[box.mounted(pods_dir)] is volumes["pods-dir"]
    # the worker the plugin admits on /model/downloads is the API server's identity
    server_pod = helm.pod_spec(docs, "Deployment")
    assert config.worker_user == f"system:serviceaccount:{NS}:{server_pod['serviceAccountName']}"
    # the registrar hands kubelet the socket the plugin serves, in their shared volume
    socket = config.endpoint.removeprefix("unix://")
    assert box.mounts[box.mounted(socket)] is volumes["socket-dir"]
    registrar = helm.container(docs, "DaemonSet", "node-driver-registrar")
    assert f"--csi-address={socket}" in registrar["args"]


def test_a_flag_the_programs_do_not_have_fails_the_parsers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What the check above relies on: the flags the chart once invented are refused."""
    docs = helm.template().docs()
    plugin = helm.expanded_args(helm.container(docs, "DaemonSet", "plugin"))
    with pytest.raises(SystemExit):
        plugin_cli.parser().parse_args([*plugin, "--gossip-port=32445"])
    assert "unrecognized arguments: --gossip-port=32445" in capsys.readouterr().err
    server = helm.expanded_args(helm.container(docs, "Deployment", "apiserver"))
    with pytest.raises(SystemExit):
        apiserver_cli.parse([*server, "--peer-token-file=/t"])
    assert "unrecognized arguments: --peer-token-file=/t" in capsys.readouterr().err
    # a prefix of a real flag parses, so the exact-name check must catch it
    assert apiserver_cli.parser().parse_args(["--etcd-pref=/x"]).etcd_prefix == "/x"
    with pytest.raises(AssertionError, match=r"apiserver: \['--etcd-pref'\]"):
        _exact_flags(apiserver_cli.parser(), ["--etcd-pref=/x"])
    # an old name still parses, so the check must catch it too
    assert apiserver_cli.parser().parse_args(["--workers=2"]).processes == 2
    with pytest.raises(AssertionError, match=r"old flag names of .*: \['--workers'\]"):
        _exact_flags(apiserver_cli.parser(), ["--workers=2"])
    box_free = [a for a in server if not a.startswith("--tls-cert-file")]
    with pytest.raises(SystemExit):  # a check after parsing: cluster mode needs the pair
        apiserver_cli.parse(box_free)
    assert "--tls-cert-file" in capsys.readouterr().err
