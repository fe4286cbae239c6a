"""Each mount authorization rule refuses with PermissionDenied against the real API server."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable

import grpc
import pytest

from devkit.harness import apiserver as support
from nodeplugin.materialize import local
from tests.integration.nodeplugin.csi_harness import ArtifactApi, PluginProcess, mounts_under

NS = "auth-a"
OTHER_NS = "auth-b"


@pytest.fixture(scope="module")
def world(
    artifacts: ArtifactApi, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    import_dir = tmp_path_factory.mktemp("imports")
    digest = local.write_import(import_dir, {"weights.bin": b"w" * 4096})
    good = artifacts.resolved(NS, "good", digest)
    theirs = artifacts.resolved(OTHER_NS, "theirs", digest)
    unresolved = artifacts.resolve(artifacts.create(NS, "pending"), digest, resolved=False)
    claim = artifacts.create(NS, "claim", {"persistentVolumeClaim": {"claimName": "weights"}})
    return {"import_dir": import_dir, "digest": digest, "good": good, "theirs": theirs,
            "pending": unresolved, "claim": claim}


def _uid(obj: object) -> str:
    return obj["metadata"]["uid"]  # type: ignore[index, no-any-return]


@pytest.fixture
def plugin(
    apiserver: support.RunningServer,
    start_plugin: Callable[..., PluginProcess],
    world: dict[str, object],
) -> PluginProcess:
    running = start_plugin(apiserver, import_dir=world["import_dir"])
    # Publish the digest once so every refusal below is of content already on the node.
    kubelet = running.kubelet()
    request = kubelet.publish_request(
        namespace=NS, pod_uid="owner",
        attributes={"artifact": "good", "artifactUID": _uid(world["good"]),
                    "manifestDigest": str(world["digest"])})
    assert kubelet.publish_until_ok(request)[-1][0] == grpc.StatusCode.OK
    return running


@pytest.mark.parametrize(
    ("case", "namespace", "attributes", "rule"),
    [
        ("wrong namespace", NS, {"artifact": "theirs", "uid": "theirs"},
         "no ModelArtifact 'theirs' in namespace 'auth-a'"),
        ("spoofed pod.namespace", NS,
         {"artifact": "theirs", "uid": "theirs", "csi.storage.k8s.io/pod.namespace": OTHER_NS},
         "no ModelArtifact 'theirs' in namespace 'auth-a'"),
        ("wrong UID", NS, {"artifact": "good", "uid": "theirs"}, "has UID"),
        ("claim source", NS, {"artifact": "claim", "uid": "claim"}, "persistentVolumeClaim"),
        ("unresolved", NS, {"artifact": "pending", "uid": "pending"}, "not Resolved=True"),
        ("digest mismatch", NS,
         {"artifact": "good", "uid": "good", "manifestDigest": "sha256:" + "ab" * 32},
         "not the volume's manifestDigest"),
    ],
)
def test_refusals_are_permission_denied_naming_the_rule(
    plugin: PluginProcess, world: dict[str, object], case: str, namespace: str,
    attributes: dict[str, str], rule: str,
) -> None:
    attrs = dict(attributes)
    attrs["artifactUID"] = _uid(world[attrs.pop("uid")])
    attrs.setdefault("manifestDigest", str(world["digest"]))
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(namespace=namespace, pod_uid=f"pod-{case.replace(' ', '-')}",
                                      attributes=attrs)
    code, message = kubelet.publish_until_ok(request)[-1]
    assert code == grpc.StatusCode.PERMISSION_DENIED, (case, message)
    assert rule in message
    assert not pathlib.Path(request.target_path).exists()
    assert mounts_under(plugin.kubelet_dir) == [str(kubelet.target("owner"))]


def test_a_target_outside_the_kubelet_dir_is_refused(
    plugin: PluginProcess, world: dict[str, object], tmp_path: pathlib.Path
) -> None:
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(
        namespace=NS, pod_uid="escape",
        attributes={"artifact": "good", "artifactUID": _uid(world["good"]),
                    "manifestDigest": str(world["digest"])})
    request.target_path = str(tmp_path / "outside" / "mount")
    code, message = kubelet.publish(request)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "kubelet directory" in message


def test_an_artifact_that_stops_being_resolved_stops_new_mounts_only(
    plugin: PluginProcess, artifacts: ArtifactApi, world: dict[str, object]
) -> None:
    digest = str(world["digest"])
    flip = artifacts.resolved(NS, "flip", digest)
    attributes = {"artifact": "flip", "artifactUID": _uid(flip), "manifestDigest": digest}
    kubelet = plugin.kubelet()
    mounted = kubelet.publish_request(namespace=NS, pod_uid="flip-1", attributes=attributes)
    assert kubelet.publish_until_ok(mounted)[-1][0] == grpc.StatusCode.OK
    artifacts.resolve(flip, digest, resolved=False)
    later = kubelet.publish_request(namespace=NS, pod_uid="flip-2", attributes=attributes)
    deadline = time.monotonic() + 10
    while True:  # the change reaches the plugin through its watch
        code, message = kubelet.publish(later)
        if code != grpc.StatusCode.OK or time.monotonic() > deadline:
            break
        kubelet.unpublish(later.target_path, later.volume_id)
        time.sleep(0.05)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "not Resolved=True" in message
    assert (pathlib.Path(mounted.target_path) / "weights.bin").read_bytes() == b"w" * 4096
    kubelet.unpublish(mounted.target_path, mounted.volume_id)
