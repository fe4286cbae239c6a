"""Breaking delivery on purpose on the real node (issue 26): a file whose bytes do not match its
listed digest, a file that goes missing mid-download, a published file changed on the host, ten
Pods at once on a cold cache, a new revision of a model whose weights did not change, a model
larger than the cache's filesystem, the plugin killed mid-transfer, and a power loss right after
a publish (a tree of its own files, and a revision linking the node's stored files). Each
scenario has its own repository on the fixture hub, each file its own bytes (but a revision's
unchanged files); consumer Pods read and hash every byte, and the node's cache is inspected on
the host.

The release is this module's own: the conftest's values plus a short scrub interval, so a
tampered tree is found within seconds, and the cache (the chart's ``rootPath``) on its own small
ext4 filesystem in a loop-mounted image file, so space runs out for real and a power loss can be
played by keeping only what had reached the image. The steps run in order and share one
cluster."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import time
from typing import Any

import pytest

from devkit import fixturehub
from devkit.realnode import deploy, objects, release_values, rig

pytestmark = [pytest.mark.integration, pytest.mark.root]

NAMESPACE = release_values.NAMESPACE
RELEASE = release_values.RELEASE
TENANT = "dx-a"
OTHER = "dx-b"


def _config(repo: str) -> bytes:
    """A repository's own config.json: the node stores a file once, whichever trees list it,
    so files two scenarios shared would be fetched by the first alone."""
    return b'{"model_type": "e2e", "hidden_size": 8, "name": "%s"}\n' % repo.encode()

SCRUB_INTERVAL = "10s"
MiB = 1 << 20

BAD_SHA = "e2e/bad-sha"
BAD_SHA_SIZE = 6 * MiB
BAD_SHA_FILES: dict[str, bytes | int] = {"config.json": _config(BAD_SHA),
                                         "model.safetensors": BAD_SHA_SIZE}
MISSING = "e2e/missing-shard"
MISSING_SHARD = "model-00002-of-00002.safetensors"
MISSING_SIZE = 32 * MiB
MISSING_FILES: dict[str, bytes | int] = {
    "config.json": _config(MISSING),
    "model-00001-of-00002.safetensors": 2 * MiB,
    MISSING_SHARD: MISSING_SIZE,
}
TAMPER = "e2e/tamper"
TAMPER_FILES: dict[str, bytes | int] = {"config.json": _config(TAMPER),
                                        "model.safetensors": 4 * MiB}
CROWD = "e2e/crowd"
CROWD_FILES: dict[str, bytes | int] = {"config.json": _config(CROWD),
                                       "model.safetensors": 24 * MiB}
RESUME = "e2e/resume"
RESUME_FILES: dict[str, bytes | int] = {"config.json": _config(RESUME),
                                        "model.safetensors": 64 * MiB}
HUGE = "e2e/huge"
HUGE_FILES: dict[str, bytes | int] = {"config.json": _config(HUGE),
                                      "model.safetensors": 600 * MiB}
DURABLE = "e2e/durable"
DURABLE_FILES: dict[str, bytes | int] = {"config.json": _config(DURABLE),
                                         "model.safetensors": 16 * MiB}
REVISION = "e2e/revision"
REVISION_FILES: dict[str, bytes | int] = {
    "config.json": b'{"model_type": "e2e", "revision": 1}\n',
    "model-00001-of-00002.safetensors": 16 * MiB,
    "model-00002-of-00002.safetensors": 16 * MiB,
    "tokenizer.json": b'{"vocab": "e2e"}\n' * 1000,
}
REVISION_2 = {**REVISION_FILES, "config.json": b'{"model_type": "e2e", "revision": 2}\n'}
REVISION_3 = {**REVISION_FILES, "config.json": b'{"model_type": "e2e", "revision": 3}\n'}
CACHE_SIZE = 640 * MiB  # the cache's filesystem: the high watermark (80%) leaves 512 MiB


# --- the release and the cluster's objects ---------------------------------------------------


@pytest.fixture(scope="module")
def release(cluster: rig.Rig, hub: fixturehub.Hub, timings: dict[str, float]) -> str:
    """The conftest's release with a scrub pass every ``SCRUB_INTERVAL``."""
    started = time.monotonic()
    values: dict[str, Any] = release_values.values(hub, cluster)
    _mount_cache(cluster, _new_image(cluster, "cache.img"))
    values["modelManager"]["scrub"] = {"interval": SCRUB_INTERVAL}
    deploy.install(cluster, values, "values-destructive.yaml")
    timings["helm install"] = time.monotonic() - started
    return RELEASE


