from apiserver import errors


def test_status_body_carries_code_reason_and_causes() -> None:
    err = errors.Invalid(
        'ModelArtifact.worker.gpustack.ai "x" is invalid',
        details={
            "name": "x",
            "kind": "ModelArtifact",
            "causes": [{"field": "spec", "reason": "FieldValueInvalid", "message": "m"}],
        },
    )
    body = err.body()
    assert body["kind"] == "Status"
    assert body["code"] == 422
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec"


def test_not_found_is_404() -> None:
    assert errors.NotFound("gone").body()["code"] == 404
