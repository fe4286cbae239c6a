"""The real kubectl against the standalone server, through the generated kubeconfig."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest
import yaml

from devkit.harness import apiserver as support
from tests.support import kubectl as kubectl_support

NS = "kubectl-tests"
NODE = "node-a"


def artifact(name: str, **labels: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelArtifact",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"source": {"huggingFace": {"repository": "Qwen/Qwen2.5-0.5B-Instruct"}}},
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[support.RunningServer]:
    running = support.start(
        tmp_path_factory.mktemp("kubectl"),
        extra_args=["--node", NODE, "--controllers=external"],  # the server keeps its object
    )
    try:
        yield running
    finally:
        try:
            running.stop()
        finally:
            running.kill()


@pytest.fixture
def kubectl(server: support.RunningServer, tmp_path: pathlib.Path) -> kubectl_support.Kubectl:
    return kubectl_support.Kubectl(server.kubeconfig, tmp_path / "cache")


def test_api_resources(kubectl: kubectl_support.Kubectl) -> None:
    out = kubectl.run("api-resources", "--api-group=worker.gpustack.ai", "-o", "wide").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["modelartifacts"][1:5] == ["mart", "worker.gpustack.ai/v1", "true", "ModelArtifact"]
    assert rows["nodemodelstores"][1:5] == [
        "nms", "worker.gpustack.ai/v1", "false", "NodeModelStore",
    ]  # fmt: skip
    assert rows["nodemodelstores"][-1] == "gpustack"
    assert rows["modelprefetches"][1:5] == ["mpf", "worker.gpustack.ai/v1", "true", "ModelPrefetch"]
    names = kubectl.run("api-resources", "--categories=gpustack", "-o", "name").stdout.split()
    assert set(names) == {"modelartifacts.worker.gpustack.ai", "nodemodelstores.worker.gpustack.ai",
                          "modelprefetches.worker.gpustack.ai", "modelstores.worker.gpustack.ai",
                          "modelstorebindings.worker.gpustack.ai"}
    assert rows["modelstores"][1:5] == ["ms", "worker.gpustack.ai/v1", "false", "ModelStore"]
    assert rows["modelstorebindings"][1:5] == [
        "msb", "worker.gpustack.ai/v1", "true", "ModelStoreBinding"]


def test_apply_twice_updates_labels(kubectl: kubectl_support.Kubectl) -> None:
    out = kubectl.run("apply", "-f", "-", stdin=artifact("applied", team="a")).stdout
    assert "created" in out
    out = kubectl.run("apply", "-f", "-", stdin=artifact("applied", team="b", tier="x")).stdout
    assert "configured" in out
    got = json.loads(kubectl.run("get", "mart", "applied", "-n", NS, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"team": "b", "tier": "x"}
    assert got["metadata"]["generation"] == 1


def test_get_wide_shows_columns(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("wide"))
    narrow = kubectl.run("get", "mart", "-n", NS).stdout.splitlines()
    wide = kubectl.run("get", "mart", "-n", NS, "-o", "wide").stdout.splitlines()
    header = narrow[0].split()
    assert header[:2] == ["NAME", "SOURCE"]
    for column in ("REVISION", "SIZE", "READY", "DOWNLOADING", "RESOLVED"):
        assert column in header
    assert "AGE" not in header
    assert wide[0].split()[-1] == "AGE"
    row = next(line for line in wide if line.startswith("wide "))
    assert "Qwen/Qwen2.5-0.5B-Instruct" in row
    all_namespaces = kubectl.run("get", "mart", "-A").stdout.splitlines()
    assert all_namespaces[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:2] == [NS, "wide"] for line in all_namespaces)


def test_get_yaml(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("as-yaml", team="yaml"))
    got = yaml.safe_load(kubectl.run("get", "mart", "as-yaml", "-n", NS, "-o", "yaml").stdout)
    assert got["kind"] == "ModelArtifact"
    assert got["apiVersion"] == "worker.gpustack.ai/v1"
    assert got["metadata"]["uid"]
    assert got["metadata"]["resourceVersion"]
    assert got["spec"]["source"]["huggingFace"]["revision"] == "main"  # defaulted


def test_explain(kubectl: kubectl_support.Kubectl) -> None:
    out = kubectl.run("explain", "modelartifact.spec.source.huggingFace").stdout
    assert "KIND:" in out
    assert "ModelArtifact" in out
    assert "repository" in out
    assert "revision" in out


def test_patch_merge_and_json(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("patched"))
    kubectl.run("patch", "mart", "patched", "-n", NS, "--type", "merge",
                "-p", '{"metadata":{"labels":{"merged":"yes"}}}')  # fmt: skip
    operations = '[{"op":"add","path":"/metadata/annotations","value":{"j":"1"}}]'
    kubectl.run("patch", "mart", "patched", "-n", NS, "--type", "json", "-p", operations)
    got = json.loads(kubectl.run("get", "mart", "patched", "-n", NS, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"merged": "yes"}
    assert got["metadata"]["annotations"] == {"j": "1"}


def test_strategic_patch_is_refused_like_a_crd(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("strategic"))
    err = kubectl.fails("patch", "mart", "strategic", "-n", NS,
                        "-p", '{"metadata":{"labels":{"s":"1"}}}')  # fmt: skip
    assert "application/merge-patch+json" in err


def test_watch_sees_a_change(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("watched", step="one"))
    columns = "custom-columns=NAME:.metadata.name,STEP:.metadata.labels.step"
    with kubectl.stream("get", "mart", "-n", NS, "-w", "-o", columns, "--no-headers") as watch:
        watch.wait_for("one")
        kubectl.run("label", "mart", "watched", "-n", NS, "step=two", "--overwrite")
        line = watch.wait_for("two")
    assert line.split() == ["watched", "two"]


def test_delete_wait(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("deleted"))
    out = kubectl.run("delete", "mart", "deleted", "-n", NS, "--wait=true", "--timeout=30s")
    assert "deleted" in out.stdout
    err = kubectl.fails("get", "mart", "deleted", "-n", NS)
    assert "NotFound" in err or "not found" in err


def test_get_nodemodelstores(server: support.RunningServer,
                             kubectl: kubectl_support.Kubectl) -> None:
    server.wait_for(f"/apis/worker.gpustack.ai/v1/nodemodelstores/{NODE}")
    out = kubectl.run("get", "nms").stdout.splitlines()
    assert out[0].split()[0] == "NAME"
    assert [line.split()[0] for line in out[1:]] == [NODE]
    got = json.loads(kubectl.run("get", "nms", NODE, "-o", "json").stdout)
    assert got["spec"]["watermarks"] == {"highPercent": 80, "lowPercent": 70}
    err = kubectl.fails("create", "-f", "-", stdin=yaml.safe_dump(
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "NodeModelStore",
         "metadata": {"name": "node-b"}, "spec": {}}))  # fmt: skip
    assert "MethodNotAllowed" in err or "not allowed" in err or "not supported" in err


def test_spec_change_is_refused(kubectl: kubectl_support.Kubectl) -> None:
    kubectl.run("create", "-f", "-", stdin=artifact("fixed"))
    err = kubectl.fails("patch", "mart", "fixed", "-n", NS, "--type", "merge", "-p",
                        '{"spec":{"source":{"huggingFace":{"revision":"v2"}}}}')  # fmt: skip
    assert "is invalid" in err
    assert "spec" in err
    got = json.loads(kubectl.run("get", "mart", "fixed", "-n", NS, "-o", "json").stdout)
    assert got["spec"]["source"]["huggingFace"]["revision"] == "main"


def test_unknown_field_fails_strict_validation(kubectl: kubectl_support.Kubectl) -> None:
    body = yaml.safe_load(artifact("strict"))
    body["spec"]["surprise"] = True
    err = kubectl.fails("create", "-f", "-", stdin=yaml.safe_dump(body))
    assert 'unknown field "spec.surprise"' in err
    kubectl.fails("get", "mart", "strict", "-n", NS)
