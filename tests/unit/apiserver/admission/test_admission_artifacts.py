"""ModelArtifact admission (the chain's artifact rules after the schema): each rule accepted and
refused, with the field path and the reason."""

import copy
from typing import Any

import pytest

from devkit import admitting as admission
from openapi import grammar

DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGE = "registry.example.com:5000/team/qwen@" + DIGEST


def hub(member: dict[str, Any], kind: str = "huggingFace", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "team-a"},
            "spec": {"source": {kind: member}, **spec}}


def refusals(obj: dict[str, Any], **kwargs: Any) -> list[tuple[str, str]]:
    return [(e.field, e.type) for e in admission.admit_create(obj, **kwargs)]


@pytest.mark.parametrize(
    "obj",
    [
        hub({"repository": "Qwen/Qwen2.5-7B-Instruct"}),
        hub({"repository": "Qwen/Qwen2.5-7B-Instruct", "revision": "main",
             "secretRef": {"name": "hf-token"}}),
        hub({"repository": "org_x/model.v2-final", "revision": "refs/pr/1"}),
        hub({"repository": "a/b", "revision": "7ae557604adf67be50417f59c2c2f167def9a775"}),
        hub({"repository": "qwen/Qwen2.5-7B-Instruct", "revision": "v1.0.0"}, "modelScope"),
        hub({"repository": "a/b"}, allowPatterns=["*.safetensors", "tokenizer*"],
            ignorePatterns=["original/"], expectedDigest=DIGEST),
        hub({"repository": "a/b", "secretRef": {"name": "tokens.team-a"}}, "modelScope",
            expectedDigest=DIGEST),
        hub({"claimName": "models"}, "persistentVolumeClaim"),
        hub({"claimName": "models", "path": "qwen/7b"}, "persistentVolumeClaim"),
        hub({"claimName": "models", "path": ""}, "persistentVolumeClaim"),
        hub({"reference": IMAGE}, "image"),
        hub({"reference": "qwen@" + DIGEST}, "image"),
        hub({"reference": "ghcr.io/a/b:v1@" + DIGEST}, "image"),
    ],
)
def test_accepted(obj: dict[str, Any]) -> None:
    assert admission.admit_create(obj) == []


