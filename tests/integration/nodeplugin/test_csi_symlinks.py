"""Symlinks at or on the way to a target, against the plugin process with real bind mounts.

Both attacks from issue 7: a target that is a symlink to a directory outside the kubelet
directory must not get the model mounted over that directory, and unpublishing a symlink to
another Pod's target must not unmount that Pod's volume.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Callable

import grpc
import pytest

from devkit.harness import apiserver as support
from nodeplugin.materialize import local
from tests.integration.nodeplugin.csi_harness import (
    ArtifactApi,
    Kubelet,
    PluginProcess,
    mounts_under,
)

NS = "links"
FILES = {"weights.bin": b"w" * 8192, "config.json": b"{}"}
RULE = "nothing below the kubelet directory may be a symlink"


@pytest.fixture
def mounted(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> tuple[PluginProcess, Kubelet, dict[str, str], pathlib.Path]:
    """A plugin with the digest published and mounted for the Pod ``victim``."""
    import_dir = tmp_path / "imports"
    digest = local.write_import(import_dir, FILES)
    name = "model-" + hashlib.sha256(request.node.name.encode()).hexdigest()[:12]
    art = artifacts.resolved(NS, name, digest)
    plugin = start_plugin(apiserver, import_dir=import_dir)
    kubelet = plugin.kubelet()
    attributes = {"artifact": name, "artifactUID": art["metadata"]["uid"],
                  "manifestDigest": digest}
    victim = kubelet.publish_request(namespace=NS, pod_uid="victim", attributes=attributes)
    assert kubelet.publish_until_ok(victim)[-1][0] == grpc.StatusCode.OK
    return plugin, kubelet, attributes, pathlib.Path(victim.target_path)


def _outside(tmp_path: pathlib.Path) -> pathlib.Path:
    outside = tmp_path / "host-dir"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"the host's own file")
    return outside


def _assert_untouched(outside: pathlib.Path) -> None:
    assert mounts_under(outside) == []
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_bytes() == b"the host's own file"


def test_a_symlink_target_pointing_outside_never_gets_the_model_mounted_over_it(
    mounted: tuple[PluginProcess, Kubelet, dict[str, str], pathlib.Path], tmp_path: pathlib.Path
) -> None:
    plugin, kubelet, attributes, victim = mounted
    outside = _outside(tmp_path)
    request = kubelet.publish_request(namespace=NS, pod_uid="attacker", attributes=attributes)
    os.symlink(outside, request.target_path)
    code, message = kubelet.publish(request)
    assert code == grpc.StatusCode.PERMISSION_DENIED, message
    assert "is a symlink" in message and RULE in message
    _assert_untouched(outside)
    assert os.readlink(request.target_path) == str(outside)
    assert mounts_under(plugin.kubelet_dir) == [str(victim)]


def test_a_symlinked_directory_on_the_way_is_refused_too(
    mounted: tuple[PluginProcess, Kubelet, dict[str, str], pathlib.Path], tmp_path: pathlib.Path
) -> None:
    plugin, kubelet, attributes, victim = mounted
    outside = _outside(tmp_path)
    request = kubelet.publish_request(namespace=NS, pod_uid="detour", attributes=attributes)
    volume_dir = pathlib.Path(request.target_path).parent
    volume_dir.rmdir()
    os.symlink(outside, volume_dir)  # .../kubernetes.io~csi/gpustack-model -> the host's dir
    code, message = kubelet.publish(request)
    assert code == grpc.StatusCode.PERMISSION_DENIED, message
    assert "passes through the symlink" in message and RULE in message
    _assert_untouched(outside)
    assert mounts_under(plugin.kubelet_dir) == [str(victim)]


def test_unpublishing_a_symlink_to_another_pods_target_leaves_that_volume_mounted(
    mounted: tuple[PluginProcess, Kubelet, dict[str, str], pathlib.Path],
) -> None:
    plugin, kubelet, _, victim = mounted
    attacker = kubelet.target("attacker")
    attacker.parent.mkdir(parents=True)
    os.symlink(victim, attacker)
    with pytest.raises(grpc.RpcError) as caught:
        kubelet.unpublish(attacker)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "is a symlink" in (caught.value.details() or "")
    assert mounts_under(plugin.kubelet_dir) == [str(victim)]
    for path, data in FILES.items():
        assert (victim / path).read_bytes() == data
    assert os.readlink(attacker) == str(victim)
    # The victim's own teardown still works.
    kubelet.unpublish(victim)
    assert mounts_under(plugin.kubelet_dir) == [] and not victim.exists()
