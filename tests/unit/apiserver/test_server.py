"""Hypercorn settings derived from the server settings."""

from __future__ import annotations

import pathlib

from apiserver import config, server


def _settings(**overrides: object) -> config.Settings:
    base = pathlib.Path("/data")
    values: dict[str, object] = {
        "data_dir": base, "tls_cert_file": base / "c.pem", "tls_private_key_file": base / "k.pem",
        "token_auth_file": base / "t.csv", **overrides,
    }  # fmt: skip
    return config.Settings(**values)  # type: ignore[arg-type]


def test_tls_with_http2_and_http11() -> None:
    cfg = server.hypercorn_settings(_settings(port=9443, shutdown_timeout=3.0))
    assert cfg.bind == ["127.0.0.1:9443"]
    assert cfg.certfile == "/data/c.pem"
    assert cfg.keyfile == "/data/k.pem"
    assert cfg.alpn_protocols == ["h2", "http/1.1"]
    assert cfg.graceful_timeout == 3.0
    assert cfg.accesslog is None
    assert cfg.keep_alive_max_requests >= 1_000_000


def test_ipv6_bind_is_bracketed() -> None:
    assert server.hypercorn_settings(_settings(bind="::", port=1)).bind == ["[::]:1"]
