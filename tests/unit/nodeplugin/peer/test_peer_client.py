"""One peer's ranges on the fast path (``client.Peer.open_range`` over ``hub.blocking``) against
a plain HTTP server: the exact range, the token read from its file for every request, and the
answers mapped as the async path maps them (401/403 AccessDenied, anything else that is not the
range SourceUnavailable, a redirect never followed)."""

from __future__ import annotations

import http.server
import pathlib
from collections.abc import AsyncIterator, Iterator

import pytest

from hub import blocking
from hub import errors as hub_errors
from nodeplugin.cache import layout
from nodeplugin.peer import client, wire
from tests.support import plainhttp

DIGEST = "sha256:" + "ab" * 32
DATA = bytes(range(256)) * 40
PATH = wire.file_path(layout.hex_of(DIGEST), "dir/a b.bin")


class Server(http.server.ThreadingHTTPServer):
    answer = "range"
    seen: list[tuple[str, str | None]]


class Handler(plainhttp.Handler):
    server: Server

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("authorization")))
        answer = self.server.answer
        if self.path != PATH or answer.isdigit():
            self.answer(int(answer) if answer.isdigit() else 404, {}, b"no")
        elif answer == "redirect":
            self.answer(302, {"location": "/elsewhere"}, b"")
        elif answer == "whole":
            self.answer(200, {}, DATA)
        else:
            first, _, last = self.headers["range"].removeprefix("bytes=").partition("-")
            start, end = int(first), int(last)
            self.answer(206, {"content-range": f"bytes {start}-{end}/{len(DATA)}"},
                        DATA[start:end + 1])


@pytest.fixture
def server() -> Iterator[Server]:
    with plainhttp.serving(Server, Handler) as running:
        running.seen = []
        yield running


@pytest.fixture
async def peer(server: Server, tmp_path: pathlib.Path) -> AsyncIterator[client.Peer]:
    (tmp_path / "token").write_text("first-token\n")
    made = client.make_client(None)
    try:
        yield client.Peer("node-a", f"http://127.0.0.1:{server.server_address[1]}/", made,
                          str(tmp_path / "token"))
    finally:
        await made.aclose()


def _read(body: blocking.RangeBody, size: int) -> bytes:
    """The whole body into one buffer, as a receive thread fills one (then nothing more)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    try:
        while got < size:
            got += body.readinto(view[got:])
        assert body.readinto(view) == 0
    finally:
        body.close()
    return bytes(buffer)


def test_a_range_is_read_exactly_with_the_token_of_the_moment(
    server: Server, peer: client.Peer, tmp_path: pathlib.Path
) -> None:
    assert _read(peer.open_range(DIGEST, "dir/a b.bin", start=10, end=5009), 5000) == \
        DATA[10:5010]
    (tmp_path / "token").write_text("rotated-token\n")  # kubelet rotates the projected token
    assert _read(peer.open_range(DIGEST, "dir/a b.bin", start=0, end=0), 1) == DATA[:1]
    assert server.seen == [(PATH, "Bearer first-token"), (PATH, "Bearer rotated-token")]


@pytest.mark.parametrize(("answer", "reason", "status"), [
    ("401", "AccessDenied", 401),
    ("403", "AccessDenied", 403),
    ("404", "SourceUnavailable", 404),
    ("503", "SourceUnavailable", 503),
    ("whole", "SourceUnavailable", 200),  # the range ignored
    ("redirect", "SourceUnavailable", 302),
])
def test_answers_other_than_the_range_are_mapped_as_on_the_async_path(
    server: Server, peer: client.Peer, answer: str, reason: str, status: int
) -> None:
    server.answer = answer
    with pytest.raises(hub_errors.HubError) as raised:
        peer.open_range(DIGEST, "dir/a b.bin", start=0, end=99)
    assert (raised.value.reason, raised.value.status) == (reason, status)
    assert [path for path, _ in server.seen] == [PATH]  # no redirect followed


def test_an_unreadable_token_file_is_refused_before_any_request(
    server: Server, peer: client.Peer, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "token").unlink()
    with pytest.raises(hub_errors.HubError) as raised:
        peer.open_range(DIGEST, "dir/a b.bin", start=0, end=99)
    assert raised.value.reason == "InvalidRequest" and server.seen == []
