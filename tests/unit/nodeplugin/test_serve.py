"""The HTTPS port's app (over httpx's ASGI transport) and its TLS material."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from collections.abc import Sequence

import httpx
import pytest
from cryptography import x509
from prometheus_client import registry

from certs import authority
from devkit.harness import apiserver as support
from nodeplugin import metrics, serve
from nodeplugin.materialize import interface

DIGEST = "sha256:" + "0f" * 32
TOKEN = "worker-token-1234"


def _registry() -> registry.CollectorRegistry:
    sources = metrics.Sources(
        downloaded_bytes=lambda: 7, mounts=lambda: {"hit": 2}, stored_bytes=lambda: 0,
        capacity_bytes=lambda: 100,
    )
    return metrics.Metrics(sources).registry


def _client(
    *,
    token_file: str | None = None,
    ready: str | None = None,
    running: Sequence[interface.Progress] = (),
) -> httpx.AsyncClient:
    app = serve.make_app(metrics=_registry(), ready=lambda: ready, running=lambda: running,
                         token_file=token_file)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://plugin")


async def test_metrics_are_prometheus_text() -> None:
    async with _client() as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'gpustack_model_manager_download_bytes_total{source="hub"} 7.0' in response.text
    assert 'gpustack_model_manager_mounts_total{result="hit"} 2.0' in response.text
    assert "gpustack_model_manager_publish_duration_seconds_count 0.0" in response.text


async def test_health() -> None:
    async with _client(ready="the ModelArtifact list has not been read yet") as client:
        assert (await client.get("/livez")).status_code == 200
        response = await client.get("/readyz")
    assert response.status_code == 503 and "not been read" in response.text
    async with _client() as client:
        assert (await client.get("/readyz")).text == "ok\n"


async def test_downloads_refused_without_a_token_file() -> None:
    async with _client() as client:
        response = await client.get("/model/downloads",
                                    headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403
    assert response.json()["reason"] == "Forbidden"


async def test_downloads_need_the_worker_token(tmp_path: pathlib.Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    running = [
        interface.Progress(DIGEST, interface.State.DOWNLOADING, 1024, 4096),
        interface.Progress("sha256:" + "1a" * 32, interface.State.DOWNLOADING, 0, None),
    ]
    async with _client(token_file=str(token_file), running=running) as client:
        missing = await client.get("/model/downloads")
        wrong = await client.get("/model/downloads", headers={"authorization": "Bearer nope"})
        basic = await client.get("/model/downloads", headers={"authorization": f"Basic {TOKEN}"})
        ok = await client.get("/model/downloads", headers={"authorization": f"Bearer {TOKEN}"})
        token_file.write_text("rotated")
        old = await client.get("/model/downloads", headers={"authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == 401 and basic.status_code == 401
    assert wrong.status_code == 403 and old.status_code == 403
    assert TOKEN not in wrong.text
    assert ok.status_code == 200
    assert ok.json() == {"downloads": [
        {"digest": DIGEST, "downloadedBytes": 1024, "sizeBytes": 4096, "source": "Hub"},
        {"digest": "sha256:" + "1a" * 32, "downloadedBytes": 0, "sizeBytes": 0, "source": "Hub"},
    ]}


async def test_an_unreadable_token_file_refuses(tmp_path: pathlib.Path) -> None:
    async with _client(token_file=str(tmp_path / "absent")) as client:
        response = await client.get("/model/downloads",
                                    headers={"authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403


def test_self_signed_pair_is_made_once_under_the_state_dir(tmp_path: pathlib.Path) -> None:
    cert, key = serve.tls_files(tmp_path / "tls", None, None, ["node-1"])
    assert pathlib.Path(cert).parent == tmp_path / "tls"
    loaded = x509.load_pem_x509_certificate(pathlib.Path(cert).read_bytes())
    names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "node-1" in names.get_values_for_type(x509.DNSName)
    first = pathlib.Path(cert).read_bytes()
    assert serve.tls_files(tmp_path / "tls", None, None, ["node-1"]) == (cert, key)
    assert pathlib.Path(cert).read_bytes() == first


def test_given_files_are_used_as_they_are(tmp_path: pathlib.Path) -> None:
    assert serve.tls_files(tmp_path, "/x/c.pem", "/x/k.pem") == ("/x/c.pem", "/x/k.pem")
    with pytest.raises(ValueError):
        serve.tls_files(tmp_path, "/x/c.pem", None)
    assert not list(tmp_path.iterdir())


def test_hypercorn_config_brackets_ipv6() -> None:
    cfg = serve.hypercorn_config_for("::", 32444, "c", "k")
    assert cfg.bind == ["[::]:32444"]
    assert serve.hypercorn_config_for("127.0.0.1", 1, "c", "k").bind == ["127.0.0.1:1"]


async def test_the_port_serves_tls_without_touching_asyncios_process_wide_timeout(
        tmp_path: pathlib.Path) -> None:
    """The served connections get the short close_notify wait; the process keeps asyncio's."""
    before = asyncio.constants.SSL_SHUTDOWN_TIMEOUT  # type: ignore[attr-defined]
    cert, key = serve.tls_files(tmp_path / "tls", None, None, ["localhost"])
    ca = authority.Files.under(tmp_path / "tls").ca_cert
    port = support.free_port()
    app = serve.make_app(metrics=_registry(), ready=lambda: None, running=lambda: (),
                         token_file=None)
    stop = asyncio.Event()
    serving = asyncio.create_task(serve.serve(
        app, serve.hypercorn_config_for("127.0.0.1", port, cert, key), stop))
    try:
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca),
                                     http2=True) as client:
            for _ in range(100):
                try:
                    answer = await client.get(f"https://localhost:{port}/livez")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            else:
                raise AssertionError("the HTTPS port never answered")
        assert answer.status_code == 200
        assert answer.http_version == "HTTP/2"
        assert before == asyncio.constants.SSL_SHUTDOWN_TIMEOUT  # type: ignore[attr-defined]
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)
