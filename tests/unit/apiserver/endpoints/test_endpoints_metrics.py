"""The API server's /metrics: latency by bounded verb, resource and code; requests in flight;
open watches (never timed); the text format prometheus-client writes."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client import parser
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from apiserver.endpoints import metrics
from apiserver.request import info as infos

P = metrics.PREFIX
ARTIFACTS = "/apis/worker.gpustack.ai/v1/namespaces/team-a/modelartifacts"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in parser.text_string_to_metric_families(text) for s in family.samples}


def _app(observed: metrics.Metrics, gate: asyncio.Event) -> Starlette:
    async def artifacts(request: Request) -> Response:
        if request.method == "POST":
            return PlainTextResponse("no", status_code=422)
        if request.query_params.get("watch") == "true":
            async def lines() -> object:
                yield b"{}\n"
                await gate.wait()
            return StreamingResponse(lines())  # type: ignore[arg-type]
        return PlainTextResponse("[]")

    async def slow(request: Request) -> Response:
        await gate.wait()
        return PlainTextResponse("ok")

    routes = [*metrics.routes(observed),
              Route(ARTIFACTS, artifacts, methods=["GET", "POST"]),
              Route(ARTIFACTS + "/{name}/status", slow, methods=["PUT"])]
    return Starlette(routes=routes, middleware=[Middleware(metrics.Observe, metrics=observed)])


async def test_requests_are_timed_by_bounded_labels_and_counted_in_flight() -> None:
    observed = metrics.Metrics()
    gate = asyncio.Event()
    transport = httpx.ASGITransport(_app(observed, gate))
    async with httpx.AsyncClient(transport=transport, base_url="https://t") as client:
        assert (await client.get(ARTIFACTS)).status_code == 200
        assert (await client.post(ARTIFACTS, content=b"{}")).status_code == 422
        await client.get("/apis/widgets.example.com/v1/namespaces/a/widgets")  # 404, unserved
        await client.request("BREW", "/coffee")  # 404 or 405, an unknown method
        put = asyncio.create_task(client.put(ARTIFACTS + "/a/status", content=b"{}"))
        async with asyncio.timeout(5):
            while True:
                found = _samples((await client.get("/metrics")).text)
                if found[(P + "inflight_requests", (("kind", "mutating"),))] == 1:
                    break
                await asyncio.sleep(0.01)
        gate.set()
        await put
        found = _samples((await client.get("/metrics")).text)
    count = P + "request_duration_seconds_count"
    assert found[(count, (("code", "200"), ("resource", "modelartifacts"), ("verb", "list")))] == 1
    assert found[(count, (("code", "422"), ("resource", "modelartifacts"),
                          ("verb", "create")))] == 1
    assert found[(count, (("code", "200"), ("resource", "modelartifacts/status"),
                          ("verb", "update")))] == 1
    assert found[(count, (("code", "404"), ("resource", "other"), ("verb", "list")))] == 1
    brewed = [labels for (name, labels), _ in found.items()
              if name == count and ("resource", "") in labels and ("verb", "other") in labels]
    assert len(brewed) == 1
    assert found[(P + "inflight_requests", (("kind", "mutating"),))] == 0
    assert found[(P + "inflight_requests", (("kind", "readOnly"),))] == 1  # this scrape
    assert ("process_cpu_seconds_total", ()) in found
    labels = {name for (_, pairs) in found for name, _ in pairs}
    assert labels <= {"verb", "resource", "code", "kind", "le"}


async def test_watches_are_counted_open_and_never_timed() -> None:
    # driven as raw ASGI: httpx's ASGITransport holds a streamed answer until the app returns
    observed = metrics.Metrics()
    gate = asyncio.Event()
    app = _app(observed, gate)
    first_line = asyncio.Event()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "2", "method": "GET",
             "scheme": "https", "path": ARTIFACTS, "raw_path": ARTIFACTS.encode(),
             "query_string": b"watch=true", "root_path": "", "headers": [],
             "server": ("t", 443), "client": ("127.0.0.1", 1)}

    async def receive() -> dict[str, object]:
        await gate.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            first_line.set()

    watch = asyncio.create_task(app(scope, receive, send))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        await first_line.wait()
    found = _samples(observed.scrape().decode())
    assert found[(P + "watches", (("resource", "modelartifacts"),))] == 1
    gate.set()
    async with asyncio.timeout(5):
        await watch
    found = _samples(observed.scrape().decode())
    assert found[(P + "watches", (("resource", "modelartifacts"),))] == 0
    assert not any(name == P + "request_duration_seconds_count" and ("verb", "watch") in labels
                   for name, labels in found)


def test_labels_of_keep_to_the_vocabulary() -> None:
    def labels(method: str, path: str, query: str = "") -> tuple[str, str]:
        return metrics.labels_of(infos.parse(method, path, query))

    assert labels("GET", ARTIFACTS + "/a/progress") == ("get", "modelartifacts/progress")
    assert labels("GET", ARTIFACTS, "watch=1") == ("watch", "modelartifacts")
    assert labels("GET", "/apis/worker.gpustack.ai/v1/nodemodelstores/n/bogus") \
        == ("get", "other")
    assert labels("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews") \
        == ("create", "selfsubjectaccessreviews")
    assert labels("GET", "/metrics") == ("get", "")
    assert labels("PROPFIND", "/x") == ("other", "")
