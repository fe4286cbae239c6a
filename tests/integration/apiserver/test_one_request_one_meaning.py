"""One request, one meaning: what is served (objects, events, status code) is exactly what was
authorized, for every verb and parameter in repeated and conflicting forms.

The same table runs against the standalone server (local RBAC, the tenant impersonated by the
admin) and in cluster mode through the fixture control plane's aggregator (the tenant's bearer
token; the control plane authorizes it with kube's first-value reading, proxies it with the
front-proxy identity, and the server authorizes it again with a SubjectAccessReview).

The tenant ``carol`` may get, list and watch only ``team-a/qwen`` (RBAC ``resourceNames``); the
namespace also holds ``other``, which she must never see.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devkit.controlplane import ControlPlane, Role, Rule, UserInfo
from devkit.harness import aggregator, clustermode
from devkit.harness import apiserver as standalone
from tests.integration.apiserver import cluster

G = cluster.G
ITEMS = f"{G}/namespaces/team-a/modelartifacts"
CAROL = UserInfo("carol", uid="carol-uid", groups=("tenants",))
CAROL_TOKEN = "carol-token"
ADMIN = UserInfo("root", uid="root-uid", groups=("system:masters",))
ADMIN_TOKEN = "root-token"
ROLE = Rule(("get", "list", "watch"), (cluster.GROUP,), ("modelartifacts",), ("qwen",))
POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: qwen-only, namespace: team-a}
rules:
  - apiGroups: [worker.gpustack.ai]
    resources: [modelartifacts]
    resourceNames: [qwen]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol-qwen-only, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: qwen-only}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
"""
NAME_QWEN = "fieldSelector=metadata.name%3Dqwen"


@dataclasses.dataclass
class Api:
    """One installation as its clients reach it: ``as_tenant`` and ``as_admin`` clients; in
    cluster mode also the aggregator's own client (front-proxy certificate, X-Remote-*)."""

    mode: str
    tenant: Callable[[], httpx.Client]
    admin: Callable[[], httpx.Client]
    front_proxy: Callable[[], aggregator.AggregatorClient] | None = None


def _artifact(name: str, namespace: str = "team-a") -> dict[str, Any]:
    return cluster.artifact(name, namespace)


def _seed(api: Api) -> None:
    with api.admin() as admin:
        for name in ("qwen", "other"):
            found = admin.get(f"{ITEMS}/{name}")
            if found.status_code == 404:
                created = admin.post(ITEMS, json=_artifact(name))
                assert created.status_code == 201, created.text


@pytest.fixture(scope="module")
def standalone_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    data_dir = tmp_path_factory.mktemp("one-parse-standalone")
    (data_dir / "policy.yaml").write_text(POLICY)
    with standalone.running(data_dir) as server:

        def tenant() -> httpx.Client:
            client = server.client()
            client.headers["Impersonate-User"] = CAROL.name
            return client

        api = Api("standalone", tenant, server.client)
        _seed(api)
        yield api


@pytest.fixture(scope="module")
def cluster_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with contextlib.ExitStack() as stack:
        cp = stack.enter_context(ControlPlane(tmp_path_factory.mktemp("one-parse-cp")))
        clustermode.prepare(cp)
        cluster.grant_chart_and_tenants(cp)
        cp.add_token(CAROL_TOKEN, CAROL)
        cp.add_token(ADMIN_TOKEN, ADMIN)
        cp.policy.add_role(Role("qwen-only", (ROLE,), namespace="team-a"))
        cp.policy.bind("qwen-only", [CAROL.name], namespace="team-a", role_kind="Role",
                       name="carol-qwen-only")
        data_dir = tmp_path_factory.mktemp("one-parse-cluster")
        cluster.seed_store(data_dir)
        server = stack.enter_context(clustermode.running(cp, data_dir))
        cp.register_api_service(cluster.GROUP, "v1", server.url, server.ca_pem)

        def through(token: str) -> Callable[[], httpx.Client]:
            return lambda: httpx.Client(base_url=cp.url, verify=cp.trust(), timeout=30.0,
                                        headers={"Authorization": f"Bearer {token}"})

        api = Api("cluster", through(CAROL_TOKEN), through(ADMIN_TOKEN), server.aggregator)
        _seed(api)
        yield api


