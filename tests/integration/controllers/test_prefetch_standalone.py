"""ModelPrefetch against the standalone server with embedded controllers and the fixture hub: served
with CRUD, table columns and explain; a claim artifact, a missing binding, a pin without
allowPinned and a projection past the budget refused at admission naming why; a tenant bound to
the editor role in its namespace prefetches there and nowhere else, through its binding; the pin
reaches the target node's NodeModelStore, the node's report becomes the prefetch's counts (no
node named), and deleting the prefetch withdraws the pin."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devkit import fixturehub
from devkit.harness import apiserver as support
from tests.support import kubectl, pools

REPO = "org/prefetch-model"
OTHER_REPO = "org/other-model"
NAMESPACE = "team-a"
GROUP = "/apis/worker.gpustack.ai/v1"
NS = f"{GROUP}/namespaces/{NAMESPACE}"
PLUGIN = "system:serviceaccount:gpustack-system:model-manager-node"
POLICY = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice-editor, namespace: {NAMESPACE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole,
          name: model-manager-tenant-editor}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}
"""


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, {"config.json": b"{}\n", "model.safetensors": 4096})
        running.add_repo(OTHER_REPO, {"config.json": b"{}\n", "weights.bin": 1024})
        yield running


def _wait(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def _artifact(name: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"source": source}}


