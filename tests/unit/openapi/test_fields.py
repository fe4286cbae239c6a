"""Field errors read like Kubernetes' and become Status causes."""

from openapi import fields


def test_invalid_renders_the_value_and_the_rule() -> None:
    error = fields.invalid("spec.source.huggingFace.revision", "a b", "must not contain spaces")
    assert error.type == "FieldValueInvalid"
    assert error.message == 'Invalid value: "a b": must not contain spaces'
    assert error.value == "a b"
    assert (error.type, error.message, error.field) == (
        "FieldValueInvalid", 'Invalid value: "a b": must not contain spaces',
        "spec.source.huggingFace.revision")
    assert str(error) == 'spec.source.huggingFace.revision: Invalid value: "a b": must not ' \
                         "contain spaces"


def test_each_helper_uses_its_type_and_prefix() -> None:
    assert fields.required("spec.source").message == "Required value"
    assert fields.required("spec.source", "set one").message == "Required value: set one"
    assert fields.invalid("x", 5, "too small").message == "Invalid value: 5: too small"
    unsupported = fields.not_supported("status.models[0].state", "Gone", ["Ready", "Failed"])
    assert unsupported.type == "FieldValueNotSupported"
    assert unsupported.message == 'Unsupported value: "Gone": supported values: "Ready", "Failed"'
    assert fields.forbidden("spec", "no").message == "Forbidden: no"
    assert fields.forbidden("spec", "no").type == "FieldValueForbidden"
    assert fields.too_long("x", "a" * 9, 8).type == "FieldValueTooLong"
    assert "8 characters" in fields.too_long("x", "a" * 9, 8).message
    too_many = fields.too_many("spec.allowPatterns", 33, 32)
    assert (too_many.type, too_many.message) == (
        "FieldValueTooMany", "Too many: 33: must have at most 32 items")
    duplicate = fields.duplicate("spec.pinned[1]", "sha256:x")
    assert (duplicate.type, duplicate.message) == (
        "FieldValueDuplicate", 'Duplicate value: "sha256:x"')


def test_render_matches_kubernetes_quoting() -> None:
    assert fields.render("x") == '"x"'
    assert fields.render(True) == "true"
    assert fields.render(None) == "null"
    assert fields.render(3) == "3"
    assert fields.render(["a"]) == '["a"]'


def test_invalid_message_for_one_and_many() -> None:
    one = [fields.required("spec.source")]
    assert fields.invalid_message("ModelArtifact", "worker.gpustack.ai", "x", one) == (
        'ModelArtifact.worker.gpustack.ai "x" is invalid: spec.source: Required value')
    two = [fields.required("spec.source"), fields.forbidden("spec", "no")]
    assert fields.invalid_message("ModelArtifact", "worker.gpustack.ai", "x", two) == (
        'ModelArtifact.worker.gpustack.ai "x" is invalid: '
        "[spec.source: Required value, spec: Forbidden: no]")
    assert (two[1].type, two[1].message, two[1].field) == (
        "FieldValueForbidden", "Forbidden: no", "spec")


def test_rendered_values_are_cut_at_a_bounded_cost() -> None:
    long = fields.render("x" * 100_000)
    assert long.startswith('"' + "x" * fields.MAX_RENDERED + '"...')
    assert "100000 characters" in long and len(long) < fields.MAX_RENDERED + 40
    # a structure that would expand to ~10^12 characters renders in a few hundred
    laughs: list[object] = ["x" * 10]
    for _ in range(12):
        laughs = [laughs] * 10
    shown = fields.render(laughs)
    assert shown.endswith("... (cut)") and len(shown) <= fields.MAX_RENDERED + 10
    assert fields.render({f"k{i}": i for i in range(100_000)}).endswith("... (cut)")
    assert "digits" in fields.render(10**5000)  # str() would refuse it
    assert fields.render({"b": [1, {"c": None}], "a": 1.5}) == '{"a":1.5,"b":[1,{"c":null}]}'
    error = fields.invalid("metadata.finalizers[0]", "f" * 100_000, "is not a qualified name")
    assert len(error.message) < 400
    assert len(fields.too_long("k" * 10_000, "v", 8).field) <= fields.MAX_PATH + 3


def test_too_long_never_shows_the_value() -> None:
    assert "secret" not in fields.too_long("x", "secret" * 10, 8).message


def test_causes_are_bounded() -> None:
    many = [fields.invalid(f"metadata.labels[k{i}]", i, "bad") for i in range(1000)]
    kept = fields.bounded(many)
    assert len(kept) == fields.MAX_CAUSES
    assert kept[-1].message == f"and {1000 - fields.MAX_CAUSES + 1} more errors, not listed"
    message = fields.invalid_message("ModelArtifact", "worker.gpustack.ai", "x", many)
    assert message.count("Invalid value") == fields.MAX_CAUSES - 1
