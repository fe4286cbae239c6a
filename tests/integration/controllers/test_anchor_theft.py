"""Issue 35's first probe, as a tenant would run it against the standalone server with embedded
controllers, the fixture hub and the node plugin process (real bind mounts, root).

bob (editor in team-b) resolves his private repository from the hub and a team-b Pod has it
published on node-1. alice (editor in team-a only) creates an artifact of a repository of her own
with ``expectedDigest`` set to bob's digest while the hub does not answer it: once the hub has
stayed unreachable for two passes a minute apart, that anchor must not become team-a's
resolution, since team-a never proved it may read that content (``AnchorNotGranted``), and a
team-a Pod naming it is refused at the mount. alice cannot give herself the grant (403 naming
the rule). An administrator's legacy import keeps working through the grant: an artifact the
admin annotates anchors to the same digest and its Pod mounts the published tree.

The minute between the two passes is compressed: after the first outage the test, as the
worker, moves the ``Degraded`` condition's ``lastTransitionTime`` two minutes back (what a pass
a minute later reads from the status, as after a restart) and rotates the artifact's Secret,
which makes the resolver pass again at once.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from devkit import fixturehub
from devkit.harness import apiserver as support
from tests.integration.nodeplugin import csi_harness
from tests.support import kubectl, waiting

if os.geteuid() != 0:  # bind mounts need root; CI runs these as root
    pytest.skip("the anchor theft test needs root (bind mounts)", allow_module_level=True)

GROUP = "/apis/worker.gpustack.ai/v1"
BOB_REPO = "bob/private"
BOB_TOKEN = "hf_bob_secret_token_1"
ALICE_REPO = "alice/anything"
LEGACY_REPO = "legacy/cache"
GRANT = "worker.gpustack.ai/anchor-grant"
FILES: dict[str, bytes | int | fixturehub.FileSpec] = {
    "config.json": b'{"architectures": ["BobsModel"]}\n',
    "model.safetensors": 300_000,
}
POLICY = "".join(f"""---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {user}-editor, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole,
          name: model-manager-tenant-editor}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}
