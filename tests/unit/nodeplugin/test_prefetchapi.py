"""``POST /model/prefetches``: the worker only, the artifact judged by the mount authorization,
the digest handed to the materializer as a mount's would be, the state answered."""

from __future__ import annotations

import pathlib
from typing import Any

import httpx
from prometheus_client import registry

from nodeplugin import artifacts, prefetchapi, serve
from nodeplugin.materialize import interface
from tests.unit.nodeplugin import fakes

DIGEST = fakes.DIGEST
TOKEN = "worker-token-1234"
REQUEST = {"namespace": "team-a", "artifact": "qwen", "artifactUID": "uid-1",
           "manifestDigest": DIGEST, "token": "hf_secret"}


class Materializer:
    def __init__(self, answer: interface.Progress) -> None:
        self.answer = answer
        self.asked: list[interface.Request] = []

    async def ensure(self, request: interface.Request) -> interface.Progress:
        self.asked.append(request)
        return self.answer

    def running(self) -> list[interface.Progress]:
        return []

    async def close(self) -> None:
        return None


async def _informer(*objects: dict[str, Any]) -> artifacts.Informer:
    informer = artifacts.Informer(fakes.FakeClient([fakes.page(list(objects), "5")]))
    await informer.replace(await informer.list())
    return informer


def _client(tmp_path: pathlib.Path, informer: artifacts.Informer,
            materializer: Materializer) -> httpx.AsyncClient:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    (tmp_path / "kubelet").mkdir(exist_ok=True)
    handler = prefetchapi.handler(informer=informer, kubelet_dir=str(tmp_path / "kubelet"),
                                  materializer=materializer)
    app = serve.make_app(metrics=registry.CollectorRegistry(), ready=lambda: None,
                         running=list, token_file=str(token_file), prefetch=handler)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://plugin",
                             headers={"Authorization": f"Bearer {TOKEN}"})


async def test_the_artifact_goes_through_the_ordinary_path(tmp_path: pathlib.Path) -> None:
    downloading = interface.Progress(DIGEST, interface.State.DOWNLOADING, 40, 100)
    materializer = Materializer(downloading)
    async with _client(tmp_path, await _informer(fakes.artifact_object()), materializer) as http:
        answer = await http.post("/model/prefetches", json=REQUEST)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"digest": DIGEST, "state": "Downloading",
                                 "downloadedBytes": 40, "sizeBytes": 100}
        (asked,) = materializer.asked
        assert asked.digest == DIGEST and asked.token == "hf_secret"
        assert (asked.source.kind, asked.source.repository, asked.source.revision) == (
            "huggingFace", "org/qwen", "c" * 40)
        materializer.answer = interface.Progress(
            DIGEST, interface.State.FAILED, reason=interface.Reason.ACCESS_DENIED,
            message="the hub refused the token")
        failed = (await http.post("/model/prefetches", json=REQUEST)).json()
        assert failed["state"] == "Failed" and failed["reason"] == "AccessDenied"
        assert "the hub refused the token" in failed["message"]


async def test_the_mount_authorization_is_the_rule(tmp_path: pathlib.Path) -> None:
    materializer = Materializer(interface.Progress(DIGEST, interface.State.PUBLISHED))
    informer = await _informer(fakes.artifact_object(),
                               fakes.artifact_object("pending", resolved=False))
    async with _client(tmp_path, informer, materializer) as http:
        for change, code, words in (
                ({"namespace": "team-b"}, 403, "no ModelArtifact 'qwen' in namespace 'team-b'"),
                ({"artifactUID": "uid-2"}, 403, "not the volume's artifactUID"),
                ({"manifestDigest": "sha256:" + "1" * 64}, 403, "resolved to"),
                ({"artifact": "pending"}, 403, "is not Resolved=True"),
                ({"manifestDigest": "sha256:short"}, 400, "manifestDigest must be"),
                ({"artifact": 7}, 400, "artifact must be a string")):
            refused = await http.post("/model/prefetches", json={**REQUEST, **change})
            assert refused.status_code == code, refused.text
            assert words in refused.json()["message"]
        assert materializer.asked == []
        # only the worker: the downloads endpoint's admission
        stranger = await http.post("/model/prefetches", json=REQUEST,
                                   headers={"Authorization": "Bearer tenant"})
        assert stranger.status_code == 403
        assert (await http.post("/model/prefetches", content=b"[1]")).status_code == 400
        published = await http.post("/model/prefetches", json=REQUEST)
        assert published.json()["state"] == "Published"


async def test_not_yet_listed_is_unavailable(tmp_path: pathlib.Path) -> None:
    informer = artifacts.Informer(fakes.FakeClient([]))
    materializer = Materializer(interface.Progress(DIGEST, interface.State.PUBLISHED))
    async with _client(tmp_path, informer, materializer) as http:
        answer = await http.post("/model/prefetches", json=REQUEST)
    assert answer.status_code == 503 and "retry shortly" in answer.json()["message"]