@pytest.mark.parametrize(
    ("obj", "field", "error_type"),
    [
        # exactly one source
        ({"spec": {"source": {}}}, "spec.source", "FieldValueRequired"),
        ({"spec": {"source": {"huggingFace": {"repository": "a/b"},
                              "modelScope": {"repository": "a/b"}}}},
         "spec.source.modelScope", "FieldValueForbidden"),
        ({"spec": {"source": {"huggingFace": {"repository": "a/b"},
                              "image": {"reference": IMAGE}}}},
         "spec.source.image", "FieldValueForbidden"),
        # repositories
        (hub({"repository": "just-a-name"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/b/c"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a//b"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "-a/b"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/b."}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/b--c"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/b..c"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a b/c"}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/" + "b" * 97}), "spec.source.huggingFace.repository",
         "FieldValueInvalid"),
        (hub({"repository": "a/b?x"}, "modelScope"), "spec.source.modelScope.repository",
         "FieldValueInvalid"),
        # revisions
        (hub({"repository": "a/b", "revision": "ma in"}), "spec.source.huggingFace.revision",
         "FieldValueInvalid"),
        (hub({"repository": "a/b", "revision": "main\n"}), "spec.source.huggingFace.revision",
         "FieldValueInvalid"),
        (hub({"repository": "a/b", "revision": "../etc"}), "spec.source.huggingFace.revision",
         "FieldValueInvalid"),
        (hub({"repository": "a/b", "revision": "--upload-pack=x"}),
         "spec.source.huggingFace.revision", "FieldValueInvalid"),
        (hub({"repository": "a/b", "revision": "main:x"}, "modelScope"),
         "spec.source.modelScope.revision", "FieldValueInvalid"),
        (hub({"repository": "a/b", "revision": "x" * 257}), "spec.source.huggingFace.revision",
         "FieldValueTooLong"),
        # secrets
        (hub({"repository": "a/b", "secretRef": {"name": "HF_Token"}}),
         "spec.source.huggingFace.secretRef.name", "FieldValueInvalid"),
        (hub({"repository": "a/b", "secretRef": {}}),
         "spec.source.huggingFace.secretRef.name", "FieldValueRequired"),
        # patterns: count and length come from the schema, the source rule from admission
        (hub({"repository": "a/b"}, allowPatterns=["*"] * 33), "spec.allowPatterns",
         "FieldValueTooMany"),
        (hub({"repository": "a/b"}, ignorePatterns=["x" * 257]), "spec.ignorePatterns[0]",
         "FieldValueTooLong"),
        (hub({"repository": "a/b"}, allowPatterns=[""]), "spec.allowPatterns[0]",
         "FieldValueInvalid"),
        (hub({"repository": "a/b"}, allowPatterns=["a\tb"]), "spec.allowPatterns[0]",
         "FieldValueInvalid"),
        (hub({"claimName": "models"}, "persistentVolumeClaim", allowPatterns=["*.json"]),
         "spec.allowPatterns", "FieldValueForbidden"),
        (hub({"reference": IMAGE}, "image", ignorePatterns=["x/"]),
         "spec.ignorePatterns", "FieldValueForbidden"),
        # claims
        (hub({"claimName": "Models"}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.claimName", "FieldValueInvalid"),
        (hub({"claimName": "a.b"}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.claimName", "FieldValueInvalid"),
        (hub({"claimName": "m" * 64}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.claimName", "FieldValueTooLong"),
        (hub({"claimName": "models", "path": "/qwen"}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.path", "FieldValueInvalid"),
        (hub({"claimName": "models", "path": "qwen/../../etc"}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.path", "FieldValueInvalid"),
        (hub({"claimName": "models", "path": ".."}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.path", "FieldValueInvalid"),
        (hub({"claimName": "models", "path": "a\x00b"}, "persistentVolumeClaim"),
         "spec.source.persistentVolumeClaim.path", "FieldValueInvalid"),
        # images
        (hub({"reference": "registry.example.com/team/qwen:v1"}, "image"),
         "spec.source.image.reference", "FieldValueInvalid"),
        (hub({"reference": "registry.example.com/team/qwen"}, "image"),
         "spec.source.image.reference", "FieldValueInvalid"),
        (hub({"reference": "qwen@sha256:abc"}, "image"),
         "spec.source.image.reference", "FieldValueInvalid"),
        (hub({"reference": "qwen@sha512:" + "a" * 128}, "image"),
         "spec.source.image.reference", "FieldValueInvalid"),
        (hub({"reference": "Team/Qwen@" + DIGEST}, "image"),
         "spec.source.image.reference", "FieldValueInvalid"),
        # expectedDigest
        (hub({"repository": "a/b"}, expectedDigest="sha256:abc"), "spec.expectedDigest",
         "FieldValueInvalid"),
        (hub({"claimName": "models"}, "persistentVolumeClaim", expectedDigest=DIGEST),
         "spec.expectedDigest", "FieldValueForbidden"),
        (hub({"reference": IMAGE}, "image", expectedDigest=DIGEST),
         "spec.expectedDigest", "FieldValueForbidden"),
    ],
)
def test_refused(obj: dict[str, Any], field: str, error_type: str) -> None:
    assert refusals(obj) == [(field, error_type)]


def test_a_tag_is_refused_and_the_message_says_why() -> None:
    [error] = admission.admit_create(hub({"reference": "example.com/qwen:latest"}, "image"))
    assert error.message.startswith('Invalid value: "example.com/qwen:latest": must be pinned '
                                    "by digest")
    assert "a tag is mutable" in error.message


def test_the_second_source_message_names_the_first() -> None:
    obj = {"spec": {"source": {"huggingFace": {"repository": "a/b"},
                               "persistentVolumeClaim": {"claimName": "c"}}}}
    [error] = admission.admit_create(obj)
    assert "exactly one source" in error.message and "huggingFace" in error.message


def test_one_cause_per_field_when_the_schema_already_refused_it() -> None:
    obj = hub({"repository": "a b/" + "c" * 200})
    assert refusals(obj) == [("spec.source.huggingFace.repository", "FieldValueTooLong")]


def test_image_sources_need_the_image_volume_floor() -> None:
    obj = hub({"reference": IMAGE}, "image")
    assert admission.admit_create(obj, cluster_version=(1, 35)) == []
    assert admission.admit_create(obj, cluster_version=(1, 36)) == []
    [old] = admission.admit_create(obj, cluster_version=(1, 34))
    assert (old.field, old.type) == ("spec.source.image", "FieldValueForbidden")
    assert "1.35" in old.message and "1.34" in old.message
    assert "persistentVolumeClaim" in old.message
    [unknown] = admission.admit_create(obj, cluster_version=None)
    assert "could not be read" in unknown.message
    # the floor concerns image sources only
    assert admission.admit_create(hub({"repository": "a/b"}), cluster_version=None) == []


def test_spec_is_immutable_but_metadata_is_not() -> None:
    old = hub({"repository": "a/b", "revision": "main"})
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    new["status"] = {"observedGeneration": 4}
    assert admission.admit_update(old, new) == []
    new["spec"]["source"]["huggingFace"]["revision"] = "v2"
    [error] = admission.admit_update(old, new)
    assert (error.field, error.type) == ("spec", "FieldValueForbidden")
    assert "cannot change after creation" in error.message
    assert "create a new ModelArtifact" in error.message


def test_an_update_that_only_spells_out_a_default_is_no_change() -> None:
    old = hub({"repository": "a/b", "revision": "main"})
    new = hub({"repository": "a/b"})
    assert admission.admit_update(old, new) == []
    assert admission.admit_update(new, old) == []


def test_update_runs_schema_validation_too() -> None:
    old = hub({"repository": "a/b"})
    new = copy.deepcopy(old)
    new["status"] = {"resolved": {"fileCount": -1}}
    assert [(e.field, e.type) for e in admission.admit_update(old, new)] == [
        ("status.resolved.fileCount", "FieldValueInvalid")]


def test_node_counts_written_back_are_dropped_before_any_check() -> None:
    """``status.nodes`` is computed when read: a client writing back what it read (even a value
    the schema would refuse) stores none, and nothing else in the status is touched."""
    old = hub({"repository": "a/b"})
    new = copy.deepcopy(old)
    new["status"] = {"nodes": {"ready": -1}, "observedGeneration": 1}
    assert admission.admit_update(old, new) == []
    assert new["status"] == {"observedGeneration": 1}


@pytest.mark.parametrize(
    ("revision", "ok"),
    [("main", True), ("refs/pr/12", True), ("v1.0", True), ("a..b", False), ("a b", False),
     ("-x", False), ("x/", False), ("x.", False), ("a@{1}", False), ("a~1", False),
     ("a^", False), ("a*", False), ("a[", False), ("a\\b", False)],
)
def test_revision_rules(revision: str, ok: bool) -> None:
    assert (grammar.revision_problem(revision) == "") is ok