@pytest.fixture(params=["standalone", "cluster"])
def api(request: pytest.FixtureRequest) -> Api:
    found: Api = request.getfixturevalue(f"{request.param}_api")
    return found


def _names(response: httpx.Response) -> set[str]:
    body = response.json()
    if body.get("kind", "").endswith("List"):
        return {item["metadata"]["name"] for item in body["items"]}
    if body.get("kind") == "Status":
        return set()
    return {body["metadata"]["name"]}


def _watched(client: httpx.Client, query: str) -> tuple[int, set[str]]:
    """The status and the names of the objects a watch's events carried (it ends itself)."""
    names: set[str] = set()
    with client.stream("GET", f"{ITEMS}?{query}") as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, names
        for line in response.iter_lines():
            if line.strip():
                event = json.loads(line)
                assert event["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"), event
                names.add(event["object"]["metadata"]["name"])
    return 200, names


# reads as the tenant: (query on the collection, expected code, names served) -----------------

LISTS = [
    (NAME_QWEN, 200, {"qwen"}),
    (f"{NAME_QWEN}&fieldSelector=", 400, set()),
    (f"{NAME_QWEN}&fieldSelector=metadata.name%3Dother", 400, set()),
    ("fieldSelector=&" + NAME_QWEN, 403, set()),  # the first value is the one judged
    ("fieldSelector=metadata.name%3Dother", 403, set()),
    ("", 403, set()),
    (f"{NAME_QWEN}&limit=1&limit=500", 400, set()),
    (f"{NAME_QWEN}&labelSelector=&labelSelector=app%3Dx", 400, set()),
    (f"{NAME_QWEN}&resourceVersion=0&resourceVersion=", 400, set()),
    (f"{NAME_QWEN}&resourceVersionMatch=NotOlderThan&resourceVersionMatch=Exact", 400, set()),
    (f"{NAME_QWEN}&continue=&continue=x", 400, set()),
    (f"{NAME_QWEN}&includeObject=None&includeObject=Object", 400, set()),
    (f"{NAME_QWEN}&pretty=true&pretty=false", 400, set()),
    (f"{NAME_QWEN}&watch=false&watch=true", 400, set()),
    (f"{NAME_QWEN}&watch=true&watch=false", 400, set()),
    (f"{NAME_QWEN}&timeoutSeconds=1&timeoutSeconds=2", 400, set()),
    (f"{NAME_QWEN}&dryRun=All", 200, {"qwen"}),  # ignored by a list, as kube ignores it
]  # fmt: skip


@pytest.mark.parametrize(("query", "code", "served"), LISTS)
def test_lists_serve_what_was_authorized(api: Api, query: str, code: int,
                                         served: set[str]) -> None:
    with api.tenant() as tenant:
        response = tenant.get(f"{ITEMS}?{query}" if query else ITEMS)
    assert response.status_code == code, (api.mode, query, response.text)
    assert _names(response) == served
    if code == 400:
        assert response.json()["reason"] == "BadRequest"
        assert "was given 2 times; it may be given at most once" in response.json()["message"]


WATCHES = [
    (f"watch=1&{NAME_QWEN}&timeoutSeconds=1", 200, {"qwen"}),
    (f"watch=true&{NAME_QWEN}&timeoutSeconds=1&allowWatchBookmarks=true", 200, {"qwen"}),
    (f"watch=false&watch=true&{NAME_QWEN}&timeoutSeconds=1", 400, set()),
    (f"watch=true&watch=false&{NAME_QWEN}&timeoutSeconds=1", 400, set()),
    (f"watch=true&{NAME_QWEN}&fieldSelector=&timeoutSeconds=1", 400, set()),
    (f"watch=true&{NAME_QWEN}&allowWatchBookmarks=true&allowWatchBookmarks=false", 400, set()),
    (f"watch=yes&{NAME_QWEN}", 400, set()),  # judged as a watch (kube's fallback), then refused
    ("watch=true&fieldSelector=metadata.name%3Dother", 403, set()),
    ("watch=true&timeoutSeconds=1", 403, set()),
]  # fmt: skip


@pytest.mark.parametrize(("query", "code", "served"), WATCHES)
def test_watches_serve_what_was_authorized(api: Api, query: str, code: int,
                                           served: set[str]) -> None:
    with api.tenant() as tenant:
        found = _watched(tenant, query)
    assert found == (code, served), (api.mode, query)


