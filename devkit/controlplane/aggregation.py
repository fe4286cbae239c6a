"""The aggregation layer: requests for a registered ``APIService`` group are proxied to its
backend as kube-aggregator does (aggregator.md sections 1 and 2).

kube-apiserver authenticates and authorizes the caller first (the handler has done both by the
time ``proxy`` runs), then opens its own TLS connection to the backend with the front-proxy
client certificate, trusting the APIService's ``caBundle``, drops the caller's credentials and
sends the identity as ``X-Remote-User``, one ``X-Remote-Group`` line per group and
``X-Remote-Extra-<key>`` lines (escaped as client-go escapes them). Answers, watch streams
included, are relayed as they arrive.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib import parse

import orjson

from devkit.controlplane import discovery, status
from devkit.controlplane.identity import MASTERS, UserInfo

if TYPE_CHECKING:
    from devkit.controlplane.handler import Handler

# Hop-by-hop and credential headers never forwarded (kube's proxy drops them too), nor the
# Impersonate-* ones the impersonation filter has honoured (and Impersonate-Extra-*).
_DROPPED = frozenset({
    "authorization", "connection", "keep-alive", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "impersonate-user",
    "impersonate-group", "impersonate-uid",
})  # fmt: skip
_RELAYED = ("content-type", "cache-control", "retry-after", "warning", "audit-id")
CHUNK = 64 * 1024
OPENAPI_USER = UserInfo("system:aggregator")
"""Who kube-aggregator fetches the backends' OpenAPI documents as (aggregator.md, OpenAPI)."""
OPENAPI_V3 = "/openapi/v3"
DISCOVERY_USER = UserInfo("system:kube-aggregator", groups=(MASTERS,))
"""Who kube-aggregator reads a backend's aggregated discovery as; its legacy fallback goes
without the group (aggregator.md 1.5)."""
LEGACY_DISCOVERY_USER = UserInfo("system:kube-aggregator")
DISCOVERY_ACCEPT = (f"{discovery.AGGREGATED_TYPE},"
                    f"application/json;g={discovery.DISCOVERY_GROUP};v=v2beta1;"
                    f"as={discovery.AGGREGATED_KIND}")  # fmt: skip
DISCOVERY_TIMEOUT = 5.0
_FAILURES = (OSError, http.client.HTTPException, ValueError, KeyError, TypeError,
             AttributeError)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class APIService:
    """``v1.<group>``: where its requests go and the CA that signs the backend's certificate."""

    group: str
    version: str
    url: str
    ca_bundle: bytes

    def serves(self, path: str) -> bool:
        return path == f"/apis/{self.group}" or path.startswith(f"/apis/{self.group}/")


def identity_headers(user: UserInfo, header_names: Any) -> list[tuple[str, str]]:
    """The identity as the front proxy sends it, in the header names it publishes."""
    from devkit.harness import aggregator  # imports this package's modules itself

    uid = header_names.uid_headers[0] if header_names.uid_headers else None
    return aggregator.identity_headers(
        user, username_header=header_names.username_headers[0],
        group_header=header_names.group_headers[0],
        extra_prefix=header_names.extra_headers_prefix[0], uid_header=uid,
    )  # fmt: skip


def openapi_service(plane: Any, path: str) -> APIService | None:
    """The APIService whose OpenAPI v3 group-version document ``path`` names."""
    prefix = f"{OPENAPI_V3}/apis/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    found: APIService | None = plane.api_service_for(f"/apis/{parts[0]}")
    return found if found is not None and parts[1:] == [found.version] else None


def openapi_index(plane: Any, services: list[APIService]) -> dict[str, Any]:
    """``GET /openapi/v3``: one path per APIService, its ``serverRelativeURL`` (with the hash)
    read from the backend's own index as the aggregator's OpenAPI controller reads it; a
    backend that does not answer is left out, as the aggregator leaves it out."""
    paths: dict[str, Any] = {}
    for service in services:
        key = f"apis/{service.group}/{service.version}"
        try:
            answer = fetch(plane, service, OPENAPI_V3, OPENAPI_USER)
            entry = orjson.loads(answer.body)["paths"][key] if answer.code == 200 else None
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            entry = None
        if isinstance(entry, dict) and "serverRelativeURL" in entry:
            paths[key] = {"serverRelativeURL": str(entry["serverRelativeURL"])}
    return {"paths": paths}


def discovery_items(plane: Any, services: list[APIService]) -> list[dict[str, Any]]:
    """Each APIService's group in aggregated discovery, as kube-aggregator builds it: the
    backend's ``/apis`` asked for the v2 list (its ``<group>``/``<version>`` taken), else its
    legacy ``/apis/<group>/<version>`` converted; a backend that answers neither is left out
    (kube would keep a stale copy it had fetched before, or list nothing)."""
    items: list[dict[str, Any]] = []
    for service in sorted(services, key=lambda s: s.group):
        try:
            version = _aggregated_version(plane, service) or _legacy_version(plane, service)
        except _FAILURES:
            version = None
        if version is not None:
            items.append({"metadata": {"name": service.group}, "versions": [version]})
    return items


