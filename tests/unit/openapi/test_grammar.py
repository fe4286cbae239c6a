"""One table per shared grammar, judged by every consumer: they must all agree with the owner.

Admission (what the API accepts), the hub clients (what they will fetch), the schema pattern, the
node plugin's cache layout and the label-selector parser all take their rules from
``openapi.grammar``/``openapi.names``; a row that one of them judges differently fails here.
"""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import errors
from apiserver.registry import selectors
from devkit import admitting as admission
from hub import errors as hub_errors
from hub import source
from nodeplugin.cache import layout
from openapi import grammar, names, sources, validation
from openapi import schema as schemas

DIGEST = "sha256:" + "0123456789abcdef" * 4

REPOSITORIES = [
    ("Qwen/Qwen2.5-7B-Instruct", True),
    ("_org/model_", True),
    ("org_x/model.v2-final", True),
    ("a/b", True),
    ("1/2", True),
    ("a" * 96 + "/" + "b" * 96, True),
    ("a" * 97 + "/b", False),
    ("gpt2", False),
    ("a/b/c", False),
    ("a//b", False),
    ("/a", False),
    ("-a/b", False),
    ("a/b.", False),
    ("a/.b", False),
    ("a/b--c", False),
    ("a/b..c", False),
    ("a b/c", False),
    ("a/b?x", False),
    ("a/b\n", False),
    ("ä/b", False),
]

REVISIONS = [
    ("main", True),
    ("master", True),
    ("refs/pr/12", True),
    ("v1.0.0", True),
    ("7ae557604adf67be50417f59c2c2f167def9a775", True),
    ("x" * 256, True),
    ("", False),
    ("x" * 257, False),
    ("ma in", False),
    ("main\n", False),
    ("a\x7fb", False),
    ("../etc", False),
    ("a..b", False),
    ("--upload-pack=x", False),
    ("/main", False),
    ("main/", False),
    ("v1.", False),
    ("a@{1}", False),
    ("a~1", False),
    ("a^", False),
    ("a:b", False),
    ("a?", False),
    ("a*", False),
    ("a[", False),
    ("a\\b", False),
]

DIGESTS = [
    (DIGEST, True),
    ("sha256:" + "a" * 64, True),
    ("sha256:" + "A" * 64, False),
    ("sha256:" + "a" * 63, False),
    ("sha256:" + "a" * 65, False),
    ("sha512:" + "a" * 64, False),
    ("sha256:" + "a" * 64 + "\n", False),
    ("a" * 64, False),
    ("", False),
]


def _hub_accepts_repository(repository: str) -> bool:
    try:
        source.check_repo(repository)
    except hub_errors.HubError as exc:
        assert exc.reason == "InvalidRequest"
        return False
    return True


def _hub_accepts_revision(revision: str) -> bool:
    try:
        source.check_revision(revision)
    except hub_errors.HubError as exc:
        assert exc.reason == "InvalidRequest"
        return False
    return True


def _artifact(hub: str, **member: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x"}, "spec": {"source": {hub: member}}}


@pytest.mark.parametrize(("repository", "valid"), REPOSITORIES)
@pytest.mark.parametrize("hub", sources.HUB_KINDS)
def test_repository_grammar_is_one(repository: str, valid: bool, hub: str) -> None:
    assert grammar.is_repository(repository) is valid
    admitted = admission.admit_create(_artifact(hub, repository=repository)) == []
    assert admitted is valid, "admission disagrees with the grammar"
    assert _hub_accepts_repository(repository) is valid, "the hub client disagrees"


@pytest.mark.parametrize(("revision", "valid"), REVISIONS)
@pytest.mark.parametrize("hub", sources.HUB_KINDS)
def test_revision_grammar_is_one(revision: str, valid: bool, hub: str) -> None:
    assert (grammar.revision_problem(revision) == "") is valid
    admitted = admission.admit_create(_artifact(hub, repository="a/b", revision=revision)) == []
    assert admitted is valid, "admission disagrees with the grammar"
    assert _hub_accepts_revision(revision) is valid, "the hub client disagrees"


@pytest.mark.parametrize(("digest", "valid"), DIGESTS)
def test_digest_grammar_is_one(digest: str, valid: bool) -> None:
    assert grammar.is_digest(digest) is valid
    # the schema's pattern (expectedDigest, pinned, status digests), as validation applies it
    spec = {"source": {"huggingFace": {"repository": "a/b"}}, "expectedDigest": digest}
    assert (validation.validate("ModelArtifact", {"spec": spec}) == []) is valid
    # the node cache's layout
    try:
        layout.hex_of(digest)
        in_layout = True
    except layout.LayoutError:
        in_layout = False
    assert in_layout is valid
    # an image reference pinned by it
    image = {"metadata": {"name": "x"},
             "spec": {"source": {"image": {"reference": f"example.com/m@{digest}"}}}}
    assert (admission.admit_create(image) == []) is valid


def test_the_schema_patterns_come_from_the_grammar() -> None:
    digests = [schemas.MODEL_ARTIFACT_SPEC["properties"]["expectedDigest"]["pattern"],
               schemas.NODE_MODEL_STORE_SPEC["properties"]["pinned"]["items"]["pattern"]]
    assert digests == [grammar.DIGEST_PATTERN] * 2
    repository = schemas.MODEL_ARTIFACT_SPEC["properties"]["source"]["properties"][
        "huggingFace"]["properties"]["repository"]
    assert repository["maxLength"] == grammar.REPOSITORY_MAX == 193


LABEL_KEYS = [
    ("app", True),
    ("example.com/app", True),
    ("a.b-c_d", True),
    ("x" * 63, True),
    ("x" * 64, False),
    ("example.com/" + "x" * 64, False),
    ("/app", False),
    ("example.com/", False),
    ("Example.com/app", False),
    ("a/b/c", False),
    ("-app", False),
    ("app-", False),
    ("bad key", False),
]


@pytest.mark.parametrize(("key", "valid"), LABEL_KEYS)
def test_label_key_grammar_is_one(key: str, valid: bool) -> None:
    assert (names.qualified_name_problems(key) == []) is valid
    try:
        selectors.parse_labels(key)
        parsed = True
    except errors.BadRequest:
        parsed = False
    assert parsed is valid, "the label selector parser disagrees"


@pytest.mark.parametrize(
    ("name", "label", "subdomain"),
    [("a", True, True), ("a-b", True, True), ("a.b", False, True), ("0abc", True, True),
     ("A", False, False), ("-a", False, False), ("a-", False, False), ("a_b", False, False),
     ("x" * 63, True, True), ("x" * 64, False, True), ("x" * 253, False, True),
     ("x" * 254, False, False), ("a..b", False, False), ("", False, False)],
)
def test_dns_names(name: str, label: bool, subdomain: bool) -> None:
    assert names.is_dns_label(name) is label
    assert (names.dns_label_problems(name) == []) is label
    assert names.is_dns_subdomain(name) is subdomain
    assert (names.dns_subdomain_problems(name) == []) is subdomain
    claim = _artifact("persistentVolumeClaim", claimName=name)
    assert (admission.admit_create(claim) == []) is label, "claim names"
    secret = _artifact("huggingFace", repository="a/b", secretRef={"name": name})
    assert (admission.admit_create(secret) == []) is subdomain, "Secret names"
