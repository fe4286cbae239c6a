"""Hypercorn settings derived from the server settings."""

from __future__ import annotations

import pathlib
import ssl

from apiserver.flags import config
from apiserver.serving import server
from certs import authority


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
    assert cfg.certfile is None  # TLS is apiserver.serving's (reloaded certificates)
    assert cfg.alpn_protocols == ["h2", "http/1.1"]
    assert cfg.graceful_timeout == 3.0
    assert cfg.accesslog is None
    assert cfg.keep_alive_max_requests >= 1_000_000


def test_ipv6_bind_is_bracketed() -> None:
    assert server.hypercorn_settings(_settings(bind="::", port=1)).bind == ["[::]:1"]


def test_serving_contexts_use_the_tls_files(tmp_path: pathlib.Path) -> None:
    files = authority.ensure(tmp_path)
    serving = server.contexts(_settings(tls_cert_file=files.cert,
                                        tls_private_key_file=files.key))
    assert serving.cert_file == files.cert and serving.key_file == files.key
    assert serving.base.verify_mode == ssl.CERT_OPTIONAL