GETS = [
    ("qwen", "", 200, {"qwen"}),
    ("qwen", "watch=true", 200, {"qwen"}),  # a get of one name ignores watch, as kube does
    ("qwen", "fieldSelector=metadata.name%3Dother", 200, {"qwen"}),  # ignored by a get
    ("qwen", "resourceVersion=1&resourceVersion=2", 400, set()),
    ("qwen", "watch=1&watch=0", 400, set()),
    ("other", "", 403, set()),
    ("other", "fieldSelector=metadata.name%3Dqwen", 403, set()),
    ("qwen%2Fstatus", "", 403, set()),  # %2F splits the name: the status subresource, judged so
    # a dot segment is judged as parsed (a name or subresource RBAC does not grant), and would
    # be refused after it (the admin's case below)
    ("qwen%2F..%2Fother", "", 403, set()),
    ("%2e%2e%2Fother", "", 403, set()),
    ("%2e", "", 403, set()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "query", "code", "served"), GETS)
def test_gets_serve_what_was_authorized(api: Api, name: str, query: str, code: int,
                                        served: set[str]) -> None:
    with api.tenant() as tenant:
        response = tenant.get(f"{ITEMS}/{name}" + (f"?{query}" if query else ""))
    assert response.status_code == code, (api.mode, name, query, response.text)
    assert _names(response) == served


@pytest.mark.parametrize("path", [
    f"{G}/namespaces//modelartifacts",
    f"{G}/namespaces/team-a//modelartifacts/qwen",
    f"{G}/namespaces/team-a/modelartifacts//qwen",
    f"{G}/namespaces/%2e%2e/namespaces/team-a/modelartifacts",
    f"{ITEMS}/qwen%2F..%2Fother",
    f"{ITEMS}/%2e%2e%2Fother",
    f"{ITEMS}/%2e",
    f"{ITEMS}/qwen/%2e%2e",
])  # fmt: skip
def test_paths_that_split_two_ways_are_refused(api: Api, path: str) -> None:
    with api.admin() as admin:
        response = admin.get(path)
    # the control plane itself may refuse first (kube finds no route for an empty segment)
    assert response.status_code in (400, 404), (api.mode, path, response.text)
    assert response.json()["kind"] == "Status"
    assert "items" not in response.json()


def test_a_trailing_slash_serves_nothing_unauthorized(api: Api) -> None:
    with api.tenant() as tenant:
        refused = tenant.get(f"{ITEMS}/other/")
        listed = tenant.get(f"{ITEMS}/")
    assert refused.status_code in (403, 404), refused.text
    assert "other" not in refused.text or refused.json()["kind"] == "Status"
    assert listed.status_code in (403, 404), listed.text
    assert _names(listed) == set()


# writes as the admin: what a refused write leaves is what was there ------------------------


def _exists(admin: httpx.Client, name: str, namespace: str = "team-a") -> bool:
    return admin.get(f"{G}/namespaces/{namespace}/modelartifacts/{name}").status_code == 200


def test_repeated_write_options_are_refused_and_change_nothing(api: Api) -> None:
    with api.admin() as admin:
        for query in ("fieldValidation=Strict&fieldValidation=Ignore",
                      "fieldManager=a&fieldManager=b"):
            refused = admin.post(f"{ITEMS}?{query}", json=_artifact("refused"))
            assert refused.status_code == 400, (api.mode, query, refused.text)
            assert not _exists(admin, "refused")
        dry = admin.post(f"{ITEMS}?dryRun=All&dryRun=All", json=_artifact("dry"))
        assert dry.status_code == 201, dry.text  # dryRun is a list: repeating it is fine
        assert not _exists(admin, "dry")
        before = admin.get(f"{ITEMS}/qwen").json()
        for query in ("propagationPolicy=Orphan&propagationPolicy=Foreground",
                      "gracePeriodSeconds=0&gracePeriodSeconds=30"):
            refused = admin.delete(f"{ITEMS}/qwen?{query}")
            assert refused.status_code == 400, (api.mode, query, refused.text)
        kept = admin.delete(f"{ITEMS}/qwen?dryRun=All&labelSelector=app%3Dnone&watch=true")
        assert kept.status_code == 200, kept.text
        assert admin.get(f"{ITEMS}/qwen").json() == before


