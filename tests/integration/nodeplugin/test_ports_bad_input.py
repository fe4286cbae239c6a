"""Hostile input to the plugin's HTTP endpoints and its peer port, over real TLS (issue 35, item
4; the API server's are ``tests/integration/apiserver/test_bad_input.py`` and
``test_denial_of_service.py``): each is a 4xx ``Status`` that echoes nothing unbounded, and
nothing is logged with a traceback.

Before the fix, a peer ``Range`` number of more than 4,300 digits answered 500 (``ValueError:
Exceeds the limit (4300 digits)`` in ``nodeplugin/peer/wire.py``) and a body of 60,000 ``[`` to
``POST /model/prefetches`` a ``RecursionError`` 500 (``nodeplugin/prefetchapi.py``).
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from devkit.controlplane import ControlPlane
from nodeplugin import artifacts, prefetchapi
from nodeplugin.materialize import interface
from tests.integration.nodeplugin import ports_harness
from tests.unit.nodeplugin import fakes

SMALL = 4096
"""No refusal here may be larger than this."""
REQUEST = {"namespace": "team-a", "artifact": "qwen", "artifactUID": "uid-1",
           "manifestDigest": fakes.DIGEST}


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert bad == [], [r.getMessage() for r in bad]
    assert "Traceback" not in caplog.text


def _status(answer: httpx.Response, code: int, *words: str) -> dict[str, Any]:
    assert answer.status_code == code, answer.text[:2000]
    assert len(answer.content) < SMALL
    body: dict[str, Any] = answer.json()
    assert body["kind"] == "Status" and body["code"] == code
    for word in words:
        assert word in body["message"], body
    return body


class Materializer:
    def __init__(self) -> None:
        self.asked: list[interface.Request] = []

    async def ensure(self, request: interface.Request) -> interface.Progress:
        self.asked.append(request)
        return interface.Progress(request.digest, interface.State.PUBLISHED)

    def running(self) -> list[interface.Progress]:
        return []

    async def close(self) -> None:
        return None


@pytest.fixture
async def https(tmp_path: pathlib.Path) -> AsyncIterator[tuple[httpx.AsyncClient, Materializer]]:
    informer = artifacts.Informer(fakes.FakeClient([fakes.page([fakes.artifact_object()], "5")]))
    await informer.replace(await informer.list())
    (tmp_path / "kubelet").mkdir()
    materializer = Materializer()
    handler = prefetchapi.handler(informer=informer, kubelet_dir=str(tmp_path / "kubelet"),
                                  materializer=materializer)
    app = ports_harness.https_app(tmp_path, handler)
    async with ports_harness.served(app, tmp_path) as url, httpx.AsyncClient(
            base_url=url, verify=ports_harness.unverified(), timeout=60.0,
            headers={"authorization": f"Bearer {ports_harness.WORKER_TOKEN}"}) as client:
        yield client, materializer


PREFETCHES = "/model/prefetches"


async def test_sixty_thousand_brackets_to_prefetches(
        https: tuple[httpx.AsyncClient, Materializer], caplog: pytest.LogCaptureFixture) -> None:
    client, materializer = https
    answer = await client.post(PREFETCHES, content=b"[" * 60_000,
                               headers={"content-type": "application/json"})
    _status(answer, 400, "nested more than 64 levels deep")
    # deep but closed, and deep inside an object: the same rule
    deep = b'{"namespace": ' + b"[" * 100 + b"]" * 100 + b"}"
    _status(await client.post(PREFETCHES, content=deep), 400, "nested more than 64 levels deep")
    assert materializer.asked == []
    _no_traceback(caplog)


async def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(
        https: tuple[httpx.AsyncClient, Materializer], caplog: pytest.LogCaptureFixture) -> None:
    client, _ = https
    declared = await client.post(PREFETCHES, content=b" " * (prefetchapi.MAX_BODY + 1))
    _status(declared, 413, f"limit is {prefetchapi.MAX_BODY}")

    async def chunks(count: int) -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for _ in range(count):
            yield b" " * 65536

    streamed = await client.post(PREFETCHES, content=chunks(4))
    _status(streamed, 413, f"limit is {prefetchapi.MAX_BODY}")
    try:  # far more than is drained: the 413, or the connection closed under the sender
        flood = await client.post(PREFETCHES, content=chunks(64))
    except httpx.TransportError:
        pass
    else:
        _status(flood, 413, f"limit is {prefetchapi.MAX_BODY}")
    head = (f"POST {PREFETCHES} HTTP/1.1\r\nhost: plugin\r\ncontent-length: {'9' * 5000}"
            f"\r\nauthorization: Bearer {ports_harness.WORKER_TOKEN}\r\n\r\n{{}}")
    answer = await ports_harness.raw_request(str(client.base_url), head.encode())
    assert answer.startswith(b"HTTP/1.1 4"), answer[:200]
    _no_traceback(caplog)


@pytest.mark.parametrize(("change", "field"), [
    ({"namespace": "n" * 60_000}, "namespace"),
    ({"artifact": "a" * 60_000}, "artifact"),
    ({"artifactUID": "u" * 60_000}, "artifactUID"),
    ({"manifestDigest": "sha256:" + "f" * 60_000}, "manifestDigest"),
    ({"namespace": "Team_A"}, "namespace"),
    ({"artifact": "../qwen"}, "artifact"),
    ({"token": "t" * 60_000}, "token"),
    ({"namespace": 7}, "namespace"),
    ({"namespace": None}, "namespace"),
])
async def test_fields_out_of_their_grammar_are_named_and_not_echoed(
        https: tuple[httpx.AsyncClient, Materializer], caplog: pytest.LogCaptureFixture,
        change: dict[str, Any], field: str) -> None:
    client, materializer = https
    answer = await client.post(PREFETCHES, json={**REQUEST, **change})
    body = _status(answer, 400, field)
    assert len(body["message"]) < 1024
    assert materializer.asked == []
    _no_traceback(caplog)


@pytest.mark.parametrize("content", [
    b"NaN", b'{"namespace": NaN}', b'{"namespace": "team-a"', b"\xff\xfe", b'"x"', b"1" * 5000,
    b'{"namespace": ' + b"1" * 5000 + b"}",
])
async def test_what_is_not_a_json_object_is_a_400(
        https: tuple[httpx.AsyncClient, Materializer], caplog: pytest.LogCaptureFixture,
        content: bytes) -> None:
    client, _ = https
    _status(await client.post(PREFETCHES, content=content), 400)
    _no_traceback(caplog)


async def test_the_prefetch_still_warms(https: tuple[httpx.AsyncClient, Materializer]) -> None:
    client, materializer = https
    answer = await client.post(PREFETCHES, json=REQUEST)
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "Published" and len(materializer.asked) == 1


async def test_a_huge_authorization_header(https: tuple[httpx.AsyncClient, Materializer],
                                           caplog: pytest.LogCaptureFixture) -> None:
    client, _ = https
    try:
        answer = await client.get("/model/downloads",
                                  headers={"authorization": "Bearer " + "x" * 200_000})
    except httpx.RemoteProtocolError:
        pass  # the server cut the connection: no answer at all is refusal enough
    else:
        assert 400 <= answer.status_code < 500 and len(answer.content) < SMALL
    _no_traceback(caplog)


# --- the peer port ----------------------------------------------------------------------------

@pytest.fixture
async def peer(tmp_path: pathlib.Path, control_plane: ControlPlane
               ) -> AsyncIterator[ports_harness.PeerPort]:
    files = {"config.json": b'{"a": 1}\n', "w.bin": bytes(range(256)) * 64}
    async with ports_harness.peer_port(control_plane, tmp_path, files) as port:
        yield port


@pytest.mark.parametrize("header", [
    "bytes=" + "9" * 5000 + "-", "bytes=0-" + "9" * 5000, "bytes=" + "1" * 4301 + "-2",
    "bytes=" + "0" * 20 + "-", "bytes=99999999999999999999-", "bytes=٣-٤",
])
async def test_range_numbers_past_their_digits(peer: ports_harness.PeerPort,
                                               caplog: pytest.LogCaptureFixture,
                                               header: str) -> None:
    async with peer.client() as client:
        try:
            answer = await client.get(peer.file_url("w.bin"), headers={"range": header})
        except UnicodeEncodeError:
            return  # not sendable as a header by this client: nothing reached the port
    body = _status(answer, 416)
    assert "9" * 64 not in body["message"] and "1" * 64 not in body["message"]
    _no_traceback(caplog)


async def test_the_range_grammar_below_that_size_holds(peer: ports_harness.PeerPort) -> None:
    async with peer.client() as client:
        whole = await client.get(peer.file_url("w.bin"))
        assert whole.status_code == 200 and whole.content == bytes(range(256)) * 64
        part = await client.get(peer.file_url("w.bin"), headers={"range": "bytes=3-9"})
        assert part.status_code == 206 and part.content == bytes(range(3, 10))
        assert part.headers["content-range"] == f"bytes 3-9/{256 * 64}"
        longest = "9" * 19  # int64's digits: past the end, cut to the file
        tail = await client.get(peer.file_url("w.bin"), headers={"range": f"bytes=16380-{longest}"})
        assert tail.status_code == 206 and tail.content == (bytes(range(256)) * 64)[16380:]
        for bad in ("bytes=-5", "bytes=1-2,4-5", "items=1-2", "bytes=99999-"):
            assert (await client.get(peer.file_url("w.bin"),
                                     headers={"range": bad})).status_code == 416


async def test_paths_and_tokens_still_hold(peer: ports_harness.PeerPort,
                                           caplog: pytest.LogCaptureFixture) -> None:
    async with peer.client() as client:
        for path in ("../w.bin", "%2e%2e/w.bin", "w.bin%00", ".gpustack-manifest",
                     ".gpustack-published", "missing", "a" * 5000):
            answer = await client.get(peer.file_url("w.bin").rsplit("/", 1)[0] + "/" + path)
            assert answer.status_code == 404, (path, answer.status_code)
    async with peer.client(ports_harness.TENANT_TOKEN) as tenant:
        assert (await tenant.get(peer.file_url("w.bin"))).status_code == 403
    async with httpx.AsyncClient(verify=peer.context) as anonymous:
        assert (await anonymous.get(peer.file_url("w.bin"))).status_code == 401
    _no_traceback(caplog)
