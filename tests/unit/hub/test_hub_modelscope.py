"""hub.modelscope against a MockTransport: the envelope, error codes, truncation re-listing."""

from __future__ import annotations

import httpx
import pytest

from hub import errors, modelscope

ENDPOINT = "https://ms.example"
COMMIT = "e" * 40


def _ms(
    handler: httpx.MockTransport, **options: int
) -> tuple[httpx.AsyncClient, modelscope.ModelScope]:
    client = httpx.AsyncClient(transport=handler, follow_redirects=False)
    return client, modelscope.ModelScope(client, ENDPOINT, **options)


def _envelope(data: object, code: int = 200) -> dict[str, object]:
    return {"Code": code, "Data": data, "Message": "m", "Success": code == 200}


def _blob(path: str, size: int = 1, sha: str | None = "a" * 64) -> dict[str, object]:
    entry: dict[str, object] = {"Path": path, "Name": path.rsplit("/", 1)[-1], "Type": "blob",
                                "Size": size, "IsLFS": False}
    if sha is not None:
        entry["Sha256"] = sha
    return entry


def _tree(path: str) -> dict[str, object]:
    return {"Path": path, "Name": path.rsplit("/", 1)[-1], "Type": "tree", "Size": 0}


class FakeTree:
    """Answers repo/files like ModelScope, truncating every answer at ``limit`` entries."""

    def __init__(self, paths: list[str], limit: int) -> None:
        self.paths = sorted(paths)
        self.limit = limit
        self.queries: list[tuple[str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        root = request.url.params.get("Root", "")
        recursive = request.url.params["Recursive"]
        assert request.url.params["Revision"] == COMMIT
        self.queries.append((root, recursive))
        prefix = root + "/" if root else ""
        dirs = sorted({"/".join(p.split("/")[:i]) for p in self.paths
                       for i in range(1, p.count("/") + 1)})
        entries = [_tree(d) for d in dirs] + [_blob(p) for p in self.paths]
        kept = [
            e for e in entries
            if str(e["Path"]).startswith(prefix)
            and (recursive == "True" or "/" not in str(e["Path"])[len(prefix):])
        ]
        return httpx.Response(200, json=_envelope({"Files": kept[: self.limit]}))


async def test_untruncated_listing_is_one_request() -> None:
    tree = FakeTree(["a.json", "d/b.bin"], limit=3000)
    client, ms = _ms(httpx.MockTransport(tree))
    async with client:
        listed = await ms.list_files("org/model", COMMIT, token=None)
    assert sorted(f.path for f in listed) == ["a.json", "d/b.bin"]
    assert all(f.algorithm == "sha256" for f in listed)
    assert tree.queries == [("", "True")]


async def test_a_full_page_is_relisted_per_directory() -> None:
    paths = ["top.txt", "d1/a", "d1/b", "d1/c", "d2/x", "d2/deep/y", "d2/deep/z", "d2/deep/w"]
    tree = FakeTree(paths, limit=4)
    client, ms = _ms(httpx.MockTransport(tree), truncation_limit=4)
    async with client:
        listed = await ms.list_files("org/model", COMMIT, token=None)
    assert sorted(f.path for f in listed) == sorted(paths)
    assert ("", "False") in tree.queries and ("d2", "False") in tree.queries


async def test_a_directory_with_too_many_children_refuses() -> None:
    tree = FakeTree(["d/1", "d/2", "d/3", "d/4"], limit=3)
    client, ms = _ms(httpx.MockTransport(tree), truncation_limit=3)
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await ms.list_files("org/model", COMMIT, token=None)
    assert caught.value.reason == "SourceUnavailable"
    assert "d" in caught.value.message


async def test_every_file_needs_a_sha256() -> None:
    body = _envelope({"Files": [_blob("a.bin", sha=None)]})
    client, ms = _ms(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await ms.list_files("org/model", COMMIT, token=None)
    assert caught.value.reason == "SourceUnavailable"


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        (404, 10990101004, "RevisionNotFound"),
        (200, 10990101004, "RevisionNotFound"),
        (404, 10010205001, "AccessDenied"),
        (404, 10010200001, "AccessDenied"),
        (200, 10010200001, "AccessDenied"),
        (401, 1, "AccessDenied"),
        (403, 1, "AccessDenied"),
        (500, 1, "SourceUnavailable"),
        (429, 1, "SourceUnavailable"),
    ],
)
async def test_error_codes(status: int, code: int, reason: str) -> None:
    client, ms = _ms(
        httpx.MockTransport(lambda r: httpx.Response(status, json=_envelope(None, code)))
    )
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await ms.list_files("org/model", COMMIT, token="secret-token")
    assert caught.value.reason == reason
    assert "secret-token" not in caught.value.message


def _advertisement(*refs: tuple[str, str]) -> bytes:
    def pkt(data: bytes) -> bytes:
        return b"%04x" % (len(data) + 4) + data

    body = pkt(b"# service=git-upload-pack\n") + b"0000"
    for index, (sha, name) in enumerate(refs):
        line = f"{sha} {name}".encode() + (b"\0side-band-64k" if index == 0 else b"")
        body += pkt(line + b"\n")
    return body + b"0000"


GIT = "application/x-git-upload-pack-advertisement"


async def test_resolve_revision() -> None:
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        if request.url.path.endswith("/info/refs"):
            assert request.url.params["service"] == "git-upload-pack"
            return httpx.Response(200, headers={"content-type": GIT},
                                  content=_advertisement((COMMIT, "refs/heads/master")))
        ref = request.url.params["Ref"]
        commits = [{"Id": COMMIT}] if ref == "master" else []
        return httpx.Response(200, json=_envelope({"Commit": commits}))

    client, ms = _ms(httpx.MockTransport(handler))
    async with client:
        assert await ms.resolve_revision("org/model", "master", token=None) == COMMIT
        assert await ms.resolve_revision("org/model", "f" * 40, token=None) == "f" * 40
        with pytest.raises(errors.HubError) as caught:
            await ms.resolve_revision("org/model", "nope", token=None)
    assert caught.value.reason == "RevisionNotFound"
    assert [u.path for u in seen] == ["/api/v1/models/org/model/commits",
                                      "/org/model.git/info/refs",
                                      "/api/v1/models/org/model/commits"]


@pytest.mark.parametrize(("advertised", "outcome"), [
    # an annotated tag: git names the tag object, and its peeled line names the commit
    ((("1" * 40, "refs/tags/v1"), (COMMIT, "refs/tags/v1^{}")), COMMIT),
    ((("1" * 40, "refs/tags/v1"),), "SourceUnavailable"),  # peeled line missing: disagreement
    (((COMMIT, "refs/heads/main"),), "SourceUnavailable"),  # git has no such ref
])
async def test_git_cross_check(advertised: tuple[tuple[str, str], ...], outcome: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/info/refs"):
            return httpx.Response(200, headers={"content-type": GIT},
                                  content=_advertisement(*advertised))
        return httpx.Response(200, json=_envelope({"Commit": [{"Id": COMMIT}]}))

    client, ms = _ms(httpx.MockTransport(handler))
    async with client:
        if outcome == COMMIT:
            assert await ms.resolve_revision("org/model", "v1", token=None) == COMMIT
            return
        with pytest.raises(errors.HubError) as caught:
            await ms.resolve_revision("org/model", "v1", token=None)
    assert caught.value.reason == outcome and "org/model" in caught.value.message


async def test_git_authenticates_as_oauth2_and_maps_refusals() -> None:
    authorizations: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/info/refs"):
            authorizations.append(request.headers.get("authorization"))
            return httpx.Response(401, headers={"www-authenticate": 'Basic realm="x"'})
        assert request.headers["authorization"] == "Bearer secret-token"
        return httpx.Response(200, json=_envelope({"Commit": [{"Id": COMMIT}]}))

    client, ms = _ms(httpx.MockTransport(handler))
    async with client:
        with pytest.raises(errors.HubError) as caught:
            await ms.resolve_revision("org/model", "master", token="secret-token")
    assert caught.value.reason == "AccessDenied"
    assert "secret-token" not in caught.value.message
    # base64("oauth2:secret-token")
    assert authorizations == ["Basic b2F1dGgyOnNlY3JldC10b2tlbg=="]


@pytest.mark.parametrize(("status", "body", "reason"), [
    (200, {"success": True, "data": {"username": "u"}}, None),
    (401, {"success": False, "code": "InvalidAuthentication"}, "AccessDenied"),
    (200, {"success": False}, "AccessDenied"),
    (503, {}, "SourceUnavailable"),
])
async def test_check_token(status: int, body: dict[str, object], reason: str | None) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/openapi/v1/users/me"
        assert request.headers["authorization"] == "Bearer secret-token"
        return httpx.Response(status, json=body)

    client, ms = _ms(httpx.MockTransport(handler))
    async with client:
        if reason is None:
            await ms.check_token(token="secret-token")
            return
        with pytest.raises(errors.HubError) as caught:
            await ms.check_token(token="secret-token")
    assert caught.value.reason == reason


async def test_stream_url_and_range() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/models/org/model/repo"
        assert request.url.params["FilePath"] == "dir/a b.bin"
        assert request.url.params["Revision"] == COMMIT
        assert request.headers["range"] == "bytes=2-"
        return httpx.Response(206, headers={"content-range": "bytes 2-4/5"}, content=b"cde")

    client, ms = _ms(httpx.MockTransport(handler))
    async with client:
        chunks = [c async for c in ms.stream("org/model", COMMIT, "dir/a b.bin", start=2,
                                             token=None)]
    assert b"".join(chunks) == b"cde"