def _aggregated_version(plane: Any, service: APIService) -> dict[str, Any] | None:
    answer = fetch(plane, service, "/apis", DISCOVERY_USER, accept=DISCOVERY_ACCEPT,
                   timeout=DISCOVERY_TIMEOUT)  # fmt: skip
    content_type = answer.content_type.replace(" ", "")
    if answer.code != 200 or not discovery.wants_aggregated(content_type):
        return None
    for item in orjson.loads(answer.body)["items"]:
        if item["metadata"].get("name") != service.group:
            continue
        for version in item["versions"]:
            if version["version"] == service.version:
                found: dict[str, Any] = version
                return found
    return None


def _legacy_version(plane: Any, service: APIService) -> dict[str, Any] | None:
    path = f"/apis/{service.group}/{service.version}"
    answer = fetch(plane, service, path, LEGACY_DISCOVERY_USER, timeout=DISCOVERY_TIMEOUT)
    if answer.code != 200:
        return None
    listed = orjson.loads(answer.body)
    return {"version": service.version, "resources": discovery.converted(listed["resources"]),
            "freshness": "Current"}  # fmt: skip


def _connection(plane: Any, service: APIService,
                timeout: float = 30) -> http.client.HTTPSConnection:
    target = parse.urlsplit(service.url)
    context = ssl.create_default_context(cadata=service.ca_bundle.decode())
    plane.front_proxy.client.load_into(context)
    return http.client.HTTPSConnection(target.hostname or "127.0.0.1", target.port or 443,
                                       context=context, timeout=timeout)


@dataclasses.dataclass(frozen=True)
class Fetched:
    """A backend's answer to one of the aggregator's own GETs."""

    code: int
    content_type: str
    body: bytes


def fetch(plane: Any, service: APIService, path: str, user: UserInfo, *,
          accept: str = "application/json", timeout: float = 30) -> Fetched:
    """One GET of the aggregator's own to the backend (front-proxy certificate, ``user``)."""
    connection = _connection(plane, service, timeout)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        connection.putheader("Accept", accept)
        for name, value in identity_headers(user, plane.front_proxy):
            connection.putheader(name, value)
        connection.endheaders()
        with connection.getresponse() as answer:
            return Fetched(answer.status, answer.getheader("Content-Type", ""), answer.read())
    finally:
        connection.close()


def proxy(handler: Handler, service: APIService, method: str, body: bytes, user: UserInfo,
          track: Callable[[socket.socket | None, socket.socket | None], None]) -> None:
    """Forward one request and relay the answer. ``track(add, remove)`` registers the backend
    socket with the server, so a stop or an outage cuts relayed watches too."""
    plane = handler.plane
    connection = _connection(plane, service)
    headers = [(k, v) for k, v in handler.headers.items() if k.lower() not in _DROPPED
               and not k.lower().startswith(("x-remote-", "impersonate-extra-"))]
    headers += identity_headers(user, plane.front_proxy)
    headers += [("X-Forwarded-For", handler.client_address[0]),
                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Uri", handler.path)]
    try:
        connection.connect()
        raw = connection.sock
        raw.settimeout(None)
        track(raw, None)
        try:
            connection.putrequest(method, handler.path, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            answer = connection.getresponse()
            try:
                _relay(handler, answer)
            finally:
                # a response that will close owns the socket (http.client handed it over):
                # close it here, or the collector finds it open (a ResourceWarning)
                answer.close()
        finally:
            track(None, raw)
    except (OSError, http.client.HTTPException) as exc:
        if handler._code:  # the answer had started: nothing more to say on this connection
            handler.close_connection = True
            return
        raise status.StatusError(status.status(
            503, "ServiceUnavailable",
            f"error trying to reach service: {type(exc).__name__}")) from None  # fmt: skip
    finally:
        with contextlib.suppress(OSError):
            connection.close()


def _relay(handler: Handler, answer: http.client.HTTPResponse) -> None:
    streamed = answer.getheader("Transfer-Encoding", "").lower() == "chunked"
    handler._answered(answer.status)
    handler.send_response(answer.status)
    for name in _RELAYED:
        value = answer.getheader(name)
        if value is not None:
            handler.send_header(name, value)
    if not streamed:
        data = answer.read()
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)
        return
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    try:
        while True:
            piece = answer.read1(CHUNK)
            if not piece:
                break
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except (OSError, http.client.HTTPException):
        handler.close_connection = True
