"""The listener over real loopback TLS: every request, over HTTP/2 and HTTP/1.1, carries the
client chain its connection's handshake verified, and none without a certificate."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from cryptography import x509
from hypercorn import config as hypercorn_config

from apiserver.auth import middleware
from apiserver.serving import listener, tls
from devkit.controlplane import Authority
from devkit.harness.apiserver import free_port
from tests.support import asgi


async def chain_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await asgi.lifespan(receive, send)
        return
    names = [x509.load_der_x509_certificate(der).subject.rfc4514_string()
             for der in middleware.peer_chain(scope)]
    body = orjson.dumps({"chain": names, "http": scope["http_version"]})
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def served(tmp_path: pathlib.Path) -> AsyncIterator[tuple[str, Authority, Authority]]:
    server_ca, client_ca = Authority("server-ca"), Authority("client-ca")
    cert, key = server_ca.serving(("localhost", "127.0.0.1")).write(tmp_path, "serving")
    contexts = tls.ServingContexts(cert, key)
    contexts.set_client_cas(client_ca.cert_pem)
    config = hypercorn_config.Config()
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    stop = asyncio.Event()
    task = asyncio.create_task(listener.serve(chain_app, config, contexts,
                                              shutdown_trigger=stop.wait))
    url = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    for _ in range(200):  # bounded wait for the port to listen
        try:
            async with httpx.AsyncClient(verify=context) as probe:
                await probe.get(url)
            break
        except httpx.ConnectError:
            await asyncio.sleep(0.02)
    try:
        yield url, server_ca, client_ca
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.mark.parametrize("http2", [True, False])
async def test_the_verified_chain_reaches_every_request(
        served: tuple[str, Authority, Authority], http2: bool) -> None:
    url, server_ca, client_ca = served
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    client_ca.client("front-proxy-client").load_into(context)
    async with httpx.AsyncClient(verify=context, http2=http2, http1=not http2) as client:
        for _ in range(3):  # every request on the connection, not only the first
            answer = (await client.get(url + "/x")).json()
            assert answer["chain"] == ["CN=front-proxy-client", "CN=client-ca"]
            assert answer["http"] == ("2" if http2 else "1.1")


@pytest.mark.parametrize("http2", [True, False])
async def test_no_certificate_no_chain_whatever_the_headers(
        served: tuple[str, Authority, Authority], http2: bool) -> None:
    url, server_ca, _ = served
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    async with httpx.AsyncClient(verify=context, http2=http2, http1=not http2) as client:
        answer = (await client.get(url + "/x", headers={"X-Remote-User": "admin"})).json()
    assert answer["chain"] == []


async def test_a_certificate_from_an_unknown_ca_fails_the_handshake(
        served: tuple[str, Authority, Authority]) -> None:
    url, server_ca, _ = served
    context = ssl.create_default_context(cadata=server_ca.cert_pem.decode())
    Authority("stranger").client("front-proxy-client").load_into(context)
    async with httpx.AsyncClient(verify=context) as client:
        with pytest.raises(httpx.HTTPError):
            await client.get(url + "/x")
