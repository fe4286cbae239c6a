"""Local RBAC and the standalone policy: the same answers a cluster's RBAC gives."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from apiserver.auth import attributes, authorizer, policy, rbac
from apiserver.auth import user as users
from tests.support import policies

G = "/apis/worker.gpustack.ai/v1"
WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"
PLUGIN = "system:serviceaccount:gpustack-system:model-manager-node"
ALICE = users.UserInfo("alice", groups=("tenants", users.AUTHENTICATED))
GETTER = users.UserInfo("getter", groups=(users.AUTHENTICATED,))

TENANTS = policies.tenant_reader("team-a") + """---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: artifact-getter}
rules:
  - {apiGroups: [worker.gpustack.ai], resources: [modelartifacts], verbs: [get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: getter, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: artifact-getter}
subjects: [{kind: User, name: getter}]
"""


def _judge(extra: str = TENANTS) -> authorizer.Delegating:
    local = policy.builtin(worker=WORKER, plugin=PLUGIN)
    local = local + rbac.parse(yaml.safe_load_all(extra))
    return authorizer.Delegating(rbac.Evaluator(local))


async def _allowed(user: users.UserInfo, method: str, path: str, query: str = "") -> bool:
    return (await _judge().authorize(attributes.parse(user, method, path, query))).allowed


@pytest.mark.parametrize(("method", "path", "query", "allowed"), [
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "", True),
    ("GET", f"{G}/namespaces/team-a/modelartifacts", "watch=1", True),
    ("GET", f"{G}/namespaces/team-a/modelartifacts/qwen", "", True),
    ("GET", f"{G}/namespaces/team-a/modelartifacts/qwen/progress", "", True),
    ("GET", f"{G}/namespaces/team-b/modelartifacts", "", False),
    ("GET", f"{G}/namespaces/team-b/modelartifacts/qwen/progress", "", False),
    ("GET", f"{G}/modelartifacts", "", False),
    ("GET", f"{G}/modelartifacts", "watch=true", False),
    ("POST", f"{G}/namespaces/team-a/modelartifacts", "", False),
    ("DELETE", f"{G}/namespaces/team-a/modelartifacts/qwen", "", False),
    ("PUT", f"{G}/namespaces/team-a/modelartifacts/qwen/status", "", False),
    ("GET", f"{G}/nodemodelstores", "", False),
    ("GET", "/apis", "", True),
    ("GET", "/openapi/v3", "", True),
    ("GET", "/version", "", True),
    ("POST", "/apis", "", False),
])  # fmt: skip
async def test_alice_reads_team_a_only(method: str, path: str, query: str,
                                       allowed: bool) -> None:
    assert await _allowed(ALICE, method, path, query) is allowed


async def test_get_modelartifacts_does_not_grant_progress() -> None:
    assert await _allowed(GETTER, "GET", f"{G}/namespaces/team-a/modelartifacts/qwen")
    assert not await _allowed(GETTER, "GET", f"{G}/namespaces/team-a/modelartifacts/qwen/progress")
    assert not await _allowed(GETTER, "GET", f"{G}/namespaces/team-a/modelartifacts")
    # a ClusterRole bound by a RoleBinding grants nothing outside that namespace
    assert not await _allowed(GETTER, "GET", f"{G}/namespaces/team-b/modelartifacts/qwen")


async def test_worker_and_plugin_get_their_chart_roles() -> None:
    worker = users.UserInfo(WORKER, groups=(users.AUTHENTICATED,))
    plugin = users.UserInfo(PLUGIN, groups=(users.AUTHENTICATED,))
    assert await _allowed(worker, "GET", f"{G}/modelartifacts", "watch=1")
    assert await _allowed(worker, "PATCH", f"{G}/namespaces/x/modelartifacts/a/status")
    assert await _allowed(worker, "DELETE", f"{G}/nodemodelstores/n")
    assert not await _allowed(worker, "POST", f"{G}/namespaces/x/modelartifacts")
    assert not await _allowed(worker, "PUT", f"{G}/nodemodelstores/n/status")
    assert await _allowed(plugin, "GET", f"{G}/modelartifacts", "watch=1")
    assert await _allowed(plugin, "PUT", f"{G}/nodemodelstores/n/status")
    assert await _allowed(plugin, "PATCH", f"{G}/nodemodelstores/n/status")
    assert not await _allowed(plugin, "DELETE", f"{G}/nodemodelstores/n")
    assert not await _allowed(plugin, "PATCH", f"{G}/namespaces/x/modelartifacts/a/status")
    assert not await _allowed(plugin, "POST", f"{G}/namespaces/x/modelartifacts")


async def test_anonymous_gets_health_and_version_only() -> None:
    for path, allowed in (("/healthz", True), ("/version", True), ("/apis", False),
                          ("/openapi/v2", False)):
        assert await _allowed(users.ANONYMOUS_USER, "GET", path) is allowed


async def test_rule_matching() -> None:
    rule = rbac.Rule(("get",), ("worker.gpustack.ai",), ("*/status",))
    status = attributes.parse(ALICE, "GET", f"{G}/nodemodelstores/n/status", "")
    assert rule.allows(status)
    assert not rule.allows(attributes.parse(ALICE, "GET", f"{G}/nodemodelstores/n", ""))
    named = rbac.Rule(("get",), ("*",), ("nodemodelstores",), resource_names=("a",))
    assert named.allows(attributes.parse(ALICE, "GET", f"{G}/nodemodelstores/a", ""))
    assert not named.allows(attributes.parse(ALICE, "GET", f"{G}/nodemodelstores/b", ""))
    assert not named.allows(attributes.parse(ALICE, "GET", f"{G}/nodemodelstores", ""))
    url = rbac.Rule(("get",), non_resource_urls=("/openapi/*",))
    assert url.allows(attributes.parse(ALICE, "GET", "/openapi/v2", ""))
    assert not url.allows(attributes.parse(ALICE, "GET", "/openapi", ""))


async def test_service_account_subjects_and_reason() -> None:
    local = rbac.parse(yaml.safe_load_all("""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: all}
rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sa, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: all}
subjects: [{kind: ServiceAccount, name: robot}]
"""))
    judge = rbac.Evaluator(local)
    robot = users.UserInfo("system:serviceaccount:ns:robot")
    verdict = await judge.authorize(attributes.parse(robot, "DELETE",
                                                     f"{G}/namespaces/ns/modelartifacts/a", ""))
    assert verdict.allowed and verdict.reason == (
        'RBAC: allowed by RoleBinding "sa/ns" of ClusterRole "all" to ServiceAccount "robot/ns"')
    other = users.UserInfo("system:serviceaccount:other:robot")
    assert not (await judge.authorize(attributes.parse(
        other, "GET", f"{G}/namespaces/ns/modelartifacts/a", ""))).allowed


@pytest.mark.parametrize(("text", "says"), [
    ("kind: Pod\napiVersion: v1\n", "kind must be one of"),
    ("kind: Role\napiVersion: v1\nmetadata: {name: r, namespace: n}\n", "apiVersion must be"),
    ("kind: Role\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n",
     "metadata.namespace is required"),
    ("kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\n"
     "rules: [{resources: [x]}]\n", "at least one verb"),
    ("kind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: b}\n"
     "roleRef: {kind: Role, name: r}\nsubjects: []\n", "refers to a ClusterRole"),
    ("kind: RoleBinding\napiVersion: rbac.authorization.k8s.io/v1\n"
     "metadata: {name: b, namespace: n}\nroleRef: {kind: Role, name: r}\n"
     "subjects: [{kind: Robot, name: x}]\n", "kind User, Group or ServiceAccount"),
])  # fmt: skip
def test_bad_documents_are_named(text: str, says: str) -> None:
    with pytest.raises(rbac.PolicyError, match=says):
        rbac.parse(yaml.safe_load_all(text), source="p.yaml")


def test_policy_file_round_trip(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "policy.yaml"
    assert policy.load(path) == rbac.Policy()
    policy.ensure_file(path)
    assert path.read_text() == policy.FILE_HEADER
    assert policy.load(path) == rbac.Policy()  # only comments
    path.write_text("{not yaml: [")
    with pytest.raises(rbac.PolicyError, match="not valid YAML"):
        policy.load(path)
    path.write_text(TENANTS)
    loaded = policy.load(path)
    assert [r.name for r in loaded.roles] == ["model-artifact-reader", "artifact-getter"]
    # what the file header shows as an example is itself a valid policy
    lines = policy.FILE_HEADER.splitlines()
    start = lines.index("# ---")
    example = "\n".join(line[2:] for line in lines[start:])
    parsed = rbac.parse(yaml.safe_load_all(example))
    assert [r.name for r in parsed.roles] == ["model-artifact-reader"]
    assert [b.name for b in parsed.bindings] == ["alice-model-artifact-reader"]
