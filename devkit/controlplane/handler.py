"""One HTTP request to the control plane: record, faults, authenticate, impersonate, authorize,
route."""

from __future__ import annotations

import contextlib
import socket
import ssl
from http import server as http_server
from typing import TYPE_CHECKING, Any
from urllib import parse

import orjson

from devkit.controlplane import (
    aggregation,
    discovery,
    faults,
    impersonation,
    objects,
    openapiv2,
    pki,
    reviews,
    status,
    watch,
)
from devkit.controlplane.identity import ANONYMOUS, EXTRA_CREDENTIAL_ID, UserInfo
from devkit.controlplane.requestinfo import RequestInfo, parse_request, query_values
from devkit.controlplane.resources import BY_PATH, NODES

if TYPE_CHECKING:
    from devkit.controlplane.plane import ControlPlane

BODY_LIMIT = 3 << 20
_REVIEWS = {
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
}


class Drop(Exception):
    """Close the connection without an answer."""


class Handler(http_server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fixture-kube-apiserver"
    sys_version = ""

    @property
    def plane(self) -> ControlPlane:
        plane: ControlPlane = self.server.plane  # type: ignore[attr-defined]
        return plane

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # --- plumbing ------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        split = parse.urlsplit(self.path)
        query = query_values(split.query)
        self._code = 0
        entry = faults.Recorded(
            method=method, path=split.path, query=split.query, user="",
            headers={k.lower(): v for k, v in self.headers.items()
                     if k.lower() != "authorization"},
            body=None, code=0,
        )  # fmt: skip
        self.plane.recorder.add(entry)
        self._entry = entry
        dropped = False
        try:
            body = self._read_body()
            entry.body = _parsed(body)
            user = self._authenticate()
            entry.user = user.name
            fault = self.plane.faults.match(method, split.path)
            if fault is not None:
                self._apply(fault)
            try:
                user = self._impersonate(user)
            except impersonation.UserlessImpersonation as exc:
                self._text(500, exc.text + "\n", {"X-Content-Type-Options": "nosniff"})
                return
            info = parse_request(method, self.path, query)
            attrs = info.attributes(user)
            decision = self.plane.policy.authorize(attrs)
            if not decision.allowed:
                raise status.StatusError(status.forbidden(attrs))
            content_type = self.headers.get("Content-Type", "")
            # No Content-Type means JSON, as kube-apiserver reads it (the Python client sends none).
            if body and method in ("POST", "PUT") and content_type and "json" not in content_type:
                raise status.StatusError(status.unsupported_body())
            self._route(method, info, query, body, user)
        except status.StatusError as exc:
            self._json(exc.code, exc.body)
        except Drop:
            self.close_connection = True
            dropped = True
        except (ConnectionError, ssl.SSLError, TimeoutError):
            self.close_connection = True
        finally:
            entry.code = self._code
            if dropped:
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)

    def _answered(self, code: int) -> None:
        """Record the code before the client can read the answer (tests read it right after)."""
        self._code = code
        self._entry.code = code

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > BODY_LIMIT:
            self.close_connection = True
            raise status.StatusError(status.status(413, "RequestEntityTooLarge",
                                                   "the request body is too large"))  # fmt: skip
        return self.rfile.read(length) if length else b""

    def _apply(self, fault: faults.Fault) -> None:
        if fault.action == "hold":
            fault.entered.set()
            fault.gate.wait(faults.GUARD_SECONDS)
            return
        if fault.action == "drop":
            raise Drop()
        raise status.StatusError(
            status.status(fault.code, _reason(fault.code), fault.message)
        )

    def _json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._bytes(code, orjson.dumps(body), "application/json", headers)

    def _bytes(self, code: int, data: bytes, content_type: str,
               headers: dict[str, str] | None = None) -> None:
        self._answered(code)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _cached(self, data: bytes, content_type: str, headers: dict[str, str]) -> None:
        """200 with ``data``, or 304 when ``If-None-Match`` is exactly the ``ETag``."""
        if self.headers.get("If-None-Match") == headers["ETag"]:
            self._answered(304)
            self.send_response(304)
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            return
        self._bytes(200, data, content_type, headers)

    def _text(self, code: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        self._answered(code)
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    # --- authentication --------------------------------------------------------------

    def _authenticate(self) -> UserInfo:
        der = None
        if isinstance(self.connection, ssl.SSLSocket):
            der = self.connection.getpeercert(binary_form=True)
        if der:
            name, groups = pki.identity_of(der)
            extra = {EXTRA_CREDENTIAL_ID: (f"X509SHA256={pki.sha256_hex(der)}",)}
            return UserInfo(name=name, groups=groups, extra=extra).authenticated()
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            entry = self.plane.tokens.get(token.strip())
            if entry is None or not entry.valid_for(self.plane.api_audiences):
                # a bound token for another audience (a peer's, the plugins') is no credential
                # here: kube-apiserver's authenticator checks it against its own audiences
                raise status.StatusError(status.unauthorized())
            return entry.user.authenticated()
        return ANONYMOUS

    def _impersonate(self, user: UserInfo) -> UserInfo:
        """The identity every later step sees: the caller, or whom it may impersonate."""
        references = impersonation.requested(self.headers.items(), self.path)
        if not references:
            return user
        return impersonation.impersonate(user, references, self.plane.policy)

    # --- routing ---------------------------------------------------------------------

    def _route(
        self, method: str, info: RequestInfo, query: dict[str, str], body: bytes, user: UserInfo
    ) -> None:
        plane = self.plane
        service = plane.api_service_for(info.path)
        if service is not None:
            aggregation.proxy(self, service, method, body, user, self._track)
            return
        service = aggregation.openapi_service(plane, info.path)
        if service is not None and method in ("GET", "HEAD"):
            # the aggregator serves a backend's OpenAPI v3 document as fetched with its own
            # identity, whoever asks (RBAC's system:discovery already let the caller in)
            aggregation.proxy(self, service, method, b"", aggregation.OPENAPI_USER, self._track)
            return
        if not info.resource_request:
            self._non_resource(method, info)
            return
        if (info.group, info.resource) in _REVIEWS and info.version == "v1":
            self._review(method, info, query, body, user)
            return
        kind = BY_PATH.get((info.group, info.version, info.resource))
        if kind is None or (
            not kind.namespaced and info.namespace and info.resource != "namespaces"
        ):
            raise status.StatusError(status.path_not_found())
        if kind is NODES and info.subresource == "proxy":
            self._node_proxy(info)
            return
        if info.subresource and not (info.subresource == "status" and kind.has_status):
            raise status.StatusError(status.path_not_found())
        call = objects.Call(info, kind, method, query, body, self.headers.get("Content-Type", ""))
        store = plane.store
        if method in ("GET", "HEAD") and info.verb == "watch":
            self._watch(call)
        elif method in ("GET", "HEAD") and info.verb == "get":
            # A list with fieldSelector=metadata.name carries that name (for RBAC, as kube's
            # RequestInfo does) and is still answered with a List.
            namespace = info.namespace if kind.namespaced else ""
            self._json(200, store.get(kind, namespace, info.name))
        elif method in ("GET", "HEAD"):
            self._json(200, objects.list_objects(store, call))
        elif method == "POST" and not info.name:
            code, created = objects.create(store, call)
            self._json(code, created)
        elif method == "PUT" and info.name:
            self._json(200, objects.replace(store, call))
        elif method == "PATCH" and info.name:
            self._json(200, objects.patch(store, call))
        elif method == "DELETE" and info.name:
            self._json(200, objects.delete(store, call))
        elif method == "DELETE":
            self._json(200, objects.delete_collection(store, call))
        else:
            raise status.StatusError(status.method_not_allowed(method, info.path))

    def _track(self, add: socket.socket | None, remove: socket.socket | None) -> None:
        """Proxied connections are cut with the server's own (a stop, an outage)."""
        server = self.server
        with server.connections_lock:  # type: ignore[attr-defined]
            if add is not None:
                server.connections.add(add)  # type: ignore[attr-defined]
            if remove is not None:
                server.connections.discard(remove)  # type: ignore[attr-defined]

    def _non_resource(self, method: str, info: RequestInfo) -> None:
        if method not in ("GET", "HEAD"):
            raise status.StatusError(status.method_not_allowed(method, info.path))
        path = info.path.rstrip("/") or "/"
        if path == "/version":
            self._json(200, self.plane.version_info())
        elif path in ("/healthz", "/livez", "/readyz"):
            self._text(200, "ok")
        elif path == aggregation.OPENAPI_V3:
            self._json(200, aggregation.openapi_index(self.plane, self.plane.api_services()))
        elif path == openapiv2.PATH:
            self._openapi_v2()
        elif path in ("/api", "/apis") and discovery.wants_aggregated(
                self.headers.get("Accept", "")):
            self._aggregated_discovery(path)
        else:
            answer = discovery.document(path, self.plane.server_address(),
                                        self.plane.aggregated_groups())
            if answer is None:
                raise status.StatusError(status.path_not_found())
            self._json(200, answer)

    def _openapi_v2(self) -> None:
        plane = self.plane
        chosen = openapiv2.negotiate(self.headers.get("Accept", ""))
        if chosen is None:
            self._bytes(406, b"", "text/plain; charset=utf-8", {"Vary": "Accept"})
            return
        if chosen == openapiv2.PROTOBUF:
            relayed = openapiv2.relayed_protobuf(plane, plane.api_services())
            if relayed is None:
                raise status.StatusError(status.path_not_found())
            data, content_type = relayed.body, relayed.content_type or "application/octet-stream"
        else:
            data = orjson.dumps(openapiv2.merged(plane, plane.api_services()))
            content_type = "application/json"
        self._cached(data, content_type, {"ETag": openapiv2.etag(data), "Vary": "Accept"})

    def _aggregated_discovery(self, path: str) -> None:
        backends = aggregation.discovery_items(self.plane, self.plane.api_services()) if (
            path == "/apis") else []
        document = discovery.aggregated(path, backends)
        if document is None:
            raise status.StatusError(status.path_not_found())
        self._cached(orjson.dumps(document), discovery.AGGREGATED_TYPE, {
            "ETag": discovery.etag(document), "Vary": "Accept", "Cache-Control": "public"})

    def _review(
        self, method: str, info: RequestInfo, query: dict[str, str], body: bytes, user: UserInfo
    ) -> None:
        if method != "POST" or info.name:
            raise status.StatusError(status.method_not_allowed(method, info.path))
        plane = self.plane
        document = objects._object(body) if body else {}
        manager = reviews.manager_name(
            self.headers.get("User-Agent", ""), query.get("fieldManager")
        )
        if info.resource == "tokenreviews":
            answer = reviews.token_review(document, plane.tokens_snapshot(), manager,
                                          plane.api_audiences)  # fmt: skip
        elif info.resource == "subjectaccessreviews":
            answer = reviews.subject_access_review(document, plane.policy, manager)
        elif info.resource == "selfsubjectaccessreviews":
            answer = reviews.self_subject_access_review(document, user, plane.policy, manager)
        else:
            if not plane.serve_selfsubjectreview:
                raise status.StatusError(status.path_not_found())
            answer = reviews.self_subject_review(user)
        self._json(201, answer)

    def _node_proxy(self, info: RequestInfo) -> None:
        plane = self.plane
        plane.store.get(NODES, "", info.name)
        if info.rest != ("configz",):
            raise status.StatusError(status.path_not_found())
        code, answer = plane.configz_for(info.name)
        self._json(code, answer)

    def _watch(self, call: objects.Call) -> None:
        # Taken before the client can see the answer: a bookmark asked for after that is sent.
        generation = self.plane.bookmarks.generation
        self._answered(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def write(line: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        plane = self.plane
        epoch = plane.epoch
        try:
            watch.serve(
                plane.store, call, write, plane.bookmarks, lambda: plane.stopping_for(epoch),
                generation,
            )
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except status.StatusError as exc:
            write(orjson.dumps({"type": "ERROR", "object": exc.body}) + b"\n")
            self.wfile.write(b"0\r\n\r\n")
        except (ConnectionError, ssl.SSLError, TimeoutError, ValueError):
            self.close_connection = True


def _reason(code: int) -> str:
    return {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests",
            504: "Timeout", 401: "Unauthorized", 403: "Forbidden"}.get(code, "")  # fmt: skip


def _parsed(body: bytes) -> Any:
    if not body:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:256]
