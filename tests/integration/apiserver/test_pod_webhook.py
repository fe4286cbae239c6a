"""The Pod webhooks through the real server (standalone, hypercorn over TLS on loopback), called
as kube-apiserver calls them: an AdmissionReview POSTed without credentials. The artifact's
status is the worker's write, the node store's the node plugin's, both through the API; what
the webhooks answer comes from the server's own informers."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonpatch
import pytest

from devkit.harness import apiserver as support
from openapi import install, keys, placement, volume

NS = "team"
DIGEST = "sha256:" + "5e" * 32
COLD = "sha256:" + "c0" * 32
GROUP = "/apis/worker.gpustack.ai/v1"
WHEN = "2026-01-01T00:00:00Z"


def _condition(kind: str, status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": kind, "message": "",
            "lastTransitionTime": WHEN}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    with support.running(tmp_path_factory.mktemp("pod-webhook"), extra_args=[
            "--plugin-node", "node-a", "--node", "node-a", "--node", "node-b",
            "--controllers=external"]) as running:
        for node in ("node-a", "node-b"):
            running.wait_for(f"{GROUP}/nodemodelstores/{node}")
        with running.client() as admin:
            for name in ("qwen", "unresolved"):
                created = admin.post(f"{GROUP}/namespaces/{NS}/modelartifacts", json={
                    "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact",
                    "metadata": {"name": name},
                    "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B"}}}})
                assert created.status_code == 201, created.text
        with running.client(token=running.worker_token) as worker:
            written = worker.patch(
                f"{GROUP}/namespaces/{NS}/modelartifacts/qwen/status",
                headers={"content-type": "application/merge-patch+json"},
                json={"status": {"resolved": {"manifestDigest": DIGEST},
                                 "conditions": [_condition("Resolved")]}})
            assert written.status_code == 200, written.text
        tokens = support.read_tokens(running.data_dir / "tokens.csv")
        with running.client(token=tokens[support.PLUGIN_USER]) as plugin:
            written = plugin.patch(
                f"{GROUP}/nodemodelstores/node-a/status",
                headers={"content-type": "application/merge-patch+json"},
                json={"status": {"models": [{"digest": DIGEST, "state": "Ready",
                                             "referenced": True}],
                                 "conditions": [_condition("Ready")]}})
            assert written.status_code == 200, written.text
        yield running


def _anonymous(server: support.RunningServer) -> httpx.Client:
    """As kube-apiserver calls a webhook: TLS trusting the server's CA, no credentials."""
    return httpx.Client(base_url=server.url, verify=support.ssl_context(server.ca_file),
                        timeout=30.0)


def _pod(attributes: dict[str, str], annotations: dict[str, str] | None = None
         ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": [
                {"name": "model", "csi": {"driver": volume.DRIVER, "readOnly": True,
                                          "volumeAttributes": attributes}}]}}


def _review(pod: dict[str, Any], uid: str = "0c5e9a1e-1111-4111-8111-000000000001"
            ) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": NS, "operation": "CREATE", "object": pod,
        "userInfo": {"username": "alice"}, "dryRun": False}}


def _ask(server: support.RunningServer, path: str, pod: dict[str, Any]
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the response, the Pod with its patch applied)."""
    with _anonymous(server) as http:
        answered = http.post(path, json=_review(pod))
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response: dict[str, Any] = body["response"]
    if "patch" not in response:
        return response, pod
    assert response["patchType"] == "JSONPatch"
    patched: dict[str, Any] = jsonpatch.apply_patch(
        pod, json.loads(base64.b64decode(response["patch"])))
    return response, patched


def _until_patched(server: support.RunningServer, path: str, pod: dict[str, Any]
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The server's informers see the writes above a moment after them."""
    deadline = time.monotonic() + 30
    while True:
        response, patched = _ask(server, path, pod)
        if "patch" in response or time.monotonic() > deadline:
            return response, patched
        time.sleep(0.05)


def test_fill_then_prefer_as_kube_apiserver_chains_them(server: support.RunningServer) -> None:
    pod = _pod({"artifact": "qwen"})
    response, filled = _until_patched(server, install.FILL_WEBHOOK_PATH, pod)
    assert response["allowed"] is True, response
    attributes = filled["spec"]["volumes"][0]["csi"]["volumeAttributes"]
    with server.client() as admin:
        uid = admin.get(f"{GROUP}/namespaces/{NS}/modelartifacts/qwen").json()["metadata"]["uid"]
    assert attributes == {"artifact": "qwen", "artifactUID": uid, "manifestDigest": DIGEST}
    # prefer sees the filled Pod (kube-apiserver applies the first patch before the second)
    response, placed = _until_patched(server, install.PREFER_WEBHOOK_PATH, filled)
    assert response["allowed"] is True
    # node-b holds nothing; node-a holds it Ready, its store Ready, the plugin runs there
    assert placed["spec"]["affinity"]["nodeAffinity"][placement.PREFERRED] == [
        placement.preferred_term(["node-a"])]


def test_a_missing_or_unresolved_artifact_is_admitted_unchanged_with_a_warning(
        server: support.RunningServer) -> None:
    _until_patched(server, install.FILL_WEBHOOK_PATH, _pod({"artifact": "qwen"}))
    for name, says in (("absent", "no ModelArtifact 'absent' in namespace 'team'"),
                       ("unresolved", "it is not resolved yet")):
        response, _ = _ask(server, install.FILL_WEBHOOK_PATH, _pod({"artifact": name}))
        assert response["allowed"] is True and "patch" not in response
        assert says in response["warnings"][0], response


def test_the_opt_in_refuses_while_no_node_is_warm(server: support.RunningServer) -> None:
    required = {keys.REQUIRE_WARM_NODE: keys.REQUIRE_WARM_NODE_ON}
    cold = _pod({"artifact": "qwen", "artifactUID": "u", "manifestDigest": COLD}, required)
    response, _ = _ask(server, install.PREFER_WEBHOOK_PATH, cold)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert f"no node holds {COLD} Ready now" in response["status"]["message"]
    warm = _pod({"artifact": "qwen", "artifactUID": "u", "manifestDigest": DIGEST}, required)
    response, placed = _until_patched(server, install.PREFER_WEBHOOK_PATH, warm)
    terms = placed["spec"]["affinity"]["nodeAffinity"][placement.REQUIRED]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [placement.expression(["node-a"])]}]


@pytest.mark.parametrize("path", install.WEBHOOK_PATHS)
def test_bad_reviews_get_a_status_never_a_500(server: support.RunningServer, path: str) -> None:
    with _anonymous(server) as http:
        for body, headers, code, says in (
                (b"{not json", {"content-type": "application/json"}, 400, ""),
                (b"[]", {"content-type": "application/json"}, 400, "JSON object"),
                (json.dumps({"apiVersion": "admission.k8s.io/v1beta1",
                             "kind": "AdmissionReview"}).encode(),
                 {"content-type": "application/json"}, 400, "apiVersion"),
                (json.dumps({**_review(_pod({})), "request": {"uid": "x", "kind": "Pod"}}
                            ).encode(), {"content-type": "application/json"}, 400,
                 "request.kind"),
                (b"x" * (4 * 1024 * 1024), {"content-type": "application/json"}, 413, ""),
                (b"<xml/>", {"content-type": "application/xml"}, 415, "")):
            answered = http.post(path, content=body, headers=headers)
            assert answered.status_code == code, (code, answered.text[:300])
            status = answered.json()
            assert status["kind"] == "Status" and status["code"] == code
            assert says in status["message"]
        assert http.get(path).status_code == 405
    assert "Traceback" not in server.log()
