"""Command-line flags become Settings; bad combinations are refused with a usage error."""

from __future__ import annotations

import pathlib

import pytest

from apiserver.flags import cli, config


def test_standalone_defaults_put_everything_in_the_data_dir(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--port", "9443"])
    assert settings.standalone
    assert settings.port == 9443
    assert settings.bind == "127.0.0.1"
    assert settings.storage_path == tmp_path / "store.db"
    assert settings.tls_cert_file == tmp_path / "serving.crt"
    assert settings.tls_private_key_file == tmp_path / "serving.key"
    assert settings.token_auth_file == tmp_path / "tokens.csv"
    assert settings.policy_file == tmp_path / "policy.yaml"
    assert settings.worker_username == config.DEFAULT_WORKER_USER
    assert settings.plugin_username == "system:serviceaccount:gpustack-system:model-manager-node"
    assert settings.plugin_node == "local"
    assert settings.url == "https://127.0.0.1:9443"


def test_repeatable_flags(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(
        [
            "--standalone", "--data-dir", str(tmp_path),
            "--tls-san", "a.example", "--tls-san", "10.1.2.3",
            "--node", "node-a", "--node", "node-b=https://10.0.0.2:32444",
            "--worker-user", "worker-x",
        ]
    )  # fmt: skip
    assert settings.tls_sans == ("a.example", "10.1.2.3")
    assert settings.nodes == (("node-a", ""), ("node-b", "https://10.0.0.2:32444"))
    assert settings.worker_username == "worker-x"


def test_non_standalone_requires_files(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SystemExit):
        cli.parse(["--data-dir", str(tmp_path)])
    settings = cli.parse(
        [
            "--data-dir", str(tmp_path),
            "--tls-cert-file", "c.pem", "--tls-private-key-file", "k.pem",
            "--token-auth-file", "t.csv", "--bind", "::",
        ]
    )  # fmt: skip
    assert not settings.standalone
    assert settings.tls_cert_file.name == "c.pem"
    assert settings.token_auth_file is not None and settings.token_auth_file.name == "t.csv"
    assert settings.url.startswith("https://[::1]:")


def test_cluster_defaults_are_kubes(tmp_path: pathlib.Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "model-system")
    settings = cli.parse(["--tls-cert-file", "c", "--tls-private-key-file", "k"])
    assert settings.token_auth_file is None
    assert (settings.namespace, settings.plugin_namespace) == ("model-system", "model-system")
    assert settings.plugin_username == "system:serviceaccount:model-system:model-manager-node"
    d = settings.delegation
    assert d.kubeconfig is None and d.authentication_config() is None
    assert d.always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert d.api_audiences == ()
    assert (d.token_cache_ttl, d.authorized_cache_ttl, d.unauthorized_cache_ttl) == (10, 10, 10)
    assert d.request_header.client_ca_file is None
    assert d.request_header.allowed_names is None  # not given: the ConfigMap's
    assert settings.worker_username == ""  # learned, not expected


def test_requestheader_names_without_the_ca_replace_the_configmaps(
        tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--tls-cert-file", "c", "--tls-private-key-file", "k",
                          "--requestheader-allowed-names", "front-proxy-client",
                          "--worker-user", "system:serviceaccount:ns:worker"])
    rh = settings.delegation.request_header
    assert rh.client_ca_file is None and rh.allowed_names == ("front-proxy-client",)
    assert rh.username_headers is None
    assert settings.worker_username == "system:serviceaccount:ns:worker"


def test_cluster_flags_in_kubes_spelling(tmp_path: pathlib.Path) -> None:
    settings = cli.parse([
        "--tls-cert-file", "c", "--tls-private-key-file", "k",
        "--kubeconfig", "kc", "--authorization-kubeconfig", "authz",
        "--client-ca-file", "client-ca.crt", "--requestheader-client-ca-file", "fp.crt",
        "--requestheader-allowed-names", "front-proxy-client,aggregator",
        "--requestheader-allowed-names", "third",
        "--requestheader-username-headers", "X-User",
        "--requestheader-group-headers", "X-Group",
        "--requestheader-extra-headers-prefix", "X-Extra-",
        "--requestheader-uid-headers", "X-Uid",
        "--authorization-always-allow-paths", "/healthz,/livez*",
        "--api-audiences", "https://kubernetes.default.svc,gpustack",
        "--authentication-token-webhook-cache-ttl", "1m30s",
        "--authorization-webhook-cache-authorized-ttl", "500ms",
        "--authorization-webhook-cache-unauthorized-ttl", "2",
        "--namespace", "ns", "--plugin-namespace", "plugins", "--plugin-service-account", "csi",
    ])  # fmt: skip
    d = settings.delegation
    assert d.kubeconfig is not None and d.kubeconfig.name == "kc"
    assert d.authentication_config() == d.kubeconfig
    assert d.authorization_config() is not None and d.authorization_config().name == "authz"
    assert d.client_ca_file is not None and d.client_ca_file.name == "client-ca.crt"
    rh = d.request_header
    assert rh.client_ca_file is not None and rh.client_ca_file.name == "fp.crt"
    assert rh.allowed_names == ("front-proxy-client", "aggregator", "third")
    assert (rh.username_headers, rh.group_headers, rh.extra_headers_prefix, rh.uid_headers) == (
        ("X-User",), ("X-Group",), ("X-Extra-",), ("X-Uid",))
    assert d.always_allow_paths == ("/healthz", "/livez*")
    assert d.api_audiences == ("https://kubernetes.default.svc", "gpustack")
    assert (d.token_cache_ttl, d.authorized_cache_ttl, d.unauthorized_cache_ttl) == (90, 0.5, 2)
    assert settings.plugin_username == "system:serviceaccount:plugins:csi"


@pytest.mark.parametrize("text", ["10", "10s", "1h2m3s", "250ms", "0"])
def test_durations(text: str) -> None:
    assert cli.duration(text) >= 0


@pytest.mark.parametrize("text", ["", "ten", "10x", "-1", "5s junk"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(Exception, match="duration"):
        cli.duration(text)


@pytest.mark.parametrize(
    "argv",
    [
        ["--standalone", "--tls-cert-file", "c.pem"],
        ["--standalone", "--port", "0"],
        ["--tls-cert-file", "c", "--tls-private-key-file", "k", "--token-auth-file", "t",
         "--node", "n"],
        ["--tls-cert-file", "c", "--tls-private-key-file", "k", "--plugin-node", "n"],
        ["--standalone", "--kubeconfig", "kc"],
        ["--standalone", "--requestheader-client-ca-file", "ca"],
    ],
)  # fmt: skip
def test_refused_combinations(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse(argv)


def test_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse(["--help"])
    text = capsys.readouterr().out
    for action in cli.parser()._actions:
        for flag in action.option_strings:
            assert flag in text
        assert action.help


def test_storage_defaults_to_sqlite(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path)])
    assert settings.storage == config.StorageSettings()
    assert settings.storage.backend == "sqlite" and settings.storage.processes == 1
    assert settings.renamed_flags == ()


def test_processes_on_sqlite(tmp_path: pathlib.Path) -> None:
    # the processes share the one SQLite file (storage.sqlite, shared)
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--processes", "2"])
    assert settings.storage.backend == "sqlite" and settings.storage.processes == 2
    assert settings.renamed_flags == ()


def test_the_old_workers_flag_sets_the_processes_and_is_reported(tmp_path: pathlib.Path) -> None:
    """``--workers`` is ``--processes`` for one release: same value, a warning to log at start,
    and ``--help`` says it is the deprecated name."""
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--workers", "3"])
    assert settings.storage.processes == 3
    assert settings.renamed_flags == (
        "--workers is now --processes; the old name goes in a later release",)
    help_text = " ".join(cli.parser().format_help().split())
    assert "--workers N deprecated: the old name of --processes" in help_text
    with pytest.raises(SystemExit):
        cli.parse(["--standalone", "--data-dir", str(tmp_path), "--workers", "0"])


def test_etcd_flags(tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    settings = cli.parse([
        "--standalone", "--data-dir", str(tmp_path), "--storage=etcd",
        "--etcd-servers", "https://10.0.0.1:2379, https://etcd-b:2379", "--etcd-cafile", str(ca),
        "--etcd-prefix", "/mm/", "--etcd-compaction-interval", "1m30s",
        "--etcd-request-timeout", "500ms", "--processes", "3",
    ])  # fmt: skip
    storage = settings.storage
    assert storage.backend == "etcd"
    assert storage.etcd is not None
    assert storage.etcd.endpoints == ("https://10.0.0.1:2379", "https://etcd-b:2379")
    assert storage.etcd.ca_file == ca
    assert storage.etcd.prefix == "/mm/"
    assert storage.etcd_compaction_interval == 90.0
    assert storage.etcd.request_timeout == 0.5
    assert storage.etcd.health_timeout == 2.0
    assert storage.processes == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--storage=etcd"], "--storage=etcd needs --etcd-servers"),
        (["--etcd-servers", "http://127.0.0.1:2379"], "only apply with --storage=etcd"),
        (["--processes", "0"], "--processes must be at least 1"),
        (["--workers", "0"], "--processes must be at least 1"),
        (["--storage=etcd", "--etcd-servers", "ftp://h:1"], "the scheme must be http or https"),
        (["--storage=etcd", "--etcd-servers", "http://h:port"], "the port is not a number"),
        (["--storage=etcd", "--etcd-servers", "http://a:1,https://b:2"], "for every endpoint"),
        (["--storage=etcd", "--etcd-servers", "http://a:1", "--etcd-cafile", "/etc/hostname"],
         "need https:// etcd endpoints"),
        (["--storage=etcd", "--etcd-servers", "https://a:1", "--etcd-certfile", "/etc/hostname"],
         "--etcd-certfile and --etcd-keyfile go together"),
        (["--storage=etcd", "--etcd-servers", "https://a:1", "--etcd-cafile", "/nonexistent"],
         "is not a readable file"),
        (["--storage=etcd", "--etcd-servers", "http://a:1", "--etcd-prefix", "gpustack"],
         "--etcd-prefix"),
        (["--storage=etcd", "--etcd-servers", "http://a:1", "--etcd-request-timeout", "soon"],
         "is not a duration"),
    ],
)  # fmt: skip
def test_refused_storage_combinations(
    tmp_path: pathlib.Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parse(["--standalone", "--data-dir", str(tmp_path), *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
def test_controller_flags(tmp_path: pathlib.Path) -> None:
    settings = cli.parse([
        "--standalone", "--data-dir", str(tmp_path), "--controllers", "external",
        "--node", "node-a=https://10.0.0.5:32444/", "--node", "node-b",
        "--secrets-dir", str(tmp_path / "secrets"), "--revalidate-interval", "6h",
        "--huggingface-endpoint", "https://hf.example", "--plugin-ca-file", "/ca.crt",
    ])  # fmt: skip
    assert settings.controllers == "external"
    assert settings.nodes == (("node-a", "https://10.0.0.5:32444"), ("node-b", ""))
    cs = settings.controller_settings
    assert cs.plugin_urls == (("node-a", "https://10.0.0.5:32444"),)
    assert cs.secrets_dir == (tmp_path / "secrets").resolve()
    assert cs.revalidate_interval == 6 * 3600
    assert cs.hub.huggingface_endpoint == "https://hf.example"
    assert cs.plugin_ca_file == "/ca.crt"
    assert cli.parse(["--standalone", "--data-dir", str(tmp_path)]).controllers == "embedded"


@pytest.mark.parametrize("flags", [
    ["--node", "Not_A_Name"],
    ["--node", "n1=http://plain:80"],
    ["--controllers", "sometimes"],
    ["--revalidate-interval", "10s"],
])
def test_bad_controller_flags_are_refused(tmp_path: pathlib.Path, flags: list[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse(["--standalone", "--data-dir", str(tmp_path), *flags])


def test_standalone_only_controller_flags(tmp_path: pathlib.Path) -> None:
    files = ["--data-dir", str(tmp_path), "--tls-cert-file", "c", "--tls-private-key-file", "k",
             "--token-auth-file", "t"]
    for flags in (["--node", "n1"], ["--secrets-dir", str(tmp_path)]):
        with pytest.raises(SystemExit):
            cli.parse([*files, *flags])


def test_the_plugin_identity_follows_the_first_node(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path),
                          "--node", "gpu-1=https://127.0.0.1:32444", "--node", "gpu-2"])
    assert settings.plugin_node == "gpu-1"
    chosen = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--node", "gpu-1",
                        "--plugin-node", "gpu-2"])
    assert chosen.plugin_node == "gpu-2"
