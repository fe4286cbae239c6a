"""Publish and unpublish through the real socket: real bind mounts, read-only, byte-identical."""

from __future__ import annotations

import concurrent.futures
import errno
import json
import os
import pathlib
import stat
from collections.abc import Callable

import grpc
import pytest

from devkit.harness import apiserver as support
from nodeplugin.materialize import local
from tests.integration.nodeplugin.csi_harness import ArtifactApi, PluginProcess, mounts_under

FILES = {
    "config.json": b'{"architectures": ["Qwen2"]}',
    "tokenizer/vocab.txt": b"a\nb\nc\n",
    "model.safetensors": os.urandom(3 << 20),
}


@pytest.fixture
def imports(tmp_path: pathlib.Path) -> tuple[pathlib.Path, str]:
    directory = tmp_path / "imports"
    return directory, local.write_import(directory, FILES, gitsha1=frozenset({"config.json"}))


def test_first_mount_materializes_then_serves_read_only_identical_files(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    imports: tuple[pathlib.Path, str],
) -> None:
    import_dir, digest = imports
    art = artifacts.resolved("mount-a", "qwen", digest)
    plugin = start_plugin(apiserver, import_dir=import_dir)
    kubelet = plugin.kubelet()
    request = kubelet.publish_request(
        namespace="mount-a", pod_uid="pod-1", secrets={"token": "hf_do_not_leak"},
        attributes={"artifact": "qwen", "artifactUID": art["metadata"]["uid"],
                    "manifestDigest": digest},
    )
    outcomes = kubelet.publish_until_ok(request)
    assert outcomes[-1][0] == grpc.StatusCode.OK, outcomes
    aborted = [m for c, m in outcomes if c == grpc.StatusCode.ABORTED]
    assert aborted and aborted[0].startswith(f"materializing {digest}:")
    target = pathlib.Path(request.target_path)
    for path, data in FILES.items():
        assert (target / path).read_bytes() == data
    with pytest.raises(OSError) as info:
        (target / "new-file").write_bytes(b"x")
    assert info.value.errno == errno.EROFS
    with pytest.raises(OSError) as info, (target / "config.json").open("r+b"):
        pass
    assert info.value.errno in (errno.EROFS, errno.EACCES)
    assert mounts_under(target) == [str(target)]
    assert stat.S_IMODE((target / "model.safetensors").stat().st_mode) == 0o444
    # Publishing the same target again is fine; another digest on it is AlreadyExists.
    assert kubelet.publish(request)[0] == grpc.StatusCode.OK
    second = local.write_import(import_dir, {"other.bin": b"other"})
    llama = artifacts.resolved("mount-a", "llama", second)
    request_2 = kubelet.publish_request(
        namespace="mount-a", pod_uid="pod-2",
        attributes={"artifact": "llama", "artifactUID": llama["metadata"]["uid"],
                    "manifestDigest": second})
    # the plugin's informer learns of the status write asynchronously
    first = kubelet.publish_once_seen(request_2)
    outcomes = [first] if first[0] == grpc.StatusCode.OK else kubelet.publish_until_ok(request_2)
    code, message = outcomes[-1]
    assert code == grpc.StatusCode.OK, outcomes
    code, message = kubelet.publish(kubelet.publish_request(
        namespace="mount-a", pod_uid="pod-1",
        attributes={"artifact": "llama", "artifactUID": llama["metadata"]["uid"],
                    "manifestDigest": second}))
    assert code == grpc.StatusCode.ALREADY_EXISTS, message
    kubelet.unpublish(kubelet.target("pod-2"))
    kubelet.unpublish(target, request.volume_id)
    assert not target.exists() and mounts_under(plugin.kubelet_dir) == []
    kubelet.unpublish(target, request.volume_id)  # again: idempotent
    kubelet.unpublish(plugin.kubelet_dir / "pods" / "never" / "mount")  # unknown target
    assert "hf_do_not_leak" not in plugin.log()
    state = json.loads((plugin.root / "state" / "usage.json").read_text())
    assert state["digests"][digest]["referenced"] is False


def test_fifty_concurrent_publishes_of_one_digest_all_succeed(
    apiserver: support.RunningServer,
    artifacts: ArtifactApi,
    start_plugin: Callable[..., PluginProcess],
    imports: tuple[pathlib.Path, str],
) -> None:
    import_dir, digest = imports
    art = artifacts.resolved("mount-b", "qwen", digest)
    plugin = start_plugin(apiserver, import_dir=import_dir)
    kubelet = plugin.kubelet()
    attributes = {"artifact": "qwen", "artifactUID": art["metadata"]["uid"],
                  "manifestDigest": digest}
    requests = [kubelet.publish_request(namespace="mount-b", pod_uid=f"pod-{i}",
                                        attributes=attributes) for i in range(50)]
    # Cold: all fifty arrive before the tree exists and join one attempt.
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        outcomes = list(pool.map(kubelet.publish_until_ok, requests))
    assert all(o[-1][0] == grpc.StatusCode.OK for o in outcomes), outcomes
    assert len(mounts_under(plugin.kubelet_dir)) == 50
    assert len(list((plugin.root / "objects" / "sha256").iterdir())) == 1
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        list(pool.map(lambda r: kubelet.unpublish(r.target_path, r.volume_id), requests))
    assert mounts_under(plugin.kubelet_dir) == []
