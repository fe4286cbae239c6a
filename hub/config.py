"""Hub connection settings and the one place the shared httpx client is built.

The client speaks HTTP/1.1 and HTTP/2, reuses connections, has a timeout on every phase, trusts the
configured CA bundle, sends HTTPS through the proxy unless ``no_proxy`` names the host, and never
follows redirects itself: the hub clients follow them so the token policy is theirs to enforce.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import ssl

import httpx

from hub import errors
from openapi import nodestore, reasons


@dataclasses.dataclass(frozen=True, slots=True)
class HubConfig:
    huggingface_endpoint: str = nodestore.HUGGING_FACE_ENDPOINT.default
    modelscope_endpoint: str = nodestore.MODEL_SCOPE_ENDPOINT.default
    https_proxy: str | None = None
    # Comma-separated hosts, ``.domain`` suffixes, IPs, CIDRs, ``host:port``, or ``*``.
    no_proxy: str = ""
    ca_bundle: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    write_timeout: float = 30.0
    pool_timeout: float = 30.0
    max_connections: int = 64
    max_keepalive_connections: int = 32


def _check_url(name: str, value: str) -> httpx.URL:
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, TypeError) as exc:
        raise errors.HubError(reasons.INVALID_REQUEST, f"{name} is not a valid URL") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise errors.HubError(reasons.INVALID_REQUEST, f"{name} must be an absolute http(s) URL")
    if url.query or url.fragment:
        raise errors.HubError(reasons.INVALID_REQUEST, f"{name} must not carry a query or fragment")
    return url


def check(config: HubConfig) -> None:
    """Refuse an unusable endpoint, proxy or CA bundle with ``InvalidRequest``."""
    for name in ("huggingface_endpoint", "modelscope_endpoint"):
        url = _check_url(name, getattr(config, name))
        if url.userinfo:
            raise errors.HubError(reasons.INVALID_REQUEST, f"{name} must not carry credentials")
    if config.https_proxy:
        _check_url("https_proxy", config.https_proxy)
    if config.ca_bundle is not None:
        if not os.path.isfile(config.ca_bundle):
            raise errors.HubError(reasons.INVALID_REQUEST,
                                  f"CA bundle {config.ca_bundle} does not exist")
        try:
            ssl.create_default_context(cafile=config.ca_bundle)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise errors.HubError(
                reasons.INVALID_REQUEST, f"CA bundle {config.ca_bundle} is not a PEM bundle"
            ) from exc
    timeouts = (
        config.connect_timeout,
        config.read_timeout,
        config.write_timeout,
        config.pool_timeout,
    )
    if any(t <= 0 for t in timeouts):
        raise errors.HubError(reasons.INVALID_REQUEST, "every timeout must be positive")


def bypasses_proxy(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``no_proxy`` sends this host direct (curl's rules plus CIDR ranges)."""
    host = host.strip("[]").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            if address is not None and address in network:
                return True
            continue
        entry_port: int | None = None
        if entry.count(":") == 1:
            name, _, port_text = entry.partition(":")
            if port_text.isdigit():
                entry, entry_port = name, int(port_text)
        if entry_port is not None and entry_port != port:
            continue
        entry = entry.strip("[]")
        if entry.startswith("*."):
            entry = entry[1:]
        if host == entry.lstrip(".") or host.endswith("." + entry.lstrip(".")):
            return True
    return False


class _ProxyRouter(httpx.AsyncBaseTransport):
    """Sends HTTPS through the proxy unless ``no_proxy`` names the host; httpx's own mount
    patterns cannot express CIDR ranges, hence this small router."""

    def __init__(
        self, direct: httpx.AsyncBaseTransport, proxied: httpx.AsyncBaseTransport, no_proxy: str
    ) -> None:
        self._direct = direct
        self._proxied = proxied
        self._no_proxy = no_proxy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme == "https" and not bypasses_proxy(url.host, url.port, self._no_proxy):
            return await self._proxied.handle_async_request(request)
        return await self._direct.handle_async_request(request)

    async def aclose(self) -> None:
        await self._direct.aclose()
        await self._proxied.aclose()


def ssl_context(config: HubConfig) -> ssl.SSLContext:
    if config.ca_bundle is not None:
        return ssl.create_default_context(cafile=config.ca_bundle)
    return ssl.create_default_context()


def make_client(config: HubConfig) -> httpx.AsyncClient:
    """The node's one hub client; call ``check`` first to get a clean error for bad settings."""
    check(config)
    context = ssl_context(config)
    limits = httpx.Limits(
        max_connections=config.max_connections,
        max_keepalive_connections=config.max_keepalive_connections,
    )
    timeout = httpx.Timeout(
        connect=config.connect_timeout,
        read=config.read_timeout,
        write=config.write_timeout,
        pool=config.pool_timeout,
    )
    direct = httpx.AsyncHTTPTransport(http1=True, http2=True, verify=context, limits=limits)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    if config.https_proxy:
        proxied = httpx.AsyncHTTPTransport(
            http1=True,
            http2=True,
            verify=context,
            limits=limits,
            proxy=httpx.Proxy(config.https_proxy),
        )
        mounts["all://"] = _ProxyRouter(direct, proxied, config.no_proxy)
    else:
        mounts["all://"] = direct
    return httpx.AsyncClient(
        mounts=mounts,
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"user-agent": "model-manager-hub/1"},
    )
