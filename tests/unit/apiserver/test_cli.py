"""Command-line flags become Settings; bad combinations are refused with a usage error."""

from __future__ import annotations

import pathlib

import pytest

from apiserver import cli, config


def test_standalone_defaults_put_everything_in_the_data_dir(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--port", "9443"])
    assert settings.standalone
    assert settings.port == 9443
    assert settings.bind == "127.0.0.1"
    assert settings.storage_path == tmp_path / "store.db"
    assert settings.tls_cert_file == tmp_path / "serving.crt"
    assert settings.tls_private_key_file == tmp_path / "serving.key"
    assert settings.token_auth_file == tmp_path / "tokens.csv"
    assert settings.worker_username == config.DEFAULT_WORKER_USER
    assert settings.url == "https://127.0.0.1:9443"


def test_repeatable_flags(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(
        [
            "--standalone", "--data-dir", str(tmp_path),
            "--tls-san", "a.example", "--tls-san", "10.1.2.3",
            "--seed-nodemodelstore", "node-a", "--seed-nodemodelstore", "node-b",
            "--worker-user", "worker-x",
        ]
    )  # fmt: skip
    assert settings.tls_sans == ("a.example", "10.1.2.3")
    assert settings.seed_nodemodelstores == ("node-a", "node-b")
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
    assert settings.url.startswith("https://[::1]:")


@pytest.mark.parametrize(
    "argv",
    [
        ["--standalone", "--tls-cert-file", "c.pem"],
        ["--standalone", "--port", "0"],
        ["--tls-cert-file", "c", "--tls-private-key-file", "k", "--token-auth-file", "t",
         "--seed-nodemodelstore", "n"],
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
    assert settings.storage.backend == "sqlite" and settings.storage.workers == 1


def test_etcd_flags(tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    settings = cli.parse([
        "--standalone", "--data-dir", str(tmp_path), "--storage=etcd",
        "--etcd-servers", "https://10.0.0.1:2379, https://etcd-b:2379", "--etcd-cafile", str(ca),
        "--etcd-prefix", "/mm/", "--etcd-compaction-interval", "1m30s",
        "--etcd-request-timeout", "500ms", "--workers", "3",
    ])  # fmt: skip
    storage = settings.storage
    assert storage.backend == "etcd"
    assert storage.etcd_servers == ("https://10.0.0.1:2379", "https://etcd-b:2379")
    assert storage.etcd_cafile == ca
    assert storage.etcd_prefix == "/mm/"
    assert storage.etcd_compaction_interval == 90.0
    assert storage.etcd_request_timeout == 0.5
    assert storage.etcd_healthcheck_timeout == 2.0
    assert storage.workers == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--storage=etcd"], "--storage=etcd needs --etcd-servers"),
        (["--etcd-servers", "http://127.0.0.1:2379"], "only apply with --storage=etcd"),
        (["--workers", "2"], "--workers above 1 needs --storage=etcd"),
        (["--workers", "0"], "--workers must be at least 1"),
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