@pytest.fixture(scope="module")
def installed(cluster: rig.Rig, hub: fixturehub.Hub, release: str) -> rig.Rig:
    for repo, files in ((BAD_SHA, BAD_SHA_FILES), (MISSING, MISSING_FILES),
                        (TAMPER, TAMPER_FILES), (CROWD, CROWD_FILES), (RESUME, RESUME_FILES),
                        (HUGE, HUGE_FILES), (DURABLE, DURABLE_FILES),
                        (REVISION, REVISION_FILES)):
        hub.add_repo(repo, files)
    # the listing tells the true digests; the bytes served do not match them
    hub.faults(BAD_SHA, "model.safetensors").corrupt_at = 5 * MiB + 123
    missing = hub.faults(MISSING, MISSING_SHARD)
    missing.fail_status, missing.fail_times, missing.fail_error_code = 404, 10**6, "EntryNotFound"
    missing.fail_after_bytes = 8 * MiB
    for namespace in (TENANT, OTHER):
        cluster.kubectl("create", "namespace", namespace)
    objects.wait_store_ready(cluster)
    return cluster


def _new_image(cluster: rig.Rig, name: str) -> pathlib.Path:
    """A sparse file of ``CACHE_SIZE`` bytes holding a fresh ext4 filesystem."""
    image = cluster.work / name
    image.parent.mkdir(parents=True, exist_ok=True)
    with image.open("wb") as handle:
        handle.truncate(CACHE_SIZE)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True,
                   capture_output=True)  # fmt: skip
    return image


