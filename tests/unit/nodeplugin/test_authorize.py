from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from nodeplugin import artifacts, authorize, errors
from tests.unit.nodeplugin import fakes

DIGEST = fakes.DIGEST


async def _informer(*objects: dict[str, Any]) -> artifacts.Informer:
    client = fakes.FakeClient([fakes.page(list(objects), "5")])
    informer = artifacts.Informer(client)
    await informer.replace(await informer.list())  # one list, no watch
    return informer


def _context(**extra: str) -> dict[str, str]:
    ctx = {
        "artifact": "qwen",
        "artifactUID": "uid-1",
        "manifestDigest": DIGEST,
        "csi.storage.k8s.io/pod.namespace": "team-a",
        "csi.storage.k8s.io/pod.name": "p",
        "csi.storage.k8s.io/ephemeral": "true",
    }
    ctx.update(extra)
    return ctx


def _check(
    informer: artifacts.Informer, kubelet: pathlib.Path, *, mount: bool = True, **extra: str
) -> authorize.Grant:
    return authorize.authorize(
        informer,
        kubelet_dir=str(kubelet),
        target=str(kubelet / "pods" / "u" / "volumes" / "v" / "mount"),
        mount_capability=mount,
        volume_context=_context(**extra),
    )


async def test_a_resolved_artifact_in_the_pod_namespace_is_granted(tmp_path: pathlib.Path) -> None:
    informer = await _informer(fakes.artifact_object())
    grant = _check(informer, tmp_path)
    assert grant.digest == DIGEST and grant.artifact.repository == "org/qwen"


@pytest.mark.parametrize(
    ("objects", "extra", "mount", "rule"),
    [
        ([fakes.artifact_object()], {"csi.storage.k8s.io/ephemeral": "false"}, True, "ephemeral"),
        ([fakes.artifact_object()], {}, False, "must be a mount"),
        ([fakes.artifact_object(namespace="team-b")], {}, True, "no ModelArtifact 'qwen'"),
        ([fakes.artifact_object(uid="uid-2")], {}, True, "has UID uid-2"),
        ([fakes.artifact_object(source={"persistentVolumeClaim": {"claimName": "c"}})], {}, True,
         "persistentVolumeClaim source"),
        ([fakes.artifact_object(resolved=False)], {}, True, "not Resolved=True"),
        ([fakes.artifact_object(digest="sha256:" + "aa" * 32)], {}, True, "resolved to sha256:aa"),
        ([fakes.artifact_object(anchor_proof="")], {}, True,
         "resolved to its anchor .* without the hub, and the worker recorded no proof that "
         "namespace 'team-a' may have that content"),
        ([fakes.artifact_object(anchor_proof="Trust me")], {}, True, "recorded no proof"),
    ],
)
async def test_each_rule_refuses_with_permission_denied(
    tmp_path: pathlib.Path, objects: list[dict[str, Any]], extra: dict[str, str], mount: bool,
    rule: str,
) -> None:
    informer = await _informer(*objects)
    with pytest.raises(errors.PermissionDenied, match=rule):
        _check(informer, tmp_path, mount=mount, **extra)


@pytest.mark.parametrize("proof", ["Grant", "HubVerified"])
async def test_an_anchor_stands_on_the_proof_the_worker_recorded(
        tmp_path: pathlib.Path, proof: str) -> None:
    informer = await _informer(fakes.artifact_object(anchor_proof=proof))
    grant = _check(informer, tmp_path)
    assert grant.digest == DIGEST
    assert (grant.artifact.digest_source, grant.artifact.anchor_proof) == ("Expected", proof)
    assert grant.artifact.revision == ""  # the materializer then draws from the peers only


async def test_a_hub_identity_without_a_commit_needs_a_proof_too(tmp_path: pathlib.Path) -> None:
    """No commit is what sends the materializer to the peers alone (``attempt.py``): whatever
    ``digestSource`` says, such an identity is held to the anchor's rule."""
    obj = fakes.artifact_object()
    del obj["status"]["resolved"]["revision"]
    informer = await _informer(obj)
    with pytest.raises(errors.PermissionDenied, match="recorded no proof"):
        _check(informer, tmp_path)


async def test_targets_outside_the_kubelet_dir_are_refused(tmp_path: pathlib.Path) -> None:
    kubelet = tmp_path / "kubelet"
    (kubelet / "pods").mkdir(parents=True)
    os.symlink("/etc", kubelet / "pods" / "escape")
    for target in ("/etc/x", str(kubelet), str(kubelet / ".." / "x"),
                   str(kubelet / "pods" / "escape" / "mount"), "relative/x"):
        with pytest.raises(errors.PermissionDenied, match="target path"):
            authorize.check_target(target, str(kubelet))
    assert authorize.check_target(str(kubelet / "pods" / "a"), str(kubelet)).endswith("/pods/a")
    os.symlink(kubelet / "pods" / "a", kubelet / "pods" / "link")  # even one that stays inside
    with pytest.raises(errors.PermissionDenied, match="is a symlink"):
        authorize.check_target(str(kubelet / "pods" / "link"), str(kubelet))


async def test_missing_attributes_are_invalid(tmp_path: pathlib.Path) -> None:
    informer = await _informer(fakes.artifact_object())
    with pytest.raises(errors.InvalidArgument, match="manifestDigest"):
        _check(informer, tmp_path, manifestDigest="")
    with pytest.raises(errors.InvalidArgument, match="sha256"):
        _check(informer, tmp_path, manifestDigest="sha256:short")


async def test_unavailable_until_the_first_list(tmp_path: pathlib.Path) -> None:
    informer = artifacts.Informer(fakes.FakeClient([]))
    informer.last_error = "connection refused"
    with pytest.raises(errors.Unavailable, match="connection refused"):
        _check(informer, tmp_path)


def test_a_symlinked_kubelet_dir_gives_the_mount_table_path(tmp_path: pathlib.Path) -> None:
    real = tmp_path / "data" / "kubelet"
    (real / "pods" / "u").mkdir(parents=True)
    os.symlink(real, tmp_path / "kubelet")
    target = authorize.check_target(str(tmp_path / "kubelet" / "pods" / "u" / "mount"),
                                    str(tmp_path / "kubelet"))
    assert target == str(real / "pods" / "u" / "mount")


async def test_without_the_walk_only_the_lexical_rule_is_checked(tmp_path: pathlib.Path) -> None:
    informer = await _informer(fakes.artifact_object())
    kubelet = tmp_path / "kubelet"
    (kubelet / "pods" / "u" / "volumes" / "v").mkdir(parents=True)
    os.symlink("/etc", kubelet / "pods" / "u" / "volumes" / "v" / "mount")
    with pytest.raises(errors.PermissionDenied, match="is a symlink"):
        _check(informer, kubelet)
    # The caller walks it later (cache.volumes on its way to the mount, or before materializing).
    grant = authorize.authorize(
        informer, kubelet_dir=str(kubelet),
        target=str(kubelet / "pods" / "u" / "volumes" / "v" / "mount"),
        mount_capability=True, volume_context=_context(), walk=False,
    )
    assert grant.target.endswith("/pods/u/volumes/v/mount")
    with pytest.raises(errors.PermissionDenied, match="not under the kubelet directory"):
        authorize.authorize(informer, kubelet_dir=str(kubelet), target="/etc/x",
                            mount_capability=True, volume_context=_context(), walk=False)
