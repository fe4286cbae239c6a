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
