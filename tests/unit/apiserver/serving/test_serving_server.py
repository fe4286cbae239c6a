"""Hypercorn settings derived from the server settings."""

from __future__ import annotations

import asyncio
import hashlib
import pathlib
import random
import ssl
from asyncio import sslproto
from typing import Any

import httpx
import orjson
import pytest
from hypercorn import config as hypercorn_config

from apiserver.flags import config
from apiserver.serving import listener, server, tls
from certs import authority
from devkit.controlplane import Authority
from devkit.harness.apiserver import free_port
from tests.support import asgi


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


async def _length_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await asgi.lifespan(receive, send)
        return
    digest, more, size = hashlib.sha256(), True, 0
    while more:
        message = await receive()
        chunk = message.get("body", b"")
        digest.update(chunk)
        size += len(chunk)
        more = message.get("more_body", False)
    body = orjson.dumps({"size": size, "sha256": digest.hexdigest()})
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("http2", [True, False])
async def test_lean_tls_reads_keep_a_small_buffer_and_whole_bodies(
        tmp_path: pathlib.Path, http2: bool) -> None:
    """The serving process's TLS connections get a 32 KiB receive buffer instead of asyncio's
    256 KiB (about 0.75 MiB of server memory per node plugin, issue 41), and a body many times
    that size still arrives whole and in order."""
    server.lean_tls_reads()
    assert sslproto.SSLProtocol.max_size == server.TLS_READ_BUFFER < 256 * 1024
    ca = Authority("server-ca")
    cert, key = ca.serving(("127.0.0.1",)).write(tmp_path, "serving")
    config = hypercorn_config.Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    stop = asyncio.Event()
    task = asyncio.create_task(listener.serve(_length_app, config, tls.ServingContexts(cert, key),
                                              shutdown_trigger=stop.wait))
    payload = random.Random(41).randbytes(3 * 1024 * 1024 + 17)
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        async with httpx.AsyncClient(verify=context, http2=http2, http1=not http2) as client:
            for _ in range(500):  # bounded wait for the port to listen
                try:
                    answer = await client.post(f"https://127.0.0.1:{port}/", content=payload)
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.02)
            assert answer.json() == {"size": len(payload),
                                     "sha256": hashlib.sha256(payload).hexdigest()}
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