def _prefetch(name: str, artifact: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelPrefetch",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"artifactRef": {"name": artifact}, **spec}}


def _resolved(client: httpx.Client, name: str) -> dict[str, Any] | None:
    found = client.get(f"{NS}/modelartifacts/{name}").json()
    conditions = (found.get("status") or {}).get("conditions") or []
    done = any(c["type"] == "Resolved" and c["status"] == "True" for c in conditions)
    return found if done else None


def _pinned(client: httpx.Client, node: str) -> list[str]:
    spec = client.get(f"{GROUP}/nodemodelstores/{node}").json().get("spec") or {}
    return list(spec.get("pinned") or [])


def test_prefetch_admission_status_and_pins(hub: fixturehub.Hub, tmp_path: pathlib.Path) -> None:
    data = tmp_path / "api"
    data.mkdir()
    (data / "policy.yaml").write_text(POLICY)
    with support.running(data, extra_args=[
        "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
        "--node", "node-1=https://127.0.0.1:9", "--node", "node-2=https://127.0.0.1:9",
    ]) as server:
        try:
            _scenario(server, tmp_path)
        except BaseException:
            print("--- server log\n" + server.log()[-12000:])
            raise


def _scenario(server: support.RunningServer, base: pathlib.Path) -> None:
    server.wait_for(f"{GROUP}/nodemodelstores/node-1")
    server.wait_for(f"{GROUP}/nodemodelstores/node-2")
    plugin_token = support.read_tokens(server.data_dir / "tokens.csv")[PLUGIN]
    with server.client() as admin, server.client(token=plugin_token) as plugin:
        assert admin.post(f"{NS}/modelartifacts", json=_artifact(
            "qwen", {"huggingFace": {"repository": REPO}})).status_code == 201
        assert admin.post(f"{NS}/modelartifacts", json=_artifact(
            "on-claim", {"persistentVolumeClaim": {"claimName": "models"}})).status_code == 201
        artifact = _wait("resolved", lambda: _resolved(admin, "qwen"))
        digest = artifact["status"]["resolved"]["manifestDigest"]
        size = artifact["status"]["resolved"]["sizeBytes"]
        _wait("claim resolved", lambda: _resolved(admin, "on-claim"))
        # the administrator's grant: every node in one store, a budget of two copies
        pools.setup(admin, NAMESPACE, ["node-1", "node-2"], quota=2 * size,
                    allow_pinned=False)
        node_1 = {"nodeSelector": {"matchLabels": {"kubernetes.io/hostname": "node-1"}}}

        # admission: a claim artifact cannot be prefetched, and says why
        refused = admin.post(f"{NS}/modelprefetches", json=_prefetch(
            "bad", "on-claim", bindingRef={"name": "grant"}, placement=node_1))
        assert refused.status_code == 422, refused.text
        (cause,) = refused.json()["details"]["causes"]
        assert cause["field"] == "spec.artifactRef.name"
        assert "persistentVolumeClaim source" in cause["message"]
        unbound = admin.post(f"{NS}/modelprefetches", json=_prefetch("bad", "qwen"))
        assert unbound.status_code == 422
        assert unbound.json()["details"]["causes"][0]["field"] == "spec.bindingRef"
        # pinning needs allowPinned
        pinned = admin.post(f"{NS}/modelprefetches", json=_prefetch(
            "bad", "qwen", bindingRef={"name": "grant"}, retention={"pinned": True}))
        assert pinned.status_code == 422
        (cause,) = pinned.json()["details"]["causes"]
        assert cause["field"] == "spec.retention.pinned" and "allowPinned" in cause["message"]
        # the administrator turns pinning on (the grant only grows)
        assert admin.patch(f"{NS}/modelstorebindings/grant",
                           headers={"Content-Type": "application/merge-patch+json"},
                           json={"spec": {"allowPinned": True}}).status_code == 200

        # a tenant with the editor role prefetches in its namespace only
        alice = {"Impersonate-User": "alice"}
        created = admin.post(f"{NS}/modelprefetches", headers=alice, json=_prefetch(
            "warm", "qwen", bindingRef={"name": "grant"}, placement=node_1,
            retention={"pinned": True}))
        assert created.status_code == 201, created.text
        # the same digest on both nodes: two copies, exactly the budget
        wide = admin.post(f"{NS}/modelprefetches", headers=alice, json=_prefetch(
            "wide", "qwen", bindingRef={"name": "grant"}))
        assert wide.status_code == 201, wide.text
        # another digest on top is past it: refused, naming the figures
        assert admin.post(f"{NS}/modelartifacts", json=_artifact("other", {
            "huggingFace": {"repository": OTHER_REPO}})).status_code == 201
        _wait("other resolved", lambda: _resolved(admin, "other"))
        over = admin.post(f"{NS}/modelprefetches", headers=alice, json=_prefetch(
            "over", "other", bindingRef={"name": "grant"}, placement=node_1))
        assert over.status_code == 422, over.text
        (cause,) = over.json()["details"]["causes"]
        assert cause["field"] == "spec.bindingRef"
        assert f"past its budget of {2 * size} bytes" in cause["message"]
        assert admin.delete(f"{NS}/modelprefetches/wide").status_code == 200
        elsewhere = admin.post(f"{GROUP}/namespaces/team-b/modelprefetches", headers=alice,
                               json={**_prefetch("warm", "qwen", bindingRef={"name": "grant"}),
                                     "metadata": {"name": "warm", "namespace": "team-b"}})
        assert elsewhere.status_code == 403
        status_write = admin.put(f"{NS}/modelprefetches/warm/status", headers=alice,
                                 json=created.json())
        assert status_write.status_code == 403

        # the pin reaches node-1 only, and the status says Pending until the node reports
        _wait("pinned", lambda: _pinned(admin, "node-1") == [digest])
        assert _pinned(admin, "node-2") == []

        def status() -> dict[str, Any]:
            found: dict[str, Any] = admin.get(f"{NS}/modelprefetches/warm").json()
            return dict(found.get("status") or {})

        first = _wait("status", lambda: status().get("desiredNodes") and status())
        assert "nodes" not in first  # counts only: the tenant's status names no node
        assert first["manifestDigest"] == digest and first["desiredNodes"] == 1
        assert first["readyNodes"] == 0

        # node-1's plugin reports the digest Ready: the prefetch becomes Available
        reported = plugin.patch(
            f"{GROUP}/nodemodelstores/node-1/status",
            headers={"Content-Type": "application/merge-patch+json"},
            json={"status": {"models": [{"digest": digest, "state": "Ready",
                                         "sizeBytes": 4099}]}})
        assert reported.status_code == 200, reported.text

        def available() -> bool:
            conditions = status().get("conditions") or []
            return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

        _wait("available", available)
        assert status()["readyNodes"] == 1

        ctl = kubectl.Kubectl(server.kubeconfig, base / "kubectl-cache")
        table = ctl.run("get", "mpf", "-n", NAMESPACE).stdout.splitlines()
        assert table[0].split() == ["NAME", "ARTIFACT", "READY", "DOWNLOADING", "PINNED",
                                    "AVAILABLE"]
        assert table[1].split() == ["warm", "qwen", "1/1", "0", "true", "True"]
        explained = ctl.run("explain", "modelprefetches.spec.placement").stdout
        assert "nodeSelector" in explained and "instanceTypes" in explained

        # deleting the prefetch withdraws the pin on the next pass
        assert admin.delete(f"{NS}/modelprefetches/warm").status_code == 200
        _wait("unpinned", lambda: _pinned(admin, "node-1") == [])

        # without cleanupOnDelete nothing was asked of the node: collection decides
        assert "evict" not in admin.get(f"{GROUP}/nodemodelstores/node-1").json()["spec"]

        # with cleanupOnDelete: deleting it asks node-1 to remove the digest now (spec.evict),
        # in the same write that withdraws the pin, until the node no longer lists it
        cleaned = admin.post(f"{NS}/modelprefetches", json=_prefetch(
            "clean", "qwen", bindingRef={"name": "grant"}, placement=node_1,
            retention={"pinned": True, "cleanupOnDelete": True}))
        assert cleaned.status_code == 201, cleaned.text
        _wait("pinned again", lambda: _pinned(admin, "node-1") == [digest])
        assert admin.delete(f"{NS}/modelprefetches/clean").status_code == 200

        def spec() -> dict[str, Any]:
            return dict(admin.get(f"{GROUP}/nodemodelstores/node-1").json().get("spec") or {})

        asked = _wait("evict", lambda: spec().get("evict") and spec())
        assert asked["evict"] == [digest] and "pinned" not in asked
        assert "evict" not in (admin.get(f"{GROUP}/nodemodelstores/node-2").json()["spec"])
        # the node removed it (its plugin stops listing it): the request leaves the spec
        gone = plugin.patch(f"{GROUP}/nodemodelstores/node-1/status",
                            headers={"Content-Type": "application/merge-patch+json"},
                            json={"status": {"models": []}})
        assert gone.status_code == 200, gone.text
        _wait("evict cleared", lambda: "evict" not in spec())
