"""The command line: hub, download and HTTPS flags, their env fallbacks and their bounds."""

from __future__ import annotations

import pytest

from nodeplugin import __main__ as cli

BASE = ["--node-name", "n1"]
ENV = ("HF_ENDPOINT", "MODELSCOPE_ENDPOINT", "HTTPS_PROXY", "https_proxy", "NO_PROXY",
       "no_proxy", "HUB_CA_BUNDLE", "DOWNLOAD_CONCURRENCY", "DOWNLOAD_BYTES_PER_SECOND",
       "HIGH_WATERMARK_PERCENT", "SECURE_PORT")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_defaults() -> None:
    config = cli.config_from(cli.parser().parse_args(BASE))
    assert config.hub.huggingface_endpoint == "https://huggingface.co"
    assert config.hub.modelscope_endpoint == "https://www.modelscope.cn"
    assert config.hub.https_proxy is None and config.hub.no_proxy == ""
    assert config.hub.ca_bundle is None
    assert (config.download.concurrency, config.download.bytes_per_second,
            config.download.high_percent) == (8, 0, 80)
    assert config.secure_port == 32444
    assert config.downloads_token_file is None and config.tls_cert_file is None


def test_flags() -> None:
    args = cli.parser().parse_args([
        *BASE, "--huggingface-endpoint", "https://hf.example", "--modelscope-endpoint",
        "https://ms.example", "--https-proxy", "http://proxy:3128", "--no-proxy", "10.0.0.0/8",
        "--ca-bundle", "/ca.pem", "--download-concurrency", "64",
        "--download-bytes-per-second", "1000000", "--high-watermark", "95", "--secure-port", "0",
        "--tls-cert-file", "/c", "--tls-private-key-file", "/k", "--downloads-token-file", "/t",
    ])
    config = cli.config_from(args)
    assert config.hub.huggingface_endpoint == "https://hf.example"
    assert config.hub.modelscope_endpoint == "https://ms.example"
    assert config.hub.https_proxy == "http://proxy:3128" and config.hub.no_proxy == "10.0.0.0/8"
    assert config.hub.ca_bundle == "/ca.pem"
    assert (config.download.concurrency, config.download.bytes_per_second,
            config.download.high_percent) == (64, 1_000_000, 95)
    assert config.secure_port == 0
    assert (config.tls_cert_file, config.tls_private_key_file) == ("/c", "/k")
    assert config.downloads_token_file == "/t"


def test_env_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example")
    monkeypatch.setenv("HTTPS_PROXY", "http://p:1")
    monkeypatch.setenv("NO_PROXY", ".internal")
    monkeypatch.setenv("DOWNLOAD_CONCURRENCY", "2")
    monkeypatch.setenv("HIGH_WATERMARK_PERCENT", "60")
    config = cli.config_from(cli.parser().parse_args(BASE))
    assert config.hub.huggingface_endpoint == "https://mirror.example"
    assert config.hub.https_proxy == "http://p:1" and config.hub.no_proxy == ".internal"
    assert config.download.concurrency == 2 and config.download.high_percent == 60
    # a flag wins over the environment, and an empty proxy flag means direct
    config = cli.config_from(cli.parser().parse_args([*BASE, "--https-proxy", ""]))
    assert config.hub.https_proxy is None


@pytest.mark.parametrize("flag,value", [
    ("--download-concurrency", "0"), ("--download-concurrency", "65"),
    ("--download-bytes-per-second", "-1"), ("--high-watermark", "1"),
    ("--high-watermark", "96"), ("--secure-port", "70000"), ("--download-concurrency", "x"),
])
def test_out_of_range_values_are_refused(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.parser().parse_args([*BASE, flag, value])
    assert exited.value.code == 2
    assert flag in capsys.readouterr().err


def test_a_certificate_without_its_key_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*BASE, "--tls-cert-file", "/c"]) == 2
    assert "go together" in capsys.readouterr().err


def test_an_unknown_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Not a traceback from logging once everything was parsed."""
    assert cli.main([*BASE, "--log-level", "chatty"]) == 2
    assert "--log-level 'chatty': not a logging level" in capsys.readouterr().err
    for level in ("debug", "INFO", "WARNING", "ERROR"):
        assert cli.problem(cli.parser().parse_args([*BASE, "--log-level", level])) is None


def test_the_node_name_is_required(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert cli.main([]) == 2
    assert "--node-name (or $NODE_NAME) is required" in capsys.readouterr().err
