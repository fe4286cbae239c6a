"""hub.huggingface against a MockTransport: error mapping, pagination, masked digests."""

from __future__ import annotations

import json

import httpx
import pytest

from hub import errors, huggingface

ENDPOINT = "https://hub.example"
COMMIT = "c" * 40
SHA256 = "5" * 64
GITSHA1 = "1" * 40


def _hf(handler: httpx.MockTransport) -> tuple[httpx.AsyncClient, huggingface.HuggingFace]:
    client = httpx.AsyncClient(transport=handler, follow_redirects=False)
    return client, huggingface.HuggingFace(client, ENDPOINT)


def _answer(status: int, headers: dict[str, str] | None = None) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, headers=headers or {}))


@pytest.mark.parametrize(
    ("status", "headers", "reason", "retry_after"),
    [
        (404, {"x-error-code": "RevisionNotFound"}, "RevisionNotFound", None),
        (404, {"x-error-code": "RepoNotFound"}, "AccessDenied", None),
        (401, {"x-error-code": "GatedRepo"}, "AccessDenied", None),
        (401, {}, "AccessDenied", None),
        (403, {}, "AccessDenied", None),
        (404, {}, "AccessDenied", None),
        (404, {"x-error-code": "EntryNotFound"}, "EntryNotFound", None),
        (429, {"retry-after": "12"}, "SourceUnavailable", 12.0),
        (429, {"ratelimit": '"api";r=0;t=55'}, "SourceUnavailable", 56.0),
        (500, {}, "SourceUnavailable", None),
        (503, {}, "SourceUnavailable", None),
        (400, {}, "InvalidRequest", None),
    ],
)
async def test_error_mapping(
    status: int, headers: dict[str, str], reason: str, retry_after: float | None
) -> None:
    client, hf = _hf(_answer(status, headers))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision("org/model", "main", token="secret-token")
    assert caught.value.reason == reason
    assert caught.value.status == status
    assert caught.value.retry_after == retry_after
    assert "secret-token" not in caught.value.message
    if reason == "AccessDenied":
        assert "does not exist or is not accessible" in caught.value.message


async def test_resolve_revision_returns_the_commit_and_quotes_the_revision() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, json={"id": "org/model", "sha": COMMIT})

    client, hf = _hf(httpx.MockTransport(handler))
    async with client:
        assert await hf.resolve_revision("org/model", "refs/pr/1", token=None) == COMMIT
    assert seen == ["/api/models/org/model/revision/refs%2Fpr%2F1"]


async def test_a_commit_revision_must_be_confirmed() -> None:
    other = "d" * 40
    client, hf = _hf(
        httpx.MockTransport(lambda r: httpx.Response(200, json={"id": "x", "sha": other}))
    )
    async with client:
        assert await hf.resolve_revision("org/model", other, token=None) == other
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision("org/model", COMMIT, token=None)
    assert caught.value.reason == "SourceUnavailable"


@pytest.mark.parametrize("repo", ["model", "../x/y", "org/model/extra", "org/mo del"])
async def test_invalid_repository_ids(repo: str) -> None:
    client, hf = _hf(_answer(200))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.resolve_revision(repo, "main", token=None)
    assert caught.value.reason == "InvalidRequest"


def _lfs(path: str, size: int, oid: str = SHA256) -> dict[str, object]:
    return {"type": "file", "path": path, "oid": GITSHA1, "size": size,
            "lfs": {"oid": oid, "size": size, "pointerSize": 134}}


async def test_list_files_follows_link_pagination() -> None:
    pages = {
        "0": [{"type": "directory", "path": "sub", "oid": GITSHA1, "size": 0},
              {"type": "file", "path": "config.json", "oid": GITSHA1, "size": 10}],
        "1": [_lfs("sub/model.safetensors", 1000)],
    }
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        cursor = request.url.params.get("cursor", "0")
        headers = {}
        if cursor == "0":
            next_url = f"{ENDPOINT}/api/models/org/model/tree/{COMMIT}?recursive=true&cursor=1"
            headers["link"] = f'<{next_url}>; rel="next"'
        return httpx.Response(200, json=pages[cursor], headers=headers)

    client, hf = _hf(httpx.MockTransport(handler))
    async with client:
        listed = await hf.list_files("org/model", COMMIT, token=None)
    assert [(f.path, f.algorithm, f.hexdigest, f.size, f.lfs) for f in listed] == [
        ("config.json", "gitsha1", GITSHA1, 10, False),
        ("sub/model.safetensors", "sha256", SHA256, 1000, True),
    ]
    assert seen[0] == f"{ENDPOINT}/api/models/org/model/tree/{COMMIT}?recursive=true&expand=false"
    assert len(seen) == 2


async def test_a_next_page_on_another_origin_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json=[], headers={"link": '<https://evil.example/tree?cursor=1>; rel="next"'}
        )

    client, hf = _hf(httpx.MockTransport(handler))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.list_files("org/model", COMMIT, token="t")
    assert caught.value.reason == "SourceUnavailable"


async def test_masked_lfs_digest_is_access_denied() -> None:
    body = [_lfs("model.safetensors", 10, oid="*" * 64)]
    client, hf = _hf(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.list_files("org/model", COMMIT, token=None)
    assert caught.value.reason == "AccessDenied"


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "file", "path": "a", "oid": "nothex", "size": 1},
        {"type": "file", "path": "a", "oid": GITSHA1},
        {"type": "file", "path": "a", "oid": GITSHA1, "size": 1, "lfs": {"oid": "x", "size": 1}},
        {"type": "file", "path": "a", "oid": GITSHA1, "size": 1, "lfs": {"oid": SHA256, "size": 2}},
        {"type": "submodule", "path": "a", "oid": GITSHA1, "size": 1},
        "not an object",
    ],
)
async def test_malformed_entries_are_source_unavailable(entry: object) -> None:
    client, hf = _hf(
        httpx.MockTransport(lambda r: httpx.Response(200, content=json.dumps([entry])))
    )
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.list_files("org/model", COMMIT, token=None)
    assert caught.value.reason == "SourceUnavailable"


async def test_list_files_needs_a_commit() -> None:
    client, hf = _hf(_answer(200))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await hf.list_files("org/model", "main", token=None)
    assert caught.value.reason == "InvalidRequest"


async def test_check_access_does_not_follow_and_maps_404_to_access_denied() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method + " " + request.url.path)
        if request.url.path.endswith("lfs.bin"):
            return httpx.Response(302, headers={"location": "https://cdn.example/x"})
        return httpx.Response(404, headers={"x-error-code": "EntryNotFound"})

    client, hf = _hf(httpx.MockTransport(handler))
    async with client:
        await hf.check_access("org/model", COMMIT, "lfs.bin", token=None)
        with pytest.raises(errors.HubError) as caught:
            await hf.check_access("org/model", COMMIT, "gone.bin", token=None)
    assert caught.value.reason == "AccessDenied"
    assert seen == [
        f"HEAD /api/models/org/model/resolve/{COMMIT}/lfs.bin",
        f"HEAD /api/models/org/model/resolve/{COMMIT}/gone.bin",
    ]
