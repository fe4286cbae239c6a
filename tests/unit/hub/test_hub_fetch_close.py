"""hub.fetch / HuggingFace.stream: the response is closed on every way out of a download.

A response left open keeps its connection checked out of the pool (and, over HTTP/2, a stream of
a shared connection) until garbage collection; on a node that is one connection per broken range.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from hub import errors, huggingface

ENDPOINT = "https://hub.example"
COMMIT = "a" * 40


class Body(httpx.AsyncByteStream):
    """A 4-chunk body that can break after its second chunk; records whether it was closed."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for index in range(4):
            if index == 2 and self.fault == "reset":
                raise httpx.ReadError("connection reset by peer")
            if index == 2 and self.fault == "long":
                yield b"0123456789"
            yield b"0123"

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fault", ["", "reset", "long", "short", "abandoned", "error status"])
async def test_the_response_is_closed_whatever_happens(fault: str) -> None:
    body = Body(fault)

    def handler(request: httpx.Request) -> httpx.Response:
        if fault == "error status":
            return httpx.Response(503, stream=body)
        announced = "20" if fault == "short" else "16"
        return httpx.Response(200, headers={"content-length": announced}, stream=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        hf = huggingface.HuggingFace(client, ENDPOINT)
        stream = hf.stream("org/model", COMMIT, "w.bin", token=None)
        received = b""
        failed: errors.HubError | None = None
        try:
            async with contextlib.aclosing(stream) as chunks:
                async for chunk in chunks:
                    received += chunk
                    if fault == "abandoned":
                        break
        except errors.HubError as exc:
            failed = exc
        assert body.closed
        if fault in ("", "abandoned"):
            assert failed is None
            assert received == (b"0123" * 4 if fault == "" else b"0123")
        else:
            assert failed is not None and failed.reason == "SourceUnavailable"
