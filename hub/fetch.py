"""HTTP plumbing shared by both hubs: redirects followed under the token policy, byte ranges
checked, bodies streamed with their length verified, and transport errors translated once.

The token policy: ``Authorization`` goes only to the endpoint's own origin (scheme, host, port).
Once a redirect leaves that origin (another host or port, or https to http) the token is dropped
for the rest of the chain, even if a later hop comes back.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import httpx

from hub import errors
from openapi import reasons

MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")

_ERROR_BODY_LIMIT = 64 * 1024

# Turns a final non-success response (and up to 64 KiB of its body) into the hub's error;
# ``what`` is a safe description of the request.
ErrorMapper = Callable[[httpx.Response, bytes, str], errors.HubError]


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port if url.port is not None else default)


def range_header(start: int, end: int | None) -> str | None:
    """The ``Range`` value for ``start``..``end`` (inclusive), or None for the whole body."""
    if start < 0 or (end is not None and end < start):
        raise errors.HubError(reasons.INVALID_REQUEST, f"invalid byte range {start}-{end}")
    if start == 0 and end is None:
        return None
    return f"bytes={start}-{'' if end is None else end}"


@contextlib.asynccontextmanager
async def open_response(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    endpoint: str,
    token: str | None,
    what: str,
    mapper: ErrorMapper,
    headers: dict[str, str] | None = None,
    follow: bool = True,
    basic_user: str | None = None,
) -> AsyncIterator[httpx.Response]:
    """Send, follow redirects (at most ``MAX_REDIRECTS``) and yield the final streaming response.

    A final status of 400 or more is raised through ``mapper``; the response is always closed.
    With ``follow=False`` a redirect is yielded as is (revalidation's HEAD). The token goes as
    ``Bearer``, or with ``basic_user`` as HTTP Basic ``basic_user:token`` (git over HTTP).
    """
    hops = Hops(url, endpoint=endpoint, token=token, what=what, method=method, follow=follow,
                basic_user=basic_user)
    while True:
        request = client.build_request(hops.method, hops.current, headers=hops.headers(headers))
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise errors.from_transport(exc, what) from exc
        try:
            if hops.follows(response.status_code, response.headers.get("location")):
                continue
            if response.status_code >= 400:
                raise mapper(response, await _error_body(response), what)
            yield response
            return
        finally:
            await response.aclose()


class Hops:
    """The redirect chain of one request under the token policy; both clients (the async one
    here and the blocking one in ``hub.blocking``) follow redirects through it.

    ``headers`` gives the headers for the current hop (``Authorization`` only while the chain
    has never left the endpoint's origin); ``follows`` takes an answer's status and
    ``Location`` and says whether to send again (to ``current``, with ``method``).
    """

    def __init__(
        self, url: str, *, endpoint: str, token: str | None, what: str, method: str = "GET",
        follow: bool = True, basic_user: str | None = None,
    ) -> None:
        self._home = origin(httpx.URL(endpoint))
        self._what = what
        self._follow = follow
        self._hops = 0
        if token is None:
            self._credential = ""
        elif basic_user is not None:
            pair = f"{basic_user}:{token}".encode()
            self._credential = "Basic " + base64.b64encode(pair).decode()
        else:
            self._credential = f"Bearer {token}"
        self.current = httpx.URL(url)
        self.method = method
        self.may_send_token = token is not None

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        if origin(self.current) != self._home:
            self.may_send_token = False
        sent = dict(extra or {})
        if self.may_send_token:
            sent["authorization"] = self._credential
        return sent

    def follows(self, status: int, location: str | None) -> bool:
        """True when ``status`` is a redirect to follow (``current`` now names its target)."""
        what = self._what
        if not self._follow or status not in _REDIRECTS:
            return False
        if not location:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{what}: redirect without a Location", status=status
            )
        self._hops += 1
        if self._hops > MAX_REDIRECTS:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{what}: more than {MAX_REDIRECTS} redirects"
            )
        try:
            self.current = self.current.join(location)
        except httpx.InvalidURL as exc:
            raise errors.HubError(
                reasons.SOURCE_UNAVAILABLE, f"{what}: redirect to an invalid URL"
            ) from exc
        if self.current.scheme not in ("http", "https"):
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: redirect to a non-HTTP URL")
        if status == 303:
            self.method = "GET"
        return True


async def _error_body(response: httpx.Response) -> bytes:
    """The start of an error body; a broken one reads as empty (the status still decides)."""
    if response.request.method == "HEAD":
        return b""
    collected = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            collected += chunk
            if len(collected) >= _ERROR_BODY_LIMIT:
                break
    except httpx.HTTPError:
        return b""
    finally:
        await _close_iterator(chunks)
    return bytes(collected[:_ERROR_BODY_LIMIT])


async def _close_iterator(iterator: AsyncIterator[bytes]) -> None:
    """Close an abandoned body iterator now, on this task, rather than leave it to the garbage
    collector: a finalizer may only run once the event loop is gone."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


def expected_length(response: httpx.Response, start: int, end: int | None, what: str) -> int | None:
    """Check the answer to a (possibly ranged) GET and return how many body bytes must follow.

    A ranged request needs 206 with a ``Content-Range`` starting at ``start`` and ending at
    ``end`` (or at the last byte when ``end`` is None or past it); a whole-body request accepts
    200 or a 206 covering the whole file.
    """
    encoding = response.headers.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity"):
        raise errors.HubError(reasons.SOURCE_UNAVAILABLE, f"{what}: unexpected content encoding")
    ranged = not (start == 0 and end is None)
    if response.status_code == 200 and not ranged:
        length = response.headers.get("content-length")
        return int(length) if length and length.isdigit() else None
    if response.status_code != 206:
        raise errors.HubError(
            reasons.SOURCE_UNAVAILABLE,
            f"{what}: expected 206 Partial Content, got {response.status_code}",
            status=response.status_code,
        )
    match = _CONTENT_RANGE.fullmatch(response.headers.get("content-range", "").strip())
    if match is None:
        raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                              f"{what}: missing or invalid Content-Range")
    first, last, total_text = int(match[1]), int(match[2]), match[3]
    want_last = end
    if total_text != "*":
        total = int(total_text)
        want_last = total - 1 if end is None else min(end, total - 1)
    if first != start or (want_last is not None and last != want_last) or last < first:
        raise errors.HubError(
            reasons.SOURCE_UNAVAILABLE,
            f"{what}: Content-Range {first}-{last} does not answer the requested {start}-"
            f"{'' if end is None else end}",
        )
    return last - first + 1


async def body(
    response: httpx.Response, expected: int | None, what: str
) -> AsyncGenerator[bytes, None]:
    """The body as it arrives; a short or long body or a broken connection is SourceUnavailable."""
    received = 0
    # expected_length refused any content encoding, so decoded bytes are the raw bytes.
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            received += len(chunk)
            if expected is not None and received > expected:
                raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                      f"{what}: more bytes than announced")
            yield chunk
    except httpx.HTTPError as exc:
        raise errors.from_transport(exc, what) from exc
    finally:
        await _close_iterator(chunks)
    if expected is not None and received != expected:
        raise errors.HubError(
            reasons.SOURCE_UNAVAILABLE, f"{what}: body ended after {received} of {expected} bytes"
        )



