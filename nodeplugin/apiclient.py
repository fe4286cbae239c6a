"""List and watch ``modelartifacts`` across namespaces (the informer's client seam).

``ArtifactClient`` is the Protocol the informer depends on; ``KubeArtifactClient`` implements it
over the one Kubernetes client (``kube.Client``, lightkube underneath): a paged list (``limit`` and
``continue`` on the client's connection and credential) and a watch from a ``resourceVersion``
with bookmarks. The connection, the TLS trust and the credential (a kubeconfig, or the Pod's
projected token re-read as it rotates) are ``kube``'s; nothing here reads a kubeconfig.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypedDict

import lightkube
from lightkube.core import resource as lk_resource

import kube
from kube import decoding, resources
from openapi import resources as contract

PATH = f"/apis/{contract.GROUP}/{contract.VERSION}/{contract.MODEL_ARTIFACT.plural}"


class ListPage(TypedDict):
    items: list[dict[str, Any]]
    resourceVersion: str
    continueToken: str


class WatchEvent(TypedDict):
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""
    object: dict[str, Any]


class Gone(Exception):
    """The resource version (or continue token) cannot be served: too old (410), or newer than
    the server's store (504 too large, its store went back); list again."""


class ApiError(Exception):
    """Any other failure talking to the API (message carries no credential)."""


class ArtifactClient(Protocol):
    async def list_page(self, *, limit: int, continue_token: str) -> ListPage: ...

    def watch(self, resource_version: str) -> AsyncIterator[WatchEvent]: ...

    async def aclose(self) -> None: ...


class KubeArtifactClient:
    """``ArtifactClient`` over ``kube.Client``. ``path`` and ``resource`` name what is listed
    and watched (ModelArtifacts in every namespace; tests point it at another kind)."""

    def __init__(
        self,
        client: kube.Client,
        *,
        path: str = PATH,
        resource: type[lk_resource.Resource] = resources.ModelArtifact,
        owns_client: bool = True,
    ) -> None:
        self._client = client
        self._path = path
        self._resource = resource
        self._owns = owns_client

    async def list_page(self, *, limit: int, continue_token: str) -> ListPage:
        params = {"limit": str(limit)}
        if continue_token:
            params["continue"] = continue_token
        try:
            answer = await self._client.request("GET", self._path, params=params,
                                                timeout=kube.LIST_TIMEOUT)
            body = answer.json()
        except (kube.Expired, kube.TooLargeResourceVersion) as exc:
            raise Gone(exc.message) from None
        except kube.KubeError as exc:
            raise ApiError(f"listing {self._path}: {exc}") from None
        except ValueError:
            raise ApiError(f"listing {self._path}: the answer is not JSON") from None
        if not isinstance(body, dict):
            raise ApiError(f"listing {self._path}: the answer is not a list")
        meta = body.get("metadata") or {}
        return ListPage(
            items=[item for item in body.get("items") or [] if isinstance(item, dict)],
            resourceVersion=str(meta.get("resourceVersion") or ""),
            continueToken=str(meta.get("continue") or ""),
        )

    async def watch(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        stream = self._client.watch(
            self._resource, namespace=lightkube.ALL_NS, resource_version=resource_version,
            bookmarks=True,
        )  # fmt: skip
        try:
            async for kind, obj in stream:
                yield WatchEvent(type=kind, object=decoding.plain(obj))
        except (kube.Expired, kube.TooLargeResourceVersion) as exc:
            raise Gone(exc.message) from None
        except kube.KubeError as exc:
            raise ApiError(f"watching {self._path}: {exc}") from None
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        if self._owns:
            await self._client.aclose()