def test_body_and_path_must_name_the_same_object(api: Api) -> None:
    with api.admin() as admin:
        current = admin.get(f"{ITEMS}/qwen").json()
        renamed = {**current, "metadata": {**current["metadata"], "name": "other"}}
        conflict = admin.put(f"{ITEMS}/qwen", json=renamed)
        assert conflict.status_code == 400, conflict.text
        assert "does not match the name on the URL" in conflict.json()["message"]
        moved = {**current, "metadata": {**current["metadata"], "namespace": "team-b"}}
        elsewhere = admin.put(f"{ITEMS}/qwen", json=moved)
        assert elsewhere.status_code == 400, elsewhere.text
        assert "namespace" in elsewhere.json()["message"]
        created = admin.post(ITEMS, json=_artifact("mover", "team-b"))
        assert created.status_code == 400, created.text
        assert "namespace" in created.json()["message"]
        assert not _exists(admin, "mover") and not _exists(admin, "mover", "team-b")
        assert admin.get(f"{ITEMS}/qwen").json() == current
        assert admin.get(f"{ITEMS}/other").json()["metadata"]["uid"] != current["metadata"]["uid"]


def test_query_parameters_a_verb_ignores_do_not_change_it(api: Api) -> None:
    with api.admin() as admin:
        created = admin.post(f"{ITEMS}?watch=true&limit=1&{NAME_QWEN}",
                             json=_artifact("ignored"))
        assert created.status_code == 201, created.text
        assert created.json()["metadata"]["name"] == "ignored"
        deleted = admin.delete(f"{ITEMS}/ignored?watch=true&{NAME_QWEN}")
        assert deleted.status_code == 200, deleted.text
        assert not _exists(admin, "ignored") and _exists(admin, "qwen")


# headers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "value"), [
    ("Content-Type", "application/yaml"),
    ("Impersonate-User", "mallory"),
    ("Impersonate-Uid", "x"),
])  # fmt: skip
def test_repeated_single_valued_headers_are_refused(standalone_api: Api, header: str,
                                                    value: str) -> None:
    with standalone_api.admin() as admin:
        first = [("Impersonate-User", "carol")] if header == "Impersonate-Uid" else []
        headers = [*first, (header, "application/json" if header == "Content-Type" else "carol"),
                   (header, value)]
        response = admin.post(ITEMS, content=json.dumps(_artifact("twice")).encode(),
                              headers=headers)
        assert response.status_code == 400, response.text
        assert f"the {header} header was given 2 times" in response.json()["message"]
        assert not _exists(admin, "twice")


def test_two_authorization_headers_are_refused(standalone_api: Api,
                                               tmp_path: pathlib.Path) -> None:
    with standalone_api.admin() as admin:
        token = admin.headers["Authorization"]
        del admin.headers["Authorization"]
        response = admin.get(ITEMS, headers=[("Authorization", token),
                                             ("Authorization", "Bearer not-a-token")])
        assert response.status_code == 400, response.text
        assert "the Authorization header was given 2 times" in response.json()["message"]


async def test_repeated_headers_from_the_front_proxy(cluster_api: Api) -> None:
    """What the aggregator forwards: a repeated Content-Type is refused; of two X-Remote-User
    headers the first is the user (kube's requestheader rule), for authorization and the
    answer alike."""
    assert cluster_api.front_proxy is not None
    async with cluster_api.front_proxy() as front:
        body = json.dumps(_artifact("twice")).encode()
        refused = await front.request("POST", ITEMS, ADMIN, content=body, headers=[
            ("Content-Type", "application/json"), ("Content-Type", "application/yaml")])
        assert refused.status_code == 400, refused.text
        assert "the Content-Type header was given 2 times" in refused.json()["message"]
        first = await front.request("GET", ITEMS, None, headers=[
            ("X-Remote-User", CAROL.name), ("X-Remote-User", ADMIN.name),
            ("X-Remote-Group", "tenants")])
        assert first.status_code == 403, first.text
        assert 'User "carol" cannot list resource "modelartifacts"' in first.json()["message"]
        named = await front.request("GET", f"{ITEMS}?{NAME_QWEN}", None, headers=[
            ("X-Remote-User", CAROL.name), ("X-Remote-User", ADMIN.name)])
        assert named.status_code == 200, named.text
        assert _names(named) == {"qwen"}
    with cluster_api.admin() as admin:
        assert not _exists(admin, "twice")
