"""Defaults come from the schema and apply only where the parent exists."""

from typing import Any

from openapi import defaults


def test_hugging_face_revision_defaults_to_main() -> None:
    obj: dict[str, Any] = {"spec": {"source": {"huggingFace": {"repository": "a/b"}}}}
    defaults.apply_defaults("ModelArtifact", obj)
    assert obj["spec"]["source"]["huggingFace"]["revision"] == "main"
    assert "modelScope" not in obj["spec"]["source"]
    assert "allowPatterns" not in obj["spec"]


def test_model_scope_revision_defaults_to_master() -> None:
    obj: dict[str, Any] = {"spec": {"source": {"modelScope": {"repository": "a/b"}}}}
    defaults.apply_defaults("ModelArtifact", obj)
    assert obj["spec"]["source"]["modelScope"]["revision"] == "master"


def test_an_explicit_revision_is_kept() -> None:
    obj: dict[str, Any] = {"spec": {"source": {"huggingFace": {"repository": "a/b",
                                                               "revision": "v1.0"}}}}
    defaults.apply_defaults("ModelArtifact", obj)
    assert obj["spec"]["source"]["huggingFace"]["revision"] == "v1.0"


def test_claim_and_image_sources_get_nothing() -> None:
    obj: dict[str, Any] = {"spec": {"source": {"persistentVolumeClaim": {"claimName": "c"}}}}
    defaults.apply_defaults("ModelArtifact", obj)
    assert obj == {"spec": {"source": {"persistentVolumeClaim": {"claimName": "c"}}}}


def test_a_model_artifact_without_spec_is_left_for_validation() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "x"}}
    defaults.apply_defaults("ModelArtifact", obj)
    assert obj == {"metadata": {"name": "x"}}


def test_node_model_store_spec_is_filled_from_nothing() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "node-a"}}
    defaults.apply_defaults("NodeModelStore", obj)
    assert obj["spec"] == {
        "watermarks": {"highPercent": 80, "lowPercent": 70},
        "download": {"concurrency": 8, "bytesPerSecond": 0},
        "hub": {"huggingFaceEndpoint": "https://huggingface.co",
                "modelScopeEndpoint": "https://www.modelscope.cn"},
    }
    assert "status" not in obj


def test_node_model_store_partial_values_are_kept() -> None:
    obj: dict[str, Any] = {"spec": {"watermarks": {"highPercent": 60},
                                    "hub": {"huggingFaceEndpoint": "https://mirror.example"}}}
    defaults.apply_defaults("NodeModelStore", obj)
    assert obj["spec"]["watermarks"] == {"highPercent": 60, "lowPercent": 70}
    assert obj["spec"]["hub"]["huggingFaceEndpoint"] == "https://mirror.example"
    assert obj["spec"]["download"] == {"concurrency": 8, "bytesPerSecond": 0}


def test_null_is_replaced_by_the_default_and_defaults_are_fresh_copies() -> None:
    first: dict[str, Any] = {"spec": {"watermarks": None}}
    second: dict[str, Any] = {}
    defaults.apply_defaults("NodeModelStore", first)
    defaults.apply_defaults("NodeModelStore", second)
    assert first["spec"]["watermarks"] == {"highPercent": 80, "lowPercent": 70}
    first["spec"]["watermarks"]["highPercent"] = 10
    assert second["spec"]["watermarks"]["highPercent"] == 80


def test_defaulting_is_idempotent() -> None:
    obj: dict[str, Any] = {}
    defaults.apply_defaults("NodeModelStore", obj)
    again = {"spec": dict(obj["spec"])}
    defaults.apply_defaults("NodeModelStore", again)
    assert again == obj
