"""Filling a Pod's model volumes from the artifact each names (``openapi.podvolumes``): only what
the Pod left out, only from an artifact the plugin would mount, warnings for the rest."""

from __future__ import annotations

from typing import Any

import jsonpatch

from openapi import podvolumes, volume

DIGEST = "sha256:" + "ab" * 32
UID = "0b6f7a4e-5f0e-4a53-9d1c-3c1b0e1f2a3b"


def artifact(*, resolved: bool = True, digest: str = DIGEST,
             source: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [
        {"type": "Resolved", "status": "True" if resolved else "False",
         "reason": "Resolved" if resolved else "Resolving"}]}
    if digest:
        status["resolved"] = {"manifestDigest": digest}
    return {"metadata": {"name": "qwen", "namespace": "team", "uid": UID},
            "spec": {"source": source or {"huggingFace": {"repository": "Qwen/Qwen2-0.5B"}}},
            "status": status}


def pod(*attributes: dict[str, str] | None, other: bool = True) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = []
    if other:
        volumes.append({"name": "scratch", "emptyDir": {}})
    for index, found in enumerate(attributes):
        csi: dict[str, Any] = {"driver": volume.DRIVER, "readOnly": True}
        if found is not None:
            csi["volumeAttributes"] = found
        volumes.append({"name": f"model-{index}", "csi": csi})
    volumes.append({"name": "foreign", "csi": {"driver": "other.csi.example.com",
                                                "volumeAttributes": {"artifact": "qwen"}}})
    return {"metadata": {"name": "p"}, "spec": {"containers": [], "volumes": volumes}}


def lookup(found: dict[str, Any] | None) -> podvolumes.Lookup:
    return lambda name: found if name == "qwen" else None


def filled(original: dict[str, Any], done: podvolumes.Fill) -> list[dict[str, Any]]:
    patched: dict[str, Any] = jsonpatch.apply_patch(original, done.operations)
    return patched["spec"]["volumes"]


def test_a_volume_naming_only_its_artifact_gets_uid_and_digest() -> None:
    original = pod({"artifact": "qwen"})
    done = podvolumes.fill(original, "team", lookup(artifact()))
    assert done.warnings == []
    assert filled(original, done)[1]["csi"]["volumeAttributes"] == {
        "artifact": "qwen", "artifactUID": UID, "manifestDigest": DIGEST}
    # the other volumes, this driver's or not, are untouched
    assert all(op["path"].startswith("/spec/volumes/1/") for op in done.operations)


def test_a_value_the_pod_set_is_never_changed() -> None:
    original = pod({"artifact": "qwen", "artifactUID": UID},
                   {"artifact": "qwen", "artifactUID": "someone-else", "manifestDigest": ""})
    done = podvolumes.fill(original, "team", lookup(artifact()))
    volumes = filled(original, done)
    assert volumes[1]["csi"]["volumeAttributes"]["manifestDigest"] == DIGEST
    assert volumes[2]["csi"]["volumeAttributes"] == {
        "artifact": "qwen", "artifactUID": "someone-else", "manifestDigest": DIGEST}
    assert len(done.warnings) == 1 and "someone-else" in done.warnings[0]
    assert "refuses the mount" in done.warnings[0]
    # both set: nothing to do, not even a lookup
    complete = pod({"artifact": "qwen", "artifactUID": UID, "manifestDigest": DIGEST})
    assert podvolumes.fill(complete, "team", lookup(None)) == podvolumes.Fill()


def test_missing_or_unusable_artifacts_leave_the_pod_unchanged_with_a_warning() -> None:
    original = pod({"artifact": "qwen"})
    for found, words in [
        (None, "no ModelArtifact 'qwen' in namespace 'team'"),
        (artifact(resolved=False, digest=""), "not resolved yet (reason Resolving)"),
        (artifact(digest=""), "not resolved yet"),
        (artifact(source={"persistentVolumeClaim": {"claimName": "c"}}),
         "persistentVolumeClaim source"),
    ]:
        done = podvolumes.fill(original, "team", lookup(found))
        assert done.operations == [], words
        assert len(done.warnings) == 1 and words in done.warnings[0], done.warnings


def test_a_volume_without_an_artifact_attribute_is_warned_about() -> None:
    done = podvolumes.fill(pod(None, {}), "team", lookup(artifact()))
    assert done.operations == []
    assert len(done.warnings) == 2
    assert all("names no artifact attribute" in w for w in done.warnings)


def test_warnings_are_bounded_and_names_cut() -> None:
    long = "x" * 5000
    many = pod(*[{"artifact": long} for _ in range(40)])
    done = podvolumes.fill(many, "team", lookup(None))
    assert len(done.warnings) == podvolumes.MAX_WARNINGS
    assert done.warnings[-1] == "... and 33 more warnings"
    assert all(len(w) < 1000 for w in done.warnings)


def test_digests_are_distinct_and_in_order() -> None:
    other = "sha256:" + "cd" * 32
    found = pod({"artifact": "a", "manifestDigest": other}, {"artifact": "b"},
                {"artifact": "c", "manifestDigest": DIGEST}, {"manifestDigest": other})
    assert podvolumes.digests(found) == [other, DIGEST]
    assert podvolumes.model_volumes({"spec": {"volumes": "not a list"}}) == []
