"""HTTP to the API the kubeconfig names, with the kubeconfig's credentials (through lightkube)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx2 as httpx
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

GROUP = "worker.gpustack.ai"
VERSION = "v1"
GV = f"/apis/{GROUP}/{VERSION}"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
CONFLICT_ATTEMPTS = 5
"""Read-modify-write attempts before a Conflict is the answer (client-go's DefaultRetry: 5)."""


def artifacts(namespace: str, name: str = "") -> str:
    path = f"{GV}/namespaces/{namespace}/modelartifacts"
    return f"{path}/{name}" if name else path


def prefetches(namespace: str, name: str = "") -> str:
    path = f"{GV}/namespaces/{namespace}/modelprefetches"
    return f"{path}/{name}" if name else path


def stores(name: str = "") -> str:
    return f"{GV}/nodemodelstores/{name}" if name else f"{GV}/nodemodelstores"


class Api:
    """A synchronous client for one kubeconfig (its current context unless one is named)."""

    def __init__(
        self, kubeconfig: pathlib.Path, context: str | None = None, timeout: float = 30.0
    ) -> None:
        config = KubeConfig.from_file(str(kubeconfig)).get(context)
        if config is None:
            raise ValueError(f"{kubeconfig}: no context {context or '(current)'}")
        params = client_adapter.ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=False)
        self.client = client_adapter.Client(config, params)
        self.server = str(config.cluster.server)
        self.timeout = timeout

    def close(self) -> None:
        self.client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        sent = {"Accept": accept, **(headers or {})}
        content: bytes | None = None
        if body is not None:
            content = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = content_type
        return self.client.request(method, path, content=content, headers=sent,
                                   params=dict(params or {}))  # fmt: skip

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, body=body, **kwargs)

    def put(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", path, body=body, **kwargs)

    def patch(self, path: str, body: Any, content_type: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, body=body, content_type=content_type, **kwargs)

    def update(self, path: str, change: Callable[[dict[str, Any]], dict[str, Any]],
               attempts: int = CONFLICT_ATTEMPTS) -> httpx.Response:
        """Read ``path``, PUT ``change(current)``; on a 409 Conflict (a controller wrote the
        object between the read and the write) read again and retry, ``attempts`` times at most,
        as client-go's ``RetryOnConflict`` does. Any other answer is returned as it is."""
        response: httpx.Response | None = None
        for _ in range(attempts):
            current = self.get(path)
            if current.status_code != 200:
                return current
            response = self.put(path, change(current.json()))
            if response.status_code != 409 or response.json().get("reason") != "Conflict":
                return response
        assert response is not None
        return response

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)

    def watch(self, path: str, params: Mapping[str, str], seconds: int) -> Iterator[dict[str, Any]]:
        """Watch events (decoded) until the server ends the watch after ``seconds``."""
        query = {**params, "watch": "true", "timeoutSeconds": str(seconds)}
        timeout = httpx.Timeout(self.timeout, read=seconds + self.timeout)
        with self.client.stream("GET", path, params=query, timeout=timeout,
                                headers={"Accept": "application/json"}) as response:  # fmt: skip
            if response.status_code != 200:
                response.read()
                raise AssertionError(f"watch {path}: {response.status_code} {response.text[:300]}")
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def serves(self, path: str) -> bool:
        """Whether the endpoint serves ``path`` (a cluster serves /api/v1; standalone does not)."""
        return self.get(path).status_code == 200
