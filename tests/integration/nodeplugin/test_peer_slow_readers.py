"""Readers that stop reading do not hold the peer port (issue 35, item 3), over real TLS.

The probe: 40 authenticated peer GETs of a 24 MiB file whose bodies are never read. Before the
fix every one opened the file and sent its status line before it waited for a stream slot, and
a send had no bound: every later request got ``200`` and no body, and the plugin's open files
grew by 80 (31 to 111). Now a slot is taken first (the files open here stay at most one per
running answer), one caller gets at most half the slots, so another plugin is served at once,
the staller's extra requests are refused ``503`` with ``Retry-After`` once their wait ends, and
a send not taken within the send timeout cuts its answer: the slots and files come back and the
staller's own next request is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import socket
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from devkit.controlplane import ControlPlane
from tests.integration.nodeplugin import ports_harness

MiB = 1 << 20
BIG = bytes(range(256)) * (24 * MiB // 256)
STREAMS = 8
SEND_TIMEOUT = 3.0
WAIT = 1.0
NODE_A = "system:serviceaccount:gpustack-system:model-manager-node pod:pod-uid-a"


@pytest.fixture
async def port(tmp_path: pathlib.Path, control_plane: ControlPlane
               ) -> AsyncIterator[ports_harness.PeerPort]:
    async with ports_harness.peer_port(control_plane, tmp_path, {"big.bin": BIG},
                                       max_streams=STREAMS, send_timeout=SEND_TIMEOUT,
                                       wait_seconds=WAIT) as served:
        yield served


async def _until(check: Callable[[], bool], what: str, guard: float = 60.0) -> None:
    async with asyncio.timeout(guard):
        while not check():
            await asyncio.sleep(0.02)


class Staller:
    """Connections that ask for the whole file and never read a byte of the answer (a tiny
    receive buffer, so the server's sends back up at once)."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []

    async def ask(self, port: ports_harness.PeerPort, token: str, count: int) -> None:
        host, _, number = port.url.removeprefix("https://").rpartition(":")
        target = port.file_url("big.bin").removeprefix(port.url)
        request = (f"GET {target} HTTP/1.1\r\nhost: {host}\r\n"
                   f"authorization: Bearer {token}\r\n\r\n").encode()
        for _ in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (host, int(number)))
            _, writer = await asyncio.open_connection(sock=sock, ssl=port.context,
                                                      server_hostname=host)
            writer.transport.pause_reading()  # not one byte of the answer is read
            writer.write(request)
            await writer.drain()
            self.writers.append(writer)

    def close(self) -> None:
        for writer in self.writers:
            writer.transport.abort()


async def _range(port: ports_harness.PeerPort, token: str, start: int, end: int
                 ) -> httpx.Response:
    async with port.client(token) as client:
        return await client.get(port.file_url("big.bin"),
                                headers={"range": f"bytes={start}-{end}"})


async def test_forty_stalled_readers_do_not_hold_the_port(
        port: ports_harness.PeerPort, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodeplugin.peer.answer")
    slots = port.app.state.slots
    root = port.cache.root
    assert ports_harness.open_files(root) == 0
    staller = Staller()
    try:
        await staller.ask(port, ports_harness.NODE_A_TOKEN, 40)
        # node-a's answers hold half the slots, no more; the rest of its requests wait
        await _until(lambda: slots.running_of(NODE_A) == STREAMS // 2, "node-a's slots")
        assert slots.running == STREAMS // 2
        assert ports_harness.open_files(root) <= STREAMS // 2  # was one per request: 40
        # another plugin is served at once, every byte
        served = await _range(port, ports_harness.NODE_B_TOKEN, 5 * MiB, 6 * MiB - 1)
        assert served.status_code == 206 and served.content == BIG[5 * MiB:6 * MiB]
        # node-a's own request while its answers stall: a clear refusal, or served
        later = await _range(port, ports_harness.NODE_A_TOKEN, 0, MiB - 1)
        if later.status_code == 206:
            assert later.content == BIG[:MiB]
        else:
            assert later.status_code in (429, 503), later.text
            assert int(later.headers["retry-after"]) > 0
            assert later.json()["kind"] == "Status"
        assert slots.refused > 0  # the waits that ended were refused, not left hanging
        # the stalled answers are cut: every slot and file comes back
        await _until(lambda: slots.running == 0 and slots.waiting == 0, "the cut")
        await _until(lambda: ports_harness.open_files(root) == 0, "the files closed")
        again = await _range(port, ports_harness.NODE_A_TOKEN, 0, MiB - 1)
        assert again.status_code == 206 and again.content == BIG[:MiB]
    finally:
        staller.close()
    assert any("cut after" in r.getMessage() for r in caplog.records)
    assert not any(r.exc_info for r in caplog.records)
    assert "Traceback" not in caplog.text


async def test_a_reader_that_pauses_less_than_the_timeout_gets_every_byte(
        port: ports_harness.PeerPort) -> None:
    async with port.client(ports_harness.NODE_B_TOKEN) as client, client.stream(
            "GET", port.file_url("big.bin")) as answer:
        assert answer.status_code == 200
        received = bytearray()
        async for chunk in answer.aiter_raw():
            if not received:
                await asyncio.sleep(SEND_TIMEOUT / 3)  # a pause, not a stall
            received += chunk
    assert bytes(received) == BIG


async def test_slow_connections_do_not_hold_the_port(port: ports_harness.PeerPort) -> None:
    """200 connections that send half a request and nothing more: the port still serves."""
    host, _, number = port.url.removeprefix("https://").rpartition(":")
    writers = []
    try:
        for _ in range(200):
            _, writer = await asyncio.open_connection(host, int(number), ssl=port.context,
                                                      server_hostname=host)
            writer.write(b"GET /peer/v1/trees/")
            writers.append(writer)
        served = await _range(port, ports_harness.NODE_B_TOKEN, 0, 1023)
        assert served.status_code == 206 and served.content == BIG[:1024]
    finally:
        for writer in writers:
            writer.transport.abort()


async def test_stalled_http2_streams_are_cut_too(port: ports_harness.PeerPort) -> None:
    """Over HTTP/2 a stalled stream backs up on its flow-control window, not the socket: the
    same bound cuts it, and its file and slot come back."""
    slots = port.app.state.slots
    headers = {"authorization": f"Bearer {ports_harness.NODE_A_TOKEN}"}
    async with httpx.AsyncClient(http2=True, verify=port.context, headers=headers,
                                 timeout=60.0) as client, contextlib.AsyncExitStack() as open_:
        for _ in range(STREAMS // 2):
            answer = await open_.enter_async_context(
                client.stream("GET", port.file_url("big.bin")))
            assert answer.status_code == 200 and answer.http_version == "HTTP/2"
        assert slots.running_of(NODE_A) == STREAMS // 2
        assert ports_harness.open_files(port.cache.root) == STREAMS // 2
        await _until(lambda: slots.running == 0, "the cut")
        await _until(lambda: ports_harness.open_files(port.cache.root) == 0, "the files")
    served = await _range(port, ports_harness.NODE_A_TOKEN, 0, MiB - 1)
    assert served.status_code == 206 and served.content == BIG[:MiB]
