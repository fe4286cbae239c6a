"""The kube-aggregator, as seen by an aggregated API server: an httpx client (HTTP/2 or HTTP/1.1)
that presents the front-proxy client certificate and sends the caller's identity as
``X-Remote-*`` headers exactly as client-go writes them (kube-samples/aggregator-requests.json).

    async with AggregatorClient(url, server_ca_pem, front_proxy.client) as aggregator:
        await aggregator.get("/apis/worker.gpustack.ai/v1", AVAILABILITY)
"""

from __future__ import annotations

import dataclasses
import ssl
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from devkit.controlplane.identity import UserInfo, service_account
from devkit.controlplane.pki import KeyPair
from openapi import install

_TOKEN_CHARS = frozenset(
    b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

# What the aggregator forwards for the callers of the recording (groups include
# system:authenticated, as kube-apiserver authenticated them).
ADMIN = UserInfo("admin", uid="admin-uid", groups=("system:masters", "system:authenticated"))
ALICE = UserInfo("alice", uid="alice-uid", groups=("tenants", "system:authenticated"))
PLUGIN_A = service_account(
    install.DEFAULT_NAMESPACE, install.PLUGIN_SERVICE_ACCOUNT,
    uid="13dd404c-0056-41bf-b858-e4232a8c48a2",
    pod=("plugin-a", "1db066b1-1edf-4efb-a324-75448ef128f2"),
    node=("node-a", "aea1e0c4-8615-43f8-be33-79dfc03f6957"),
    credential_id="69ae88c5-fdab-45da-acb7-26f0d4183ccc",
)  # fmt: skip

# The aggregator's own requests (aggregator.md 1.5): availability and aggregated discovery as
# system:kube-aggregator in system:masters; the legacy discovery fallback with no groups;
# OpenAPI as system:aggregator with no groups.
AVAILABILITY = UserInfo("system:kube-aggregator", groups=("system:masters",))
AGGREGATED_DISCOVERY = AVAILABILITY
LEGACY_DISCOVERY = UserInfo("system:kube-aggregator")
OPENAPI = UserInfo("system:aggregator")

DISCOVERY_V2_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)


def escape_extra_key(key: str) -> str:
    """client-go's headerKeyEscape: every byte that is not an RFC 7230 token character, and
    ``%``, becomes ``%XX`` (upper-case hex)."""
    out = []
    for byte in key.encode():
        if byte in _TOKEN_CHARS and byte != ord("%"):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def canonical_header(name: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey: upper-case the first letter and every letter after
    a ``-``, lower-case the rest; a name with a non-token byte is left alone."""
    if any(ord(c) not in _TOKEN_CHARS for c in name):
        return name
    out, upper = [], True
    for char in name:
        if upper and "a" <= char <= "z":
            char = char.upper()
        elif not upper and "A" <= char <= "Z":
            char = char.lower()
        out.append(char)
        upper = char == "-"
    return "".join(out)


def identity_headers(
    user: UserInfo,
    *,
    username_header: str = "X-Remote-User",
    group_header: str = "X-Remote-Group",
    extra_prefix: str = "X-Remote-Extra-",
    uid_header: str | None = "X-Remote-Uid",
) -> list[tuple[str, str]]:
    """The identity headers in the order Go writes them on HTTP/1.1 (sorted by name), one line
    per group and per extra value; ``X-Remote-Uid`` only for a non-empty UID."""
    lines: list[tuple[str, str]] = []
    for key in sorted(user.extra):
        name = canonical_header(extra_prefix + escape_extra_key(key))
        lines.extend((name, value) for value in user.extra[key])
    lines.extend((group_header, group) for group in user.groups)
    if uid_header and user.uid:
        lines.append((uid_header, user.uid))
    lines.append((username_header, user.name))
    return sorted(lines, key=lambda line: line[0])


def proxied_headers(host: str, path: str) -> list[tuple[str, str]]:
    """What the aggregator adds to a user's request it proxies (Audit-Id, X-Forwarded-*)."""
    return [
        ("Audit-Id", str(uuid.uuid4())),
        ("X-Forwarded-For", "127.0.0.1"),
        ("X-Forwarded-Host", host),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Uri", path),
    ]


@dataclasses.dataclass
class AggregatorClient:
    """``certificate`` None sends the headers without a client certificate (an impostor)."""

    base_url: str
    server_ca_pem: bytes
    certificate: KeyPair | None
    http2: bool = True
    timeout: float = 10.0

    def __post_init__(self) -> None:
        context = ssl.create_default_context(cadata=self.server_ca_pem.decode())
        if self.certificate is not None:
            self.certificate.load_into(context)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            verify=context,
            http2=self.http2,
            http1=not self.http2,
            timeout=self.timeout,
            headers={"User-Agent": "Go-http-client/2.0" if self.http2 else "Go-http-client/1.1"},
        )

    async def request(
        self,
        method: str,
        path: str,
        user: UserInfo | None,
        *,
        headers: Sequence[tuple[str, str]] = (),
        proxied: bool = False,
        **options: Any,
    ) -> httpx.Response:
        """``user`` None sends no identity headers; ``proxied`` adds the X-Forwarded-* set a
        user's proxied request carries."""
        lines: list[tuple[str, str]] = [("Accept-Encoding", "gzip")]
        if proxied:
            lines.extend(proxied_headers(httpx.URL(self.base_url).netloc.decode(), path))
        if user is not None:
            lines.extend(identity_headers(user))
        lines.extend(headers)
        return await self._client.request(method, path, headers=lines, **options)

    async def get(
        self, path: str, user: UserInfo | None, *, accept: str | None = None, **options: Any
    ) -> httpx.Response:
        extra = [("Accept", accept)] if accept else []
        return await self.request("GET", path, user, headers=extra, **options)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AggregatorClient:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def decode_extra_header(name: str, prefix: str = "X-Remote-Extra-") -> str | None:
    """The extra key a header carries, decoded as kube's requestheader authenticator does
    (prefix matched case-insensitively, the rest lower-cased, then path-unescaped)."""
    from urllib.parse import unquote

    if not name.lower().startswith(prefix.lower()):
        return None
    rest = name[len(prefix):].lower()
    try:
        return unquote(rest, errors="strict")
    except UnicodeDecodeError:
        return rest


def headers_of(recorded: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (name, value) header lines of one request in aggregator-requests.json."""
    return [(str(name), str(value)) for name, value in recorded["headers"]]