""" for user, namespace in (("alice", "team-a"), ("bob", "team-b")))
ALICE = {"Impersonate-User": "alice"}
BOB = {"Impersonate-User": "bob"}


@pytest.fixture
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(BOB_REPO, FILES, private_token=BOB_TOKEN)
        for unreachable in (ALICE_REPO, LEGACY_REPO):
            running.add_repo(unreachable, {"config.json": b"{}\n"})
            running.faults(unreachable).fail_times = 1_000_000  # 503 to every request
        yield running


def _artifact(namespace: str, name: str, repository: str, secret: str,
              **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if "annotations" in extra:
        metadata["annotations"] = extra.pop("annotations")
    return {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
            "metadata": metadata,
            "spec": {"source": {"huggingFace": {"repository": repository,
                                                "secretRef": {"name": secret}}}, **extra}}


def _condition(obj: dict[str, Any], kind: str = "Resolved") -> dict[str, Any]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition["type"] == kind:
            return dict(condition)
    return {}


class World:
    def __init__(self, server: support.RunningServer, secrets: pathlib.Path,
                 admin: httpx.Client, worker: httpx.Client) -> None:
        self.server, self.secrets, self.admin, self.worker = server, secrets, admin, worker

    def secret(self, namespace: str, name: str, token: str) -> None:
        directory = self.secrets / namespace / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(token + "\n")

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.admin.get(f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}")
        assert found.status_code == 200, found.text
        body: dict[str, Any] = found.json()
        return body

    def once(self, namespace: str, name: str, check: Any) -> dict[str, Any]:
        def seen() -> dict[str, Any] | None:
            obj = self.get(namespace, name)
            return obj if check(obj) else None

        found: dict[str, Any] = waiting.polled(f"{namespace}/{name}", seen)
        return found

    def a_minute_later(self, namespace: str, name: str, secret: str) -> dict[str, Any]:
        """After the first SourceUnavailable pass: as the worker, date that outage two minutes
        back, then rotate the Secret so the resolver passes again now; the artifact once that
        second pass has written."""
        first = self.once(namespace, name, lambda o: _condition(o, "Degraded").get("reason")
                          == "SourceUnavailable")
        earlier = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=2))
        for condition in first["status"]["conditions"]:
            if condition["type"] == "Degraded":
                condition["lastTransitionTime"] = earlier.strftime("%Y-%m-%dT%H:%M:%SZ")
        path = f"{GROUP}/namespaces/{namespace}/modelartifacts/{name}/status"
        moved = self.worker.put(path, json=first)
        assert moved.status_code == 200, moved.text
        version = moved.json()["metadata"]["resourceVersion"]
        self.secret(namespace, secret, f"rotated-{time.monotonic_ns()}")
        return self.once(namespace, name,
                         lambda o: o["metadata"]["resourceVersion"] != version)


def test_a_tenant_cannot_anchor_to_another_tenants_content(
        hub: fixturehub.Hub, mount_guard: pathlib.Path) -> None:
    data = mount_guard / "api"
    data.mkdir()
    (data / "policy.yaml").write_text(POLICY)
    secrets = mount_guard / "secrets"
    secrets.mkdir()
    with support.running(data, extra_args=[
        "--controllers=embedded", "--huggingface-endpoint", hub.endpoint,
        "--secrets-dir", str(secrets), "--node", "node-1",
    ]) as server:
        server.wait_for(f"{GROUP}/nodemodelstores/node-1")
        plugin = csi_harness.PluginProcess(
            mount_guard / "plugin", server.plugin_kubeconfig, import_dir=None,
            extra_args=["--huggingface-endpoint", hub.endpoint])
        try:
            plugin.start()
            with server.client() as admin, server.client(token=server.worker_token) as worker:
                _scenario(World(server, secrets, admin, worker), hub, plugin)
        except BaseException:
            print("--- server log\n" + server.log()[-15000:])
            print("--- plugin log\n" + plugin.log())
            raise
        finally:
            plugin.close()


def _scenario(world: World, hub: fixturehub.Hub, plugin: csi_harness.PluginProcess) -> None:
    admin = world.admin
    kubelet = plugin.kubelet()

    # bob resolves his private repository; a team-b Pod has it published on node-1
    world.secret("team-b", "bob-token", BOB_TOKEN)
    created = admin.post(f"{GROUP}/namespaces/team-b/modelartifacts", headers=BOB,
                         json=_artifact("team-b", "weights", BOB_REPO, "bob-token"))
    assert created.status_code == 201, created.text
    bobs = world.once("team-b", "weights",
                      lambda o: _condition(o).get("status") == "True")
    digest = bobs["status"]["resolved"]["manifestDigest"]
    bob_pod = kubelet.publish_request(
        namespace="team-b", pod_uid="bob-pod", secrets={"token": BOB_TOKEN},
        attributes={"artifact": "weights", "artifactUID": bobs["metadata"]["uid"],
                    "manifestDigest": digest})
    outcomes = kubelet.publish_until_ok(bob_pod, timeout=60)
    assert outcomes[-1][0] == grpc.StatusCode.OK, outcomes[-3:]

    # alice anchors to bob's digest while the hub does not answer her repository
    world.secret("team-a", "alice-token", "hf_alice_token")
    created = admin.post(f"{GROUP}/namespaces/team-a/modelartifacts", headers=ALICE,
                         json=_artifact("team-a", "steal", ALICE_REPO, "alice-token",
                                        expectedDigest=digest))
    assert created.status_code == 201, created.text
    steal = world.a_minute_later("team-a", "steal", "alice-token")

    # a team-a Pod naming bob's digest is refused by node-1, though the tree is there
    alice_pod = kubelet.publish_request(
        namespace="team-a", pod_uid="alice-pod",
        attributes={"artifact": "steal", "artifactUID": steal["metadata"]["uid"],
                    "manifestDigest": digest})
    code, message = kubelet.publish_once_seen(alice_pod)
    stolen = kubelet.target("alice-pod") / "config.json"
    leaked = stolen.read_bytes() if stolen.exists() else None
    assert code == grpc.StatusCode.PERMISSION_DENIED and leaked is None, (
        code, message, leaked, steal["status"])
    assert "AnchorNotGranted" in message

    # because the anchor did not become team-a's resolution, and the status says why
    resolved = _condition(steal)
    assert (resolved.get("status"), resolved.get("reason")) == ("False", "AnchorNotGranted"), \
        steal["status"]
    assert "team-a" in resolved["message"] and digest in resolved["message"]
    assert (steal["status"].get("resolved") or {}).get("digestSource") != "Expected"

    # alice cannot grant herself an anchor: not by an update, not at creation (403, the rule)
    annotate = admin.patch(
        f"{GROUP}/namespaces/team-a/modelartifacts/steal", headers={
            **ALICE, "Content-Type": "application/merge-patch+json"},
        json={"metadata": {"annotations": {GRANT: "mine"}}})
    assert annotate.status_code == 403, annotate.text
    assert "AnchorGrant" in annotate.json()["message"]
    assert 'cannot anchor resource "modelartifacts"' in annotate.json()["message"]
    refused = admin.post(f"{GROUP}/namespaces/team-a/modelartifacts", headers=ALICE,
                         json=_artifact("team-a", "steal-2", ALICE_REPO, "alice-token",
                                        expectedDigest=digest, annotations={GRANT: "mine"}))
    assert refused.status_code == 403, refused.text
    assert "AnchorGrant" in refused.json()["message"]
    ctl = kubectl.Kubectl(world.server.kubeconfig, world.secrets.parent / "kubectl-cache")
    said = ctl.fails("annotate", "modelartifact", "steal", "-n", "team-a", "--as", "alice",
                     f"{GRANT}=mine")
    assert 'User "alice" cannot anchor resource "modelartifacts"' in said, said
    assert "rule AnchorGrant" in said

    # the administrator's legacy import: the grant makes the anchor the resolution
    world.secret("team-c", "legacy-token", "hf_legacy_token")
    imported = admin.post(f"{GROUP}/namespaces/team-c/modelartifacts", json=_artifact(
        "team-c", "imported", LEGACY_REPO, "legacy-token", expectedDigest=digest,
        annotations={GRANT: "legacy import of node-1's cache"}))
    assert imported.status_code == 201, imported.text
    legacy = world.a_minute_later("team-c", "imported", "legacy-token")
    assert _condition(legacy).get("status") == "True", legacy["status"]
    assert legacy["status"]["resolved"]["digestSource"] == "Expected"
    assert legacy["status"]["resolved"]["anchorProof"] == "Grant"
    legacy_pod = kubelet.publish_request(
        namespace="team-c", pod_uid="legacy-pod",
        attributes={"artifact": "imported", "artifactUID": legacy["metadata"]["uid"],
                    "manifestDigest": digest})
    code, message = kubelet.publish_once_seen(legacy_pod)
    assert code == grpc.StatusCode.OK, (code, message)
    assert (kubelet.target("legacy-pod") / "config.json").read_bytes() == \
        hub.content(BOB_REPO, "config.json").read()
