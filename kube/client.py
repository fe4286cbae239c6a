"""``Client``: one async connection to kube-apiserver (or to our own API server) for everything.

A thin layer over ``lightkube.AsyncClient``: the same calls (get, list, watch, create, replace,
patch, delete, including ``Resource.Status`` subresources) with every failure translated into
``kube.errors``, plus ``request`` for paths lightkube has no model for (``/version``,
``/api/v1/nodes/{name}/proxy/configz``) over the same httpx2 client, connection pool and
credential. ``api`` is the lightkube client itself for anything else.

Every object is decoded by ``kube.decoding`` (Go's nulls tolerated); one that still does not fit
its model is skipped by a list or a watch (logged once, counted) and fails a ``get`` with
``Undecodable``.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

import httpx2
import lightkube
from lightkube.core import resource as lk_resource
from lightkube.core.selector import build_selector
from lightkube.types import PatchType

from kube import auth as kube_auth
from kube import config as kube_config
from kube import decoding, errors
from openapi import wire

Item = TypeVar("Item")
Res = TypeVar("Res", bound=lk_resource.Resource)

DEFAULT_TIMEOUT = 10.0
LIST_TIMEOUT = 60.0
"""How long a LIST page may take: kube-apiserver's own limit on a request (``--request-timeout``,
60 s), which client-go leaves a list to; a fleet starting together may queue this long, and a
shorter client limit would make it list again from the first page."""
DEFAULT_USER_AGENT = "model-manager/0.1.0"
RAW_BODY_LIMIT = 16 << 20
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

Selector = Mapping[str, Any] | str | None
"""A label or field selector: lightkube's mapping form or kube's string syntax."""


VersionInfo = wire.VersionInfo
"""``GET /version`` (apimachinery's version.Info), as the contract types it."""


@dataclasses.dataclass(frozen=True, slots=True)
class RawResponse:
    status_code: int
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


@dataclasses.dataclass(frozen=True, slots=True)
class ListResult(Generic[Item]):
    items: list[Item]
    resource_version: str


_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def minor_version(info: VersionInfo) -> tuple[int, int]:
    """(major, minor) of a ``/version`` answer, from gitVersion (``v1.36.2``) or the major/minor
    fields (which providers suffix, e.g. ``"36+"``). Raises ValueError when neither parses."""
    match = _VERSION.match(info.get("gitVersion", ""))
    if match:
        return int(match.group(1)), int(match.group(2))
    major = re.match(r"\d+", info.get("major", ""))
    minor = re.match(r"\d+", info.get("minor", ""))
    if major and minor:
        return int(major.group()), int(minor.group())
    raise ValueError("the /version answer names no version")


class Client:
    """An async Kubernetes client. Build it with ``connect``, ``from_kubeconfig`` or
    ``in_cluster``; close it with ``aclose`` or ``async with``."""

    def __init__(
        self,
        cluster: kube_config.ClusterConfig,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        field_manager: str | None = None,
        namespace: str | None = None,
        http2: bool = False,
        user_agent: str = DEFAULT_USER_AGENT,
    ) -> None:
        """``user_agent`` names the component in kube-apiserver's audit log and, up to its
        first ``/``, as the field manager of its writes (kube's default)."""
        self.cluster = cluster
        try:
            self.api = lightkube.AsyncClient(
                config=cluster.single,
                namespace=namespace,
                timeout=httpx2.Timeout(timeout),
                field_manager=field_manager,
                trust_env=False,
                http2=http2,
            )
        except (OSError, ValueError) as exc:
            # ssl.SSLError is an OSError: an unreadable CA or client key.
            raise errors.ConfigError(f"{cluster.source}: cannot set up TLS: {exc}") from None
        # The httpx2 client lightkube built with client_adapter (TLS, client certificate).
        # Token files and exec plugins get our credential objects (kube.auth) instead of
        # lightkube's; everything else keeps lightkube's.
        self._http: httpx2.AsyncClient = self.api._client._client
        self._http.headers["User-Agent"] = user_agent
        if cluster.auth is not None:
            self._http.auth = cluster.auth
        # lightkube's overloads do not accept a type variable; calls go through an untyped alias.
        self._lk: Any = self.api

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], *, context: str | None = None, **options: Any
    ) -> Client:
        return cls(kube_config.from_kubeconfig(path, context), **options)

    @classmethod
    def from_url(cls, server: str, *, token: str | None = None, ca_file: str | None = None,
                 ca_data: str | None = None, **options: Any) -> Client:
        """A server URL with a bearer token and a CA (``kube.config.from_url``)."""
        return cls(kube_config.from_url(server, token=token, ca_file=ca_file, ca_data=ca_data),
                   **options)

    @classmethod
    def in_cluster(
        cls,
        *,
        env: Mapping[str, str] | None = None,
        service_account_dir: str | os.PathLike[str] = kube_config.SERVICE_ACCOUNT_DIR,
        **options: Any,
    ) -> Client:
        return cls(
            kube_config.in_cluster(env=env, service_account_dir=service_account_dir), **options
        )

    @classmethod
    def connect(
        cls, kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None,
        **options: Any,
    ) -> Client:  # fmt: skip
        """``--kubeconfig`` if given, else in-cluster, else ``$KUBECONFIG``/``~/.kube/config``."""
        return cls(kube_config.from_env(kubeconfig, context), **options)

    @property
    def namespace(self) -> str:
        return str(self.api.namespace)

    async def aclose(self) -> None:
        await self._lk.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- resources -------------------------------------------------------------------

    async def get(self, res: type[Res], name: str, *, namespace: str | None = None) -> Res:
        """Raises ``Undecodable`` when the object does not fit ``res``."""
        return cast(Res, await self._one("get", res, name=name, namespace=namespace))

    async def list(
        self,
        res: type[Res],
        *,
        namespace: str | None = None,
        labels: Selector = None,
        fields: Selector = None,
        chunk_size: int | None = None,
    ) -> ListResult[Res]:
        """Every object (all pages) and the collection's resourceVersion, to watch from.
        ``labels``/``fields``: a mapping in lightkube's form (``{"app": "x"}``, operators) or a
        selector string in kube's own syntax (``app=x,tier!=db``), sent as written."""
        request = self.api._client.prepare_request(
            "list", res=res, namespace=namespace,
            params={"limit": chunk_size, **_selectors(labels, fields)},
        )  # fmt: skip
        request.response_type = decoding.tolerant(res)
        iterable = self.api._client.list(request)
        items: builtins.list[Res] = []
        try:
            async for item in iterable:
                if isinstance(item, decoding.Undecodable):
                    decoding.skipped(item)
                else:
                    items.append(item)
            version = iterable._resourceVersion or ""
        except Exception as exc:
            raise _translated(exc) from None
        return ListResult(items, version)

    async def watch(
        self,
        res: type[Res],
        *,
        namespace: str | None = None,
        labels: Selector = None,
        fields: Selector = None,
        resource_version: str | None = None,
        server_timeout: int | None = None,
        bookmarks: bool = False,
    ) -> AsyncIterator[tuple[str, Res]]:
        """Events after ``resource_version`` (pass the list's; without one, every object is
        replayed as ADDED, again each time the stream is resumed). lightkube resumes a stream
        the server ended (after ``server_timeout`` seconds, kube's ``timeoutSeconds``) from the
        last version seen; an ``Expired`` (410) means list again. ``bookmarks`` asks for
        ``BOOKMARK`` events (``allowWatchBookmarks``), which move that version on while nothing
        changes, so a resumed stream rarely finds its version compacted. A bookmark's object is
        the resource's model where the model can hold what kube sends (kube-apiserver sends the
        kind's empty object, ``"spec": {"drivers": null}`` for a CSINode), else a ``Bookmark``
        (nothing but metadata for a model that requires ``spec``): either way
        ``obj.metadata.resourceVersion`` and ``dict``/``to_dict()`` work. An object that does
        not fit ``res`` is skipped (``kube.decoding``); the stream goes on."""
        # lightkube's watch() takes no selector string and no allowWatchBookmarks: the same
        # request it builds, with our parameters.
        request = self.api._client.prepare_request(
            "list", res=res, namespace=namespace, watch=True,
            params={
                "timeoutSeconds": server_timeout,
                "resourceVersion": resource_version,
                **_selectors(labels, fields),
                "allowWatchBookmarks": "true" if bookmarks else None,
            },
        )  # fmt: skip
        request.response_type = decoding.tolerant(res)
        stream = self.api._client.watch(request)
        try:
            async for kind, obj in stream:
                if isinstance(obj, decoding.Undecodable):
                    decoding.skipped(obj)
                else:
                    yield kind, obj
        except Exception as exc:
            raise _translated(exc) from None

    async def create(self, obj: Res, *, namespace: str | None = None) -> Res:
        return cast(Res, await self._one("post", obj=obj, namespace=namespace))

    async def replace(self, obj: Res, *, namespace: str | None = None) -> Res:
        """PUT: fails with ``Conflict`` when ``metadata.resourceVersion`` is stale."""
        return cast(Res, await self._one("put", obj=obj, namespace=namespace))

    async def patch(
        self,
        res: type[Res],
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Res:
        """A JSON merge patch by default (``PatchType.JSON`` for a JSON patch)."""
        patched = await self._one(
            "patch", res, obj=patch, name=name, namespace=namespace,
            headers={"Content-Type": patch_type.value},
        )  # fmt: skip
        return cast(Res, patched)

    async def _one(
        self,
        method: str,
        res: type[Any] | None = None,
        *,
        obj: Any = None,
        name: str | None = None,
        namespace: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One object's request, as lightkube's own ``get``/``create``/``replace``/``patch``
        send it, with the answer decoded by ``kube.decoding``."""
        client: Any = self.api._client  # lightkube's GenericAsyncClient is untyped
        try:
            request = client.prepare_request(
                method, res=res, obj=obj, name=name, namespace=namespace,
                headers=dict(headers) if headers is not None else None,
            )  # fmt: skip
            model = request.response_type
            if model is not None:
                request.response_type = decoding.tolerant(model)
            response = await client.send(client.build_adapter_request(request))
            found = client.handle_response(method, response, request)
        except Exception as exc:
            raise _translated(exc) from None
        if isinstance(found, decoding.Undecodable):
            raise errors.Undecodable(
                response.status_code, "Undecodable",
                f"{found.resource} {found.key}: does not fit the client's model ({found.reason})",
            )  # fmt: skip
        return found

    async def delete(self, res: type[Res], name: str, *, namespace: str | None = None) -> None:
        try:
            await self._lk.delete(res, name, namespace=namespace)
        except Exception as exc:
            raise _translated(exc) from None

    async def bearer_token(self) -> str | None:
        """The bearer token this client sends (re-read or re-run as its source says), or None
        when it authenticates otherwise (a client certificate) or not at all: for a TokenReview
        of the client's own identity. Raises ``CredentialError`` when the source fails."""
        auth = self.cluster.auth
        if isinstance(auth, kube_auth.TokenFileAuth):
            header = auth._current()
        elif isinstance(auth, kube_auth.ExecCredentialAuth):
            header = auth._bearer if auth._valid() else await auth._token(None)
        else:
            user = self.cluster.single.user
            return user.token if user is not None and user.token else None
        return header.removeprefix("Bearer ") or None

    # --- non-resource paths ------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> RawResponse:
        """One request on the client's own connection and credential. A non-2xx answer raises
        the typed error for its Status. ``timeout``: seconds for this request instead of the
        client's (a LIST page may take as long as the server allows a request, ``LIST_TIMEOUT``)."""
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        request_headers = {"Accept": "application/json", **(headers or {})}
        limits: dict[str, Any] = {} if timeout is None else {"timeout": httpx2.Timeout(timeout)}
        try:
            async with self._http.stream(
                method, path, params=params, json=json_body, headers=request_headers, **limits
            ) as response:
                content = bytearray()
                async for chunk in response.aiter_bytes():
                    content += chunk
                    if len(content) > RAW_BODY_LIMIT:
                        raise errors.ServerError(
                            response.status_code, "ResponseTooLarge",
                            f"{method} {path}: answer larger than {RAW_BODY_LIMIT} bytes",
                        )  # fmt: skip
                body = bytes(content)
                if response.status_code >= 400:
                    raise errors.from_response(
                        httpx2.Response(
                            response.status_code, headers=response.headers, content=body
                        )
                    )
                return RawResponse(response.status_code, dict(response.headers), body)
        except Exception as exc:
            raise _translated(exc) from None

    async def self_subject_review(self) -> dict[str, Any]:
        """Who this client is to the server: a SelfSubjectReview's ``status.userInfo``
        (``username``, ``uid``, ``groups``, ``extra``). Raises ``NotFound`` where it is not
        served (kube-apiserver before 1.28)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = (await self.request("POST", SELF_SUBJECT_REVIEWS, json_body=body)).json()
        status = answer.get("status") if isinstance(answer, dict) else None
        found = status.get("userInfo") if isinstance(status, dict) else None
        if not isinstance(found, dict):
            raise errors.ServerError(201, "BadResponse", "the SelfSubjectReview has no userInfo")
        return found

    async def version(self) -> VersionInfo:
        """kube-apiserver's ``/version``."""
        answer = (await self.request("GET", "/version")).json()
        if not isinstance(answer, dict):
            raise errors.ServerError(200, "BadResponse", "/version did not answer an object")
        return cast(VersionInfo, answer)

    async def node_configz(self, node: str) -> dict[str, Any]:
        """The kubelet's running configuration through the API server's node proxy
        (``GET /api/v1/nodes/{node}/proxy/configz``; RBAC: get nodes/proxy)."""
        path = f"/api/v1/nodes/{_segment(node)}/proxy/configz"
        answer = (await self.request("GET", path)).json()
        if not isinstance(answer, dict):
            raise errors.ServerError(200, "BadResponse", "configz did not answer an object")
        return answer


def _selector(pairs: Selector, *, for_fields: bool = False) -> str | None:
    """A selector for the query: a string as written (kube's syntax), a mapping through
    lightkube's ``build_selector``; empty means none."""
    if not pairs:
        return None
    if isinstance(pairs, str):
        return pairs.strip() or None
    if not isinstance(pairs, Mapping):
        raise TypeError(f"a selector is a mapping or a string, not {type(pairs).__name__}")
    return str(build_selector(dict(pairs), for_fields=for_fields)) or None


def _selectors(labels: Selector, fields: Selector) -> dict[str, str | None]:
    return {"labelSelector": _selector(labels),
            "fieldSelector": _selector(fields, for_fields=True)}


def _segment(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ValueError("not a valid object name")
    return name


def _translated(exc: Exception) -> Exception:
    typed = errors.translate(exc)
    return typed if typed is not None else exc
