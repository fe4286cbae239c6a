"""ModelStore and ModelStoreBinding through the real kubectl and over HTTP against the standalone
server: CRUD, watch, table columns, `kubectl explain`, the binding's frozen fields refused with a
Status naming field and rule, and no tenant role reaching either kind."""

from __future__ import annotations

import json
import pathlib

import yaml

from devkit.harness import apiserver as support
from tests.support import kubectl

GROUP = "/apis/worker.gpustack.ai/v1"
NS = "team-a"
POLICY = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice-editor, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole,
          name: model-manager-tenant-editor}}
subjects:
  - {{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}
"""
STORE = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelStore",
         "metadata": {"name": "large-disk"},
         "spec": {"nodeSelector": {"pool": "large"}, "watermarks": {"highPercent": 90},
                  "download": {"bytesPerSecond": 0}}}
BINDING = {"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelStoreBinding",
           "metadata": {"name": "grant", "namespace": NS},
           "spec": {"storeRefs": [{"name": "large-disk"}], "quota": {"bytes": 2 << 30}}}


def test_stores_and_bindings(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "api"
    data.mkdir()
    (data / "policy.yaml").write_text(POLICY)
    with support.running(data, extra_args=["--controllers=none"]) as server:
        ctl = kubectl.Kubectl(server.kubeconfig, tmp_path / "cache")
        assert "created" in ctl.run("apply", "-f", "-", stdin=yaml.safe_dump(STORE)).stdout
        assert "created" in ctl.run("apply", "-f", "-", stdin=yaml.safe_dump(BINDING)).stdout

        table = ctl.run("get", "ms").stdout.splitlines()
        assert table[0].split() == ["NAME", "SELECTOR", "NODES", "SELECTOROVERLAP"]
        assert table[1].split()[:2] == ["large-disk", "pool=large"]
        table = ctl.run("get", "msb", "-n", NS).stdout.splitlines()
        assert table[0].split() == ["NAME", "STORES", "QUOTA", "USED", "PINNED", "OVERQUOTA"]
        assert table[1].split()[:4] == ["grant", "large-disk", "2.0GiB", "false"]  # Used: blank
        explained = ctl.run("explain", "modelstores.spec.download").stdout
        assert "bytesPerSecond" in explained and "unlimited on this pool" in explained
        explained = ctl.run("explain", "modelstorebindings.spec").stdout
        assert "storeRefs" in explained and "allowPinned" in explained

        # what the store leaves out stays out (it keeps the cluster setting)
        stored = json.loads(ctl.run("get", "ms", "large-disk", "-o", "json").stdout)
        assert stored["spec"]["watermarks"] == {"highPercent": 90}
        assert stored["spec"]["download"] == {"bytesPerSecond": 0}

        # the grant is frozen: kubectl sees a Status naming field and rule
        shrunk = {**BINDING, "spec": {**BINDING["spec"], "quota": {"bytes": 1 << 30}}}
        refused = ctl.fails("apply", "-f", "-", stdin=yaml.safe_dump(shrunk))
        assert "spec.quota.bytes" in refused and "the budget can only grow" in refused
        with server.client() as admin:
            moved = admin.patch(f"{GROUP}/namespaces/{NS}/modelstorebindings/grant",
                                headers={"Content-Type": "application/merge-patch+json"},
                                json={"spec": {"storeRefs": [{"name": "other"}]}})
            assert moved.status_code == 422, moved.text
            (cause,) = moved.json()["details"]["causes"]
            assert cause["field"] == "spec.storeRefs"
            assert "storeRefs cannot change" in cause["message"]
            grown = admin.patch(f"{GROUP}/namespaces/{NS}/modelstorebindings/grant",
                                headers={"Content-Type": "application/merge-patch+json"},
                                json={"spec": {"quota": {"bytes": 4 << 30},
                                               "allowPinned": True}})
            assert grown.status_code == 200, grown.text
            off = admin.patch(f"{GROUP}/namespaces/{NS}/modelstorebindings/grant",
                              headers={"Content-Type": "application/merge-patch+json"},
                              json={"spec": {"allowPinned": False}})
            assert off.status_code == 422
            assert off.json()["details"]["causes"][0]["field"] == "spec.allowPinned"

            # a watch sees the store change
            version = admin.get(f"{GROUP}/modelstores").json()["metadata"]["resourceVersion"]
            assert admin.patch(f"{GROUP}/modelstores/large-disk",
                               headers={"Content-Type": "application/merge-patch+json"},
                               json={"spec": {"download": {"concurrency": 2}}}
                               ).status_code == 200
            watched = admin.get(f"{GROUP}/modelstores", params={
                "watch": "true", "resourceVersion": version, "timeoutSeconds": "1"})
            (event,) = [json.loads(line) for line in watched.text.splitlines()]
            assert event["type"] == "MODIFIED"
            assert event["object"]["spec"]["download"] == {"bytesPerSecond": 0, "concurrency": 2}

            # administrators only: the tenant editor reaches neither kind, nor any status
            alice = {"Impersonate-User": "alice"}
            for path in (f"{GROUP}/modelstores", f"{GROUP}/namespaces/{NS}/modelstorebindings"):
                assert admin.get(path, headers=alice).status_code == 403
            assert admin.post(f"{GROUP}/namespaces/{NS}/modelstorebindings", headers=alice,
                              json={**BINDING, "metadata": {"name": "mine", "namespace": NS}}
                              ).status_code == 403
            status = admin.put(f"{GROUP}/modelstores/large-disk/status",
                               json=admin.get(f"{GROUP}/modelstores/large-disk").json())
            assert status.status_code == 403  # the worker's, not even the admin's

            assert admin.delete(f"{GROUP}/namespaces/{NS}/modelstorebindings/grant"
                                ).status_code == 200
            assert admin.delete(f"{GROUP}/modelstores/large-disk").status_code == 200