async def stream_range(
    client: httpx.AsyncClient,
    url: str,
    *,
    endpoint: str,
    token: str | None,
    what: str,
    mapper: ErrorMapper,
    start: int,
    end: int | None,
) -> AsyncGenerator[bytes, None]:
    """GET bytes ``start``..``end`` (inclusive; None = to the end) of a file, checked for length.

    Both hubs download this way; only the URL and the error mapping differ.
    """
    headers = {"accept-encoding": "identity"}
    wanted = range_header(start, end)
    if wanted is not None:
        headers["range"] = wanted
    async with open_response(
        client,
        "GET",
        url,
        endpoint=endpoint,
        token=token,
        what=what,
        mapper=mapper,
        headers=headers,
    ) as response:
        expected = expected_length(response, start, end, what)
        async with contextlib.aclosing(body(response, expected, what)) as chunks:
            async for chunk in chunks:
                yield chunk

def retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from ``Retry-After`` (integer seconds) or ``RateLimit: ...;r=0;t=N``."""
    value = response.headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    ratelimit = response.headers.get("ratelimit", "")
    fields = dict(
        part.strip().split("=", 1) for part in ratelimit.split(";") if "=" in part
    )
    remaining, reset = fields.get("r", ""), fields.get("t", "")
    if remaining == "0" and reset.isdigit():
        return float(reset) + 1.0
    if reset.isdigit() and ratelimit:
        return float(reset)
    return None