def _mount_cache(cluster: rig.Rig, image: pathlib.Path) -> None:
    """``image`` loop-mounted at the cache directory, on the shared bind mount the release's
    values make there (runc judges the first mount listed at a path: both must be shared)."""
    target = _cache(cluster)
    if str(target) not in rig.mounts_under(target):
        cluster.shared_directory(target)
    subprocess.run(["mount", "-o", "loop", str(image), str(target)], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run(["mount", "--make-rshared", str(target)], check=True, capture_output=True)


def _unmount_cache(cluster: rig.Rig) -> None:
    """Every mount stacked at the cache directory (the shared bind, then the loop)."""
    target = str(_cache(cluster))
    while target in rig.mounts_under(_cache(cluster)):
        subprocess.run(["umount", target], check=True, capture_output=True)


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return {}


_json = objects.json_of
_artifact = objects.artifact


def _reader_pod(name: str, namespace: str, attributes: dict[str, str]) -> str:
    script = ("cd /models && find . -type f | sort | xargs sha256sum && echo '--- done'; "
              "exec sleep 3600")  # fmt: skip
    return objects.pod(name, namespace, script, attributes=attributes, label="destructive")


def _wait_read(cluster: rig.Rig, name: str, namespace: str, timeout: float = 240) -> dict[str, str]:
    """Once the Pod read its model: sha256 per file (the plugin's two markers left out)."""

    def done() -> str | None:
        out = cluster.kubectl("logs", "-n", namespace, name, check=False).stdout
        return out if "--- done" in out else None

    out = cluster.wait(f"Pod {namespace}/{name} read the model", done, timeout=timeout,
                       namespace=namespace)  # fmt: skip
    assert isinstance(out, str)
    seen: dict[str, str] = {}
    for line in out.partition("--- done")[0].strip().splitlines():
        digest, path = line.split(maxsplit=1)
        seen[path.removeprefix("./")] = digest
    seen.pop(".gpustack-manifest", None)
    seen.pop(".gpustack-digest", None)
    return seen


def _hub_digests(hub: fixturehub.Hub, repo: str, files: dict[str, bytes | int],
                 commit: str | None = None) -> dict[str, str]:
    return {path: hub.content(repo, path, commit).sha256 for path in files}


def _size(files: dict[str, bytes | int]) -> int:
    return sum(len(c) if isinstance(c, bytes) else c for c in files.values())


_failed_mount = objects.failed_mount


def _store_entry(cluster: rig.Rig, digest: str) -> dict[str, Any] | None:
    store = _json(cluster, "get", "nodemodelstores", cluster.node_name)
    for entry in store.get("status", {}).get("models") or []:
        if entry.get("digest") == digest:
            return dict(entry)
    return None


def _wait_entry(cluster: rig.Rig, digest: str, state: str, what: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        entry = _store_entry(cluster, digest)
        return entry if entry is not None and entry.get("state") == state else None

    entry = cluster.wait(f"NodeModelStore entry {state} ({what})", reached, timeout=150,
                         namespace=NAMESPACE)  # fmt: skip
    assert isinstance(entry, dict)
    return entry


def _progress(cluster: rig.Rig, namespace: str, name: str) -> dict[str, Any]:
    path = f"/apis/worker.gpustack.ai/v1/namespaces/{namespace}/modelartifacts/{name}/progress"
    body: dict[str, Any] = json.loads(cluster.kubectl("get", "--raw", path).stdout)
    return body


def _time(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _cache(cluster: rig.Rig) -> pathlib.Path:
    return cluster.work / "models"


def _published(cluster: rig.Rig, digest: str) -> pathlib.Path:
    return _cache(cluster) / "objects" / "sha256" / digest.split(":", 1)[1]


def _partial_files(cluster: rig.Rig, digest: str) -> dict[str, int]:
    """Files of the digest's staging directories on the host: relative path -> size."""
    found: dict[str, int] = {}
    hex_ = digest.split(":", 1)[1]
    for staging in (_cache(cluster) / "partial" / "sha256").glob(f"{hex_}.*"):
        for path in staging.rglob("*"):
            if path.is_file():
                found[str(path.relative_to(staging))] = path.stat().st_size
    return found


def _delete_pods(cluster: rig.Rig, namespace: str, *names: str) -> None:
    cluster.kubectl("delete", "pod", "-n", namespace, *names, "--timeout=120s", timeout=150)


# --- 1 and 2: a wrong digest and a missing shard -----------------------------------------------


def _refused_download(cluster: rig.Rig, hub: fixturehub.Hub, state: dict[str, Any], *,
                      key: str, repo: str, path: str, reason: str) -> dict[str, Any]:  # fmt: skip
    """Pod ``<key>-1`` is refused with ``reason``; what the node, the progress and the disk say."""
    attributes = _artifact(cluster, TENANT, key, repo)
    digest = attributes["manifestDigest"]
    cluster.apply(_reader_pod(f"{key}-1", TENANT, attributes))
    message = _failed_mount(cluster, f"{key}-1", TENANT, f"({reason})")
    assert f"materializing {digest} failed ({reason})" in message, message
    entry = _wait_entry(cluster, digest, "Failed", key)
    assert entry["reason"] == reason, entry
    # no repository, path or URL in what tenants and operators read
    for text in (message, entry["message"]):
        assert repo not in text and path not in text and "http" not in text, text
    # the documented backoff: the first retry a minute after the failure
    retry = _time(entry["retryTime"]) - time.time()
    assert 0 < retry <= 61, entry

    def counted() -> dict[str, Any] | None:
        body = _progress(cluster, TENANT, key)
        return body if body.get("failed") == 1 else None

    progress = cluster.wait(f"{key}'s progress counts the failure", counted, timeout=60,
                            namespace=NAMESPACE)  # fmt: skip
    assert isinstance(progress, dict)
    assert (progress["ready"], progress["downloading"]) == (0, 0), progress
    assert progress["failureReasons"] == [{"reason": reason, "count": 1}], progress
    assert not _published(cluster, digest).exists()
    state[key] = {"attributes": attributes, "retryTime": _time(entry["retryTime"]),
                  "requests": hub.file_requests(repo, path)}  # fmt: skip
    return entry


def test_incorrect_sha_never_mounts(installed: rig.Rig, hub: fixturehub.Hub,
                                    state: dict[str, Any]) -> None:  # fmt: skip
    _refused_download(installed, hub, state, key="bad-sha", repo=BAD_SHA,
                      path="model.safetensors", reason="IntegrityMismatch")  # fmt: skip
    digest = state["bad-sha"]["attributes"]["manifestDigest"]
    # the file whose hash failed is deleted from the staging directory, not kept for a resume
    assert "model.safetensors" not in _partial_files(installed, digest)
    assert hub.bytes_served(BAD_SHA, "model.safetensors") >= BAD_SHA_SIZE


def test_missing_shard_never_mounts(installed: rig.Rig, hub: fixturehub.Hub,
                                    state: dict[str, Any]) -> None:  # fmt: skip
    _refused_download(installed, hub, state, key="missing", repo=MISSING, path=MISSING_SHARD,
                      reason="SourceUnavailable")  # fmt: skip
    # it went missing mid-file: part of it had arrived
    served = hub.bytes_served(MISSING, MISSING_SHARD)
    assert 8 * MiB <= served < MISSING_SIZE, served


REFUSED = (("bad-sha", BAD_SHA, "model.safetensors", BAD_SHA_FILES),
           ("missing", MISSING, MISSING_SHARD, MISSING_FILES))


def _mount_failures(cluster: rig.Rig, name: str, namespace: str) -> int:
    events = _json(cluster, "get", "events", "-n", namespace, "--field-selector",
                   f"involvedObject.name={name}")["items"]  # fmt: skip
    return sum(int(e.get("count") or 1) for e in events if e.get("reason") == "FailedMount")


def test_refused_downloads_back_off(installed: rig.Rig, hub: fixturehub.Hub,
                                    state: dict[str, Any]) -> None:  # fmt: skip
    """kubelet keeps retrying the mounts; before ``retryTime`` the plugin asks the hub nothing."""
    first = {key: _mount_failures(installed, f"{key}-1", TENANT) for key, *_ in REFUSED}
    installed.wait("kubelet retried both mounts", lambda: all(
        _mount_failures(installed, f"{key}-1", TENANT) > first[key] for key, *_ in REFUSED),
        timeout=40, namespace=TENANT)  # fmt: skip
    for key, repo, path, _ in REFUSED:
        assert time.time() < state[key]["retryTime"], "the scenario took longer than the backoff"
        assert hub.file_requests(repo, path) == state[key]["requests"], key
        state[key]["served"] = hub.bytes_served(repo, path)
    _delete_pods(installed, TENANT, "bad-sha-1", "missing-1")
    hub.clear_faults()


# --- 3: tampering after READY --------------------------------------------------------------


def test_tampering_after_ready_is_quarantined(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    attributes = _artifact(installed, TENANT, "tamper", TAMPER)
    digest = attributes["manifestDigest"]
    want = _hub_digests(hub, TAMPER, TAMPER_FILES)
    installed.apply(_reader_pod("tamper-1", TENANT, attributes))
    assert _wait_read(installed, "tamper-1", TENANT) == want
    _wait_entry(installed, digest, "Ready", "tamper")
    # a hand on the node: one byte of a published file changes on the host
    victim = _published(installed, digest) / "model.safetensors"
    with victim.open("r+b") as handle:
        handle.seek(MiB + 7)
        byte = handle.read(1)
        handle.seek(MiB + 7)
        handle.write(bytes([byte[0] ^ 0x01]))
    entry = _wait_entry(installed, digest, "Failed", "the scrub quarantined it")
    assert entry["reason"] == "IntegrityMismatch", entry
    hex_ = digest.split(":")[1]
    assert (_cache(installed) / "state" / f"quarantine-{hex_}.json").exists()
    # taken out of use at once: no longer published, held apart while tamper-1 mounts it
    held = _cache(installed) / "quarantined"
    assert [p.name.split(".")[0] for p in held.iterdir()] == [hex_]
    assert not _published(installed, digest).exists()
    served = hub.bytes_served(TAMPER)
    # the next mount materializes it again: the hub's bytes, never the tampered ones; the
    # tampered file left the node's file store with the tree, the intact config.json did not
    installed.apply(_reader_pod("tamper-2", TENANT, attributes))
    assert _wait_read(installed, "tamper-2", TENANT) == want
    assert hub.bytes_served(TAMPER) - served == TAMPER_FILES["model.safetensors"]
    assert _wait_entry(installed, digest, "Ready", "tamper again").get("reason") in ("", None)
    # the running Pod keeps its mount (its own copy)
    done = installed.kubectl("exec", "-n", TENANT, "tamper-1", "--", "cat", "/models/config.json")
    assert done.stdout.encode() == _config(TAMPER)
    _delete_pods(installed, TENANT, "tamper-1", "tamper-2")
    installed.wait("the quarantined copy removed once unmounted",
                   lambda: not any(held.iterdir()), timeout=90,
                   namespace=TENANT)  # fmt: skip
    assert _published(installed, digest).exists()  # the good copy stays
    served = hub.bytes_served(TAMPER)
    installed.apply(_reader_pod("tamper-3", TENANT, attributes))
    assert _wait_read(installed, "tamper-3", TENANT) == want
    assert hub.bytes_served(TAMPER) == served  # mounted from the cache
    _delete_pods(installed, TENANT, "tamper-3")


# --- 4: ten Pods of two namespaces at once on a cold cache -------------------------------------


def test_ten_pods_one_download(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    mine = _artifact(installed, TENANT, "crowd", CROWD)
    theirs = _artifact(installed, OTHER, "crowd", CROWD)
    assert mine["manifestDigest"] == theirs["manifestDigest"]
    assert not _published(installed, mine["manifestDigest"]).exists()
    pods = [(f"crowd-{i}", TENANT if i % 2 else OTHER) for i in range(10)]
    installed.apply("---\n".join(
        _reader_pod(name, namespace, mine if namespace == TENANT else theirs)
        for name, namespace in pods))  # fmt: skip
    want = _hub_digests(hub, CROWD, CROWD_FILES)
    for name, namespace in pods:
        assert _wait_read(installed, name, namespace) == want, name
    assert hub.bytes_served(CROWD) == _size(CROWD_FILES)
    uids = [_json(installed, "get", "pod", name, "-n", namespace)["metadata"]["uid"]
            for name, namespace in pods]  # fmt: skip
    mounted = [uid for uid in uids
               if any(f"/pods/{uid}/volumes/kubernetes.io~csi/" in point
                      for point in rig.mounts_under(rig.KUBELET_DIR))]  # fmt: skip
    assert len(mounted) == 10, mounted
    entry = _wait_entry(installed, mine["manifestDigest"], "Ready", "crowd")
    assert entry["referenced"] is True, entry
    for namespace in (TENANT, OTHER):
        installed.kubectl("delete", "pods", "-n", namespace, "-l", "e2e=destructive",
                          "--timeout=120s", timeout=150)  # fmt: skip


# --- a new revision of a model: only what changed comes from the hub ---------------------------


def test_a_new_revision_fetches_only_the_changed_file(installed: rig.Rig,
                                                      hub: fixturehub.Hub) -> None:
    """Revision 1 mounted, then revision 2 of the same repository (its config.json changed):
    the hub serves that file alone, both Pods read the hub's bytes, and the node keeps one copy
    of each unchanged file for both trees."""
    one = hub.repo(REVISION).commit
    first = _artifact(installed, TENANT, "rev-1", REVISION, revision=one)
    installed.apply(_reader_pod("rev-1", TENANT, first))
    assert _wait_read(installed, "rev-1", TENANT) == _hub_digests(hub, REVISION, REVISION_FILES)
    served = {path: hub.bytes_served(REVISION, path) for path in REVISION_2}
    two = hub.add_revision(REVISION, REVISION_2).commit
    second = _artifact(installed, TENANT, "rev-2", REVISION, revision=two)
    assert second["manifestDigest"] != first["manifestDigest"]
    installed.apply(_reader_pod("rev-2", TENANT, second))
    assert _wait_read(installed, "rev-2", TENANT) == \
        _hub_digests(hub, REVISION, REVISION_2, two)
    fetched = {path: hub.bytes_served(REVISION, path) - served[path] for path in REVISION_2}
    changed = _size({"config.json": REVISION_2["config.json"]})
    assert fetched == {path: changed if path == "config.json" else 0 for path in REVISION_2}, \
        fetched
    # the first Pod still reads revision 1 (its own config.json)
    done = installed.kubectl("exec", "-n", TENANT, "rev-1", "--", "cat", "/models/config.json")
    assert done.stdout.encode() == REVISION_FILES["config.json"]
    trees = [_published(installed, a["manifestDigest"]) for a in (first, second)]
    for path in REVISION_2:
        if path != "config.json":  # one file on the node for both trees
            assert (trees[0] / path).stat().st_ino == (trees[1] / path).stat().st_ino, path
    entry = _wait_entry(installed, second["manifestDigest"], "Ready", "revision 2")
    assert entry["sizeBytes"] == _size(REVISION_2)
    _delete_pods(installed, TENANT, "rev-1", "rev-2")


# --- 1 and 2 again, once the backoff ended -----------------------------------------------------


def test_refused_downloads_recover_after_backoff(installed: rig.Rig, hub: fixturehub.Hub,
                                                 state: dict[str, Any]) -> None:  # fmt: skip
    """Once ``retryTime`` passed (scenarios 3 and 4 ran meanwhile), a new Pod gets the hub's
    bytes: the wrong file fetched again whole, the missing shard resumed from its partial."""
    wait = max(state[key]["retryTime"] for key, *_ in REFUSED) - time.time() + 1
    time.sleep(max(0.0, wait))
    for key, *_ in REFUSED:
        installed.apply(_reader_pod(f"{key}-2", TENANT, state[key]["attributes"]))
    for key, repo, path, files in REFUSED:
        assert _wait_read(installed, f"{key}-2", TENANT) == _hub_digests(hub, repo, files), key
        digest = state[key]["attributes"]["manifestDigest"]
        assert _wait_entry(installed, digest, "Ready", key)["sizeBytes"] == _size(files)
        state[key]["again"] = hub.bytes_served(repo, path) - state[key]["served"]
    assert state["bad-sha"]["again"] == BAD_SHA_SIZE, state["bad-sha"]
    assert hub.bytes_served(MISSING, MISSING_SHARD) < 2 * MISSING_SIZE, state["missing"]
    _delete_pods(installed, TENANT, "bad-sha-2", "missing-2")


# --- 5: the plugin killed mid-transfer ---------------------------------------------------------


def _plugin_pid(cluster: rig.Rig) -> tuple[int, int]:
    """The node plugin container's host pid and its restart count."""
    pod = _json(cluster, "get", "pods", "-n", NAMESPACE, "-l",
                "app.kubernetes.io/component=node-plugin")["items"][0]  # fmt: skip
    status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "plugin")
    container = status["containerID"].removeprefix("containerd://")
    listed = subprocess.run(["ctr", "--address", rig.SOCK, "-n", "k8s.io", "tasks", "ls"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    for line in listed.splitlines():
        fields = line.split()
        if fields and fields[0] == container:
            return int(fields[1]), int(status["restartCount"])
    raise rig.RigError(f"no task for the plugin's container {container}:\n{listed}")


def test_interrupted_download_resumes(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    size = RESUME_FILES["model.safetensors"]
    assert isinstance(size, int)
    hub.faults(RESUME, "model.safetensors").rate = 2 * MiB  # per response
    attributes = _artifact(installed, TENANT, "resume", RESUME)
    digest = attributes["manifestDigest"]
    installed.apply(_reader_pod("resume-1", TENANT, attributes))
    installed.wait("a quarter of the file received",
                   lambda: hub.bytes_served(RESUME, "model.safetensors") >= size // 4,
                   timeout=120, namespace=TENANT, interval=0.2)  # fmt: skip
    pid, restarts = _plugin_pid(installed)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    ranges_before = len(hub.ranges())
    served_at_kill = hub.bytes_served(RESUME, "model.safetensors")
    assert served_at_kill < size
    assert not _published(installed, digest).exists()

    def restarted() -> bool:
        return _plugin_pid(installed)[1] > restarts

    installed.wait("the plugin's container restarted", restarted, timeout=120,
                   namespace=NAMESPACE)  # fmt: skip
    assert _wait_read(installed, "resume-1", TENANT) == _hub_digests(hub, RESUME, RESUME_FILES)
    # it resumed from its checkpoint: no request after the restart began at the start
    after = [r for r in hub.ranges()[ranges_before:] if r[:2] == (RESUME, "model.safetensors")]
    assert after and min(start for _, _, start, _ in after) > 0, after
    assert hub.bytes_served(RESUME, "model.safetensors") < 2 * size
    # the consumer started only once the verified tree was published
    marker = _published(installed, digest) / ".gpustack-digest"
    pod = _json(installed, "get", "pod", "resume-1", "-n", TENANT)
    started = _time(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    assert int(marker.stat().st_mtime) <= started + 1 and started >= int(killed_at), pod
    _delete_pods(installed, TENANT, "resume-1")


# --- 6: a model larger than the cache's filesystem ---------------------------------------------


def test_insufficient_disk_space(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    """A 600 MiB model on a 640 MiB filesystem (512 MiB under the high watermark) while a Pod
    uses a published model: refused before a byte is fetched, named in the Pod's events, the
    store and the progress, nothing partial left, and the published model still mounts."""
    crowd = _artifact(installed, TENANT, "crowd", CROWD)
    assert _published(installed, crowd["manifestDigest"]).exists()
    installed.apply(_reader_pod("full-keep", TENANT, crowd))
    want = _hub_digests(hub, CROWD, CROWD_FILES)
    assert _wait_read(installed, "full-keep", TENANT) == want
    served = hub.bytes_served(CROWD)
    attributes = _artifact(installed, TENANT, "huge", HUGE)
    digest = attributes["manifestDigest"]
    installed.apply(_reader_pod("huge-1", TENANT, attributes))
    message = _failed_mount(installed, "huge-1", TENANT, "(InsufficientCapacity)")
    assert "high watermark" in message, message
    entry = _wait_entry(installed, digest, "Failed", "huge")
    assert entry["reason"] == "InsufficientCapacity", entry
    assert "needs" in entry["message"] and "available" in entry["message"], entry

    def counted() -> dict[str, Any] | None:
        body = _progress(installed, TENANT, "huge")
        return body if body.get("failed") == 1 else None

    progress = installed.wait("huge's progress counts the refusal", counted, timeout=60,
                              namespace=NAMESPACE)  # fmt: skip
    assert isinstance(progress, dict)
    assert progress["failureReasons"] == [{"reason": "InsufficientCapacity", "count": 1}]
    assert hub.bytes_served(HUGE, "model.safetensors") == 0
    assert not _published(installed, digest).exists()
    # no byte of it was written, and its staging directory is gone at once
    assert _partial_files(installed, digest) == {}
    # the published model: still read by its Pod, and mounted again by a new one from the cache
    done = installed.kubectl("exec", "-n", TENANT, "full-keep", "--", "cat", "/models/config.json")
    assert done.stdout.encode() == _config(CROWD)
    installed.apply(_reader_pod("full-new", TENANT, crowd))
    assert _wait_read(installed, "full-new", TENANT) == want
    assert hub.bytes_served(CROWD) == served
    _delete_pods(installed, TENANT, "full-keep", "full-new", "huge-1")


# --- 7: a power loss right after a publish -----------------------------------------------------


def _plugin_pods(cluster: rig.Rig) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _json(cluster, "get", "pods", "-n", NAMESPACE, "-l",
                                        "app.kubernetes.io/component=node-plugin")["items"]
    return items


def _plugin_daemonset(cluster: rig.Rig) -> str:
    listed = _json(cluster, "get", "daemonsets", "-n", NAMESPACE, "-l",
                   "app.kubernetes.io/component=node-plugin")["items"]  # fmt: skip
    assert len(listed) == 1, [d["metadata"]["name"] for d in listed]
    return str(listed[0]["metadata"]["name"])


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(MiB):
            digest.update(chunk)
    return digest.hexdigest()


def test_power_loss_after_publication(installed: rig.Rig, hub: fixturehub.Hub) -> None:
    """Right after two trees turn Ready (one of its own files, then a revision linking the
    files the node stored for earlier ones) the node loses power: the plugin is frozen, the
    image file is copied (what had reached the disk; nothing the page cache still held back),
    and the node comes back on that copy after an fsck, as a machine would. Both trees are
    whole on that disk (each publish was durable before Ready, the stored files' names with
    it), an older tree whose file lost its tail in the crash is found by the start-up check
    before any mount and materialized again, and every Pod reads the hub's bytes."""
    durable = _artifact(installed, TENANT, "durable", DURABLE)
    resume = _artifact(installed, TENANT, "resume", RESUME)
    assert _published(installed, resume["manifestDigest"]).exists()
    installed.apply(_reader_pod("durable-1", TENANT, durable))
    assert _wait_read(installed, "durable-1", TENANT) == _hub_digests(hub, DURABLE, DURABLE_FILES)
    _wait_entry(installed, durable["manifestDigest"], "Ready", "durable")
    # and last, a revision whose tree links the files the node stored for the earlier ones
    three = hub.add_revision(REVISION, REVISION_3).commit
    linked = _artifact(installed, TENANT, "rev-3", REVISION, revision=three)
    installed.apply(_reader_pod("rev-3", TENANT, linked))
    want_linked = _hub_digests(hub, REVISION, REVISION_3, three)
    assert _wait_read(installed, "rev-3", TENANT) == want_linked
    _wait_entry(installed, linked["manifestDigest"], "Ready", "revision 3")
    # the power goes: no process on the node writes any more, the disk keeps what reached it
    pid, _ = _plugin_pid(installed)
    os.kill(pid, signal.SIGSTOP)
    crashed = installed.work / "crashed.img"
    subprocess.run(["cp", "--sparse=always", str(installed.work / "cache.img"), str(crashed)],
                   check=True)  # fmt: skip
    os.kill(pid, signal.SIGKILL)
    # the old node's leftovers go: its Pod, then its plugin (stopped by a node selector)
    _delete_pods(installed, TENANT, "durable-1", "rev-3")
    daemonset = _plugin_daemonset(installed)
    installed.kubectl("patch", "daemonset", "-n", NAMESPACE, daemonset, "-p", json.dumps(
        {"spec": {"template": {"spec": {"nodeSelector": {"e2e/plugin": "off"}}}}}))
    installed.wait("the node plugin stopped", lambda: not _plugin_pods(installed), timeout=120,
                   namespace=NAMESPACE)  # fmt: skip
    _unmount_cache(installed)
    # boot: fsck replays the journal, then the cache is mounted from what the disk held
    fsck = subprocess.run(["e2fsck", "-f", "-y", str(crashed)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert fsck.returncode in (0, 1), fsck.stdout + fsck.stderr
    _mount_cache(installed, crashed)
    published = _published(installed, durable["manifestDigest"])
    assert {path: _sha256(published / path) for path in DURABLE_FILES} == \
        _hub_digests(hub, DURABLE, DURABLE_FILES), "the last publish did not survive the crash"
    revised = _published(installed, linked["manifestDigest"])
    assert {path: _sha256(revised / path) for path in REVISION_3} == want_linked, \
        "the tree of stored files published last did not survive the crash"
    # an older tree lost a file's tail in the crash
    torn = _published(installed, resume["manifestDigest"]) / "model.safetensors"
    os.truncate(torn, torn.stat().st_size - MiB)
    served = {repo: hub.bytes_served(repo) for repo in (DURABLE, RESUME, REVISION)}
    installed.kubectl("patch", "daemonset", "-n", NAMESPACE, daemonset, "-p", json.dumps(
        {"spec": {"template": {"spec": {"nodeSelector": {"e2e/plugin": None}}}}}))
    # the start-up check quarantines it and, no Pod referencing it, it is removed at once (an
    # unreferenced tree that passed would be kept for ten minutes)
    installed.wait("the torn tree quarantined and removed", lambda: not torn.parent.exists(),
                   timeout=150, namespace=NAMESPACE)  # fmt: skip
    assert _published(installed, durable["manifestDigest"]).exists()
    installed.apply("---\n".join((_reader_pod("durable-2", TENANT, durable),
                                  _reader_pod("resume-2", TENANT, resume),
                                  _reader_pod("rev-3-again", TENANT, linked))))
    assert _wait_read(installed, "durable-2", TENANT) == _hub_digests(hub, DURABLE, DURABLE_FILES)
    assert _wait_read(installed, "rev-3-again", TENANT) == want_linked
    assert hub.bytes_served(REVISION) == served[REVISION], "the linked tree was fetched again"
    assert _wait_read(installed, "resume-2", TENANT) == _hub_digests(hub, RESUME, RESUME_FILES)
    assert hub.bytes_served(DURABLE) == served[DURABLE], "the durable tree was fetched again"
    # the torn file again, the whole config.json the node still stored not
    assert hub.bytes_served(RESUME) - served[RESUME] == RESUME_FILES["model.safetensors"]
    _delete_pods(installed, TENANT, "durable-2", "resume-2", "rev-3-again")
