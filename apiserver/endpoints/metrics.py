"""The API server's Prometheus metrics at ``/metrics``: request latency, requests in flight and
open watches, from one pure ASGI middleware (``Observe``) in front of everything else; and the
store's revision mark (``storage.marks``): the mark, and the starts that found the store behind
it.

``/metrics`` is a non-resource path judged like every other request (``auth.middleware``): verb
``get`` on ``/metrics``, as kube-apiserver's own. Standalone mode's policy grants it to
``system:masters`` only; in cluster mode the SubjectAccessReview asks the cluster's RBAC, where a
ClusterRole with ``nonResourceURLs: ["/metrics"]`` and ``get`` grants it (the chart's
``monitoring.metricsReader``).

Every label is a bounded vocabulary: ``verb`` (kube's verbs and the HTTP methods of non-resource
requests, anything else ``other``), ``resource`` (a served resource or review, with its
subresource: ``modelartifacts/status``; empty for a non-resource path; ``other`` for a resource
nobody serves) and ``code`` (the HTTP status). Watches run as long as their client likes, so, as
in kube, they are counted as open watches, not timed. Each server process keeps its own figures:
with ``--processes N`` a scrape answers for the process that served it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import prometheus_client
from prometheus_client import exposition, metrics_core, registry
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apiserver.request import info as infos
from apiserver.storage import marks
from openapi import resources

PREFIX = "gpustack_model_manager_apiserver_"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
           float("inf"))
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete",
                   "deletecollection", "head", "post", "put", "options"})
READ_ONLY = frozenset({"get", "list", "watch", "head", "options"})
REVIEWS = frozenset({("authorization.k8s.io", "selfsubjectaccessreviews"),
                     ("authorization.k8s.io", "selfsubjectrulesreviews"),
                     ("authentication.k8s.io", "selfsubjectreviews")})
"""Standalone mode's self reviews (``endpoints.selfreviews``)."""
OTHER = "other"


def _served() -> frozenset[tuple[str, str]]:
    found = set(REVIEWS)
    for info in resources.SERVED:
        found.add((info.group, info.plural))
        found.update((info.group, f"{info.plural}/{sub.name}") for sub in info.subresources)
    return frozenset(found)


SERVED = _served()


def labels_of(request: infos.RequestInfo) -> tuple[str, str]:
    """``(verb, resource)`` of a request, each from a bounded vocabulary."""
    verb = request.verb if request.verb in VERBS else OTHER
    if not request.resource_request:
        return verb, ""
    resource = request.resource
    if request.subresource:
        resource += "/" + request.subresource
    return verb, resource if (request.api_group, resource) in SERVED else OTHER


class Revisions(registry.Collector):
    """The revision mark's families, read from the guarded store at each scrape."""

    def __init__(self, guarded: marks.Guarded) -> None:
        self.guarded = guarded

    def collect(self) -> Iterator[metrics_core.Metric]:
        fence = self.guarded.last_fence
        yield metrics_core.GaugeMetricFamily(
            PREFIX + "storage_revision_mark",
            "The highest revision recorded outside the store (beside its file; on the Lease in "
            "a cluster): no revision at or below it is handed out again.",
            value=self.guarded.recorded)
        yield metrics_core.CounterMetricFamily(
            PREFIX + "storage_revision_fences",
            "Starts of this process that found the store behind its revision mark (emptied, or "
            "an older copy) and continued numbering above it; its clients list again.",
            value=self.guarded.fences)
        yield metrics_core.GaugeMetricFamily(
            PREFIX + "storage_revision_fenced_at",
            "The revision numbering continued from at the last such start (0: none).",
            value=fence.continued if fence is not None else 0)


class Metrics:
    """One process's registry: its families and the process collector (and, given a guarded
    store, its revision mark)."""

    def __init__(self, revisions: marks.Guarded | None = None) -> None:
        self.registry = registry.CollectorRegistry(auto_describe=True)
        if revisions is not None:
            self.registry.register(Revisions(revisions))
        prometheus_client.ProcessCollector(registry=self.registry)
        self.latency = prometheus_client.Histogram(
            PREFIX + "request_duration_seconds",
            "Seconds from a request's arrival to the end of its answer (watches excluded).",
            ["verb", "resource", "code"], buckets=BUCKETS, registry=self.registry)
        self.inflight = prometheus_client.Gauge(
            PREFIX + "inflight_requests", "Requests being served (watches excluded), by kind.",
            ["kind"], registry=self.registry)
        for kind in ("readOnly", "mutating"):
            self.inflight.labels(kind)
        self.watches = prometheus_client.Gauge(
            PREFIX + "watches", "Open watches, by resource.", ["resource"],
            registry=self.registry)

    def scrape(self) -> bytes:
        return exposition.generate_latest(self.registry)


class Observe:
    """Times every HTTP request (refusals included) and counts those in flight and the open
    watches; the outermost middleware, so it sees every answer."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verb, resource = labels_of(infos.of(scope))
        if verb == "watch":
            watches = self.metrics.watches.labels(resource)
            watches.inc()
            try:
                await self.app(scope, receive, send)
            finally:
                watches.dec()
            return
        code = 500  # what the client gets when nothing was answered
        began = time.perf_counter()

        async def answering(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = int(message["status"])
            await send(message)

        inflight = self.metrics.inflight.labels("readOnly" if verb in READ_ONLY else "mutating")
        inflight.inc()
        try:
            await self.app(scope, receive, answering)
        finally:
            inflight.dec()
            self.metrics.latency.labels(verb, resource, str(code)).observe(
                time.perf_counter() - began)


def routes(metrics: Metrics) -> list[BaseRoute]:
    async def scrape(request: Request) -> Response:
        return Response(metrics.scrape(), media_type=exposition.CONTENT_TYPE_LATEST)

    return [Route("/metrics", scrape, methods=["GET"])]
