"""Standalone mode's parts: the self reviews kube-apiserver answers in a cluster, routed and
named in discovery by this mode alone (cluster mode's: ``test_cluster_aggregator``)."""

from __future__ import annotations

import pathlib

from starlette import routing

from apiserver.flags import cli
from apiserver.wiring import access, standalone

SELF_REVIEWS = {
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews",
    "/apis/authentication.k8s.io/v1alpha1/selfsubjectreviews",
}


def test_standalone_serves_and_lists_the_self_reviews(tmp_path: pathlib.Path) -> None:
    settings = cli.parse(["--standalone", "--data-dir", str(tmp_path), "--port", "9443"])
    standalone.prepare(settings)
    auth = access.standalone(settings)
    paths = {route.path for route in auth.routes if isinstance(route, routing.Route)}
    assert paths == SELF_REVIEWS
    assert [group.name for group in auth.groups] == ["authentication.k8s.io",
                                                     "authorization.k8s.io"]

