"""hub.fetch: the redirect token policy, range checks, body length checks, Retry-After."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from hub import errors, fetch, huggingface

ENDPOINT = "https://hub.example"
COMMIT = "a" * 40


def _client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler, follow_redirects=False)


async def _read(hf: huggingface.HuggingFace, **kwargs: object) -> bytes:
    stream = hf.stream("org/model", COMMIT, "w.bin", token="secret-token", **kwargs)  # type: ignore[arg-type]
    async with contextlib.aclosing(stream) as chunks:
        return b"".join([chunk async for chunk in chunks])


@pytest.mark.parametrize(
    "location",
    [
        "https://cdn.example/blob?X-Amz-Signature=s",  # another host
        "http://hub.example/blob",  # https to http on the same host
        "https://hub.example:8443/blob",  # another port
    ],
)
async def test_token_is_dropped_when_a_redirect_leaves_the_origin(location: str) -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        if request.url.path.startswith("/org/model/resolve"):
            return httpx.Response(302, headers={"location": location})
        if request.url.host == "hub.example" and request.url.path == "/blob" and len(seen) < 3:
            # Coming back to the origin after leaving it must not bring the token back.
            return httpx.Response(302, headers={"location": "https://hub.example/final"})
        return httpx.Response(200, content=b"data")

    async with _client(httpx.MockTransport(handler)) as client:
        assert await _read(huggingface.HuggingFace(client, ENDPOINT)) == b"data"
    assert seen[0][1] == "Bearer secret-token"
    assert all(auth is None for _, auth in seen[1:])


async def test_relative_redirect_on_the_origin_keeps_the_token() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.url.path.startswith("/org/model/resolve"):
            return httpx.Response(307, headers={"location": "/api/resolve-cache/x"})
        return httpx.Response(200, content=b"x")

    async with _client(httpx.MockTransport(handler)) as client:
        assert await _read(huggingface.HuggingFace(client, ENDPOINT)) == b"x"
    assert seen == ["Bearer secret-token", "Bearer secret-token"]


async def test_redirect_loop_is_source_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": "/again"})

    async with _client(httpx.MockTransport(handler)) as client:
        with pytest.raises(errors.HubError) as caught:
            await _read(huggingface.HuggingFace(client, ENDPOINT))
    assert caught.value.reason == "SourceUnavailable"


@pytest.mark.parametrize(
    ("status", "content_range", "ok"),
    [
        (206, "bytes 10-19/100", True),
        (206, "bytes 0-19/100", False),  # wrong start
        (206, "bytes 10-29/100", False),  # wrong end
        (200, None, False),  # Range ignored
        (206, None, False),  # no Content-Range
    ],
)
async def test_ranged_download_checks_the_answer(
    status: int, content_range: str | None, ok: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["range"] == "bytes=10-19"
        headers = {"content-range": content_range} if content_range else {}
        return httpx.Response(status, headers=headers, content=b"0123456789")

    async with _client(httpx.MockTransport(handler)) as client:
        hf = huggingface.HuggingFace(client, ENDPOINT)
        if ok:
            assert await _read(hf, start=10, end=19) == b"0123456789"
        else:
            with pytest.raises(errors.HubError) as caught:
                await _read(hf, start=10, end=19)
            assert caught.value.reason == "SourceUnavailable"


async def test_open_ended_range_ends_at_the_last_byte() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["range"] == "bytes=95-"
        return httpx.Response(206, headers={"content-range": "bytes 95-99/100"}, content=b"abcde")

    async with _client(httpx.MockTransport(handler)) as client:
        assert await _read(huggingface.HuggingFace(client, ENDPOINT), start=95) == b"abcde"


async def test_whole_file_without_range_header() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "range" not in request.headers
        return httpx.Response(200, content=b"whole")

    async with _client(httpx.MockTransport(handler)) as client:
        assert await _read(huggingface.HuggingFace(client, ENDPOINT)) == b"whole"


async def test_short_body_is_source_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        # Content-Range promises 10 bytes; only 4 arrive.
        return httpx.Response(206, headers={"content-range": "bytes 10-19/100"}, content=b"0123")

    async with _client(httpx.MockTransport(handler)) as client:
        with pytest.raises(errors.HubError) as caught:
            await _read(huggingface.HuggingFace(client, ENDPOINT), start=10, end=19)
    assert caught.value.reason == "SourceUnavailable"


def test_invalid_range_is_refused() -> None:
    with pytest.raises(errors.HubError) as caught:
        fetch.range_header(10, 5)
    assert caught.value.reason == "InvalidRequest"
    assert fetch.range_header(0, None) is None
    assert fetch.range_header(0, 9) == "bytes=0-9"


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"ratelimit": '"api";r=0;t=55'}, 56.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], wait: float | None) -> None:
    assert fetch.retry_after(httpx.Response(429, headers=headers)) == wait


async def test_network_error_message_has_no_secret() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    async with _client(httpx.MockTransport(handler)) as client:
        with pytest.raises(errors.HubError) as caught:
            await _read(huggingface.HuggingFace(client, ENDPOINT))
    assert caught.value.reason == "SourceUnavailable"
    assert "secret-token" not in str(caught.value)
    assert "https://" not in caught.value.message


def test_safe_url_drops_the_query_and_user_info() -> None:
    url = "https://user:pw@cdn.example:8443/blob/x?X-Amz-Signature=secret&Expires=1"
    assert errors.safe_url(url) == "https://cdn.example:8443/blob/x"
