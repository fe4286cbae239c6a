"""What the checks share: the clients, the run's namespaces and every object it created."""

from __future__ import annotations

import contextlib
import secrets
import time
from typing import Any

from conformance import api as api_module
from conformance.api import Api
from conformance.kubectl import Kubectl
from conformance.settings import Settings

RUN_LABEL = "conformance.gpustack.ai/run"


class Run:
    """One run of the suite: its id, its namespaces (created when the endpoint serves them) and
    the artifacts it made, so cleanup removes exactly those."""

    def __init__(self, options: Settings) -> None:
        self.options = options
        self.id = secrets.token_hex(3)
        self.admin = Api(options.kubeconfig, options.context, options.timeout)
        self.kubectl = Kubectl(options.kubectl, options.kubeconfig, options.context,
                               options.timeout)  # fmt: skip
        self.namespaces = [f"{options.namespace_prefix}-{self.id}-a",
                           f"{options.namespace_prefix}-{self.id}-b"]  # fmt: skip
        self.created_namespaces: list[str] = []
        self.cluster = self.admin.serves("/api/v1")
        """A real cluster (core API served): namespaces are created and deleted by the run."""
        self._artifacts: list[tuple[str, str]] = []
        self._tenant: Api | None = None
        self.extra_cleanup: list[tuple[str, str]] = []
        """(kind path, description) of other objects to delete at the end (RBAC for a tenant)."""

    @property
    def namespace(self) -> str:
        return self.namespaces[0]

    def ensure_namespaces(self) -> None:
        if not self.cluster or self.created_namespaces:
            return
        for name in self.namespaces:
            body = {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": {RUN_LABEL: self.id}}}  # fmt: skip
            response = self.admin.post("/api/v1/namespaces", body)
            if response.status_code != 201:
                raise RuntimeError(f"cannot create namespace {name}: {response.status_code} "
                                   f"{response.text[:300]}")  # fmt: skip
            self.created_namespaces.append(name)

    def artifact_body(
        self, name: str, namespace: str | None = None, **spec: Any
    ) -> dict[str, Any]:
        source = spec.pop("source", {"huggingFace": {"repository": f"conformance/{self.id}"}})
        return {
            "apiVersion": f"{api_module.GROUP}/{api_module.VERSION}",
            "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": namespace or self.namespace,
                         "labels": {RUN_LABEL: self.id}},
            "spec": {"source": source, **spec},
        }  # fmt: skip

    def create_artifact(
        self, name: str, namespace: str | None = None, **spec: Any
    ) -> dict[str, Any]:
        self.ensure_namespaces()
        namespace = namespace or self.namespace
        body = self.artifact_body(name, namespace, **spec)
        response = self.admin.post(api_module.artifacts(namespace), body)
        if response.status_code != 201:
            raise AssertionError(f"create {namespace}/{name}: {response.status_code} "
                                 f"{response.text[:500]}")  # fmt: skip
        self.track(namespace, name)
        created: dict[str, Any] = response.json()
        return created

    def created(self, namespace: str, name: str) -> bool:
        """Whether this run created that artifact (and has not cleaned it up yet)."""
        return (namespace, name) in self._artifacts

    def track(self, namespace: str, name: str) -> None:
        if (namespace, name) not in self._artifacts:
            self._artifacts.append((namespace, name))

    def tenant(self) -> Api | None:
        if self.options.tenant_kubeconfig is None:
            return None
        if self._tenant is None:
            self._tenant = Api(self.options.tenant_kubeconfig, None, self.options.timeout)
        return self._tenant

    def searched(self) -> list[str]:
        """The namespaces the run may have created artifacts in."""
        tenant = self.options.tenant_namespace
        return [*self.namespaces, *([tenant] if tenant and tenant not in self.namespaces else [])]

    def leftovers(self) -> list[str]:
        """Artifacts carrying this run's label that still exist, in the run's namespaces."""
        found = []
        for namespace in self.searched():
            response = self.admin.get(api_module.artifacts(namespace),
                                      params={"labelSelector": f"{RUN_LABEL}={self.id}"})
            if response.status_code == 200:
                found += [f"{namespace}/{item['metadata']['name']}"
                          for item in response.json()["items"]]  # fmt: skip
        return found

    def cleanup(self) -> list[str]:
        """Delete everything this run created; returns what could not be removed."""
        for namespace, name in self._artifacts:
            self.admin.delete(api_module.artifacts(namespace, name))
        for namespace in self.searched():
            self.admin.request("DELETE", api_module.artifacts(namespace),
                               params={"labelSelector": f"{RUN_LABEL}={self.id}"})  # fmt: skip
        for path, _ in self.extra_cleanup:
            self.admin.delete(path)
        deadline = time.monotonic() + self.options.timeout
        remaining = self.leftovers()
        while remaining and time.monotonic() < deadline:
            time.sleep(0.2)
            remaining = self.leftovers()
        for name in self.created_namespaces:
            response = self.admin.delete(f"/api/v1/namespaces/{name}")
            if response.status_code not in (200, 202, 404):
                remaining.append(f"namespace {name}")
        self._artifacts.clear()
        self.extra_cleanup.clear()
        return remaining

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.cleanup()
        self.admin.close()
        if self._tenant is not None:
            self._tenant.close()
        self.kubectl.close()
