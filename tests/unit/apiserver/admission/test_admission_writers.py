"""The admission chain's writers' stage (the status guards): only the worker writes ModelArtifact
status; only the plugin of a node writes that node's NodeModelStore status, by three rules, each
refusal naming its rule."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.admission import chain, writers
from apiserver.admission import facts as admission_facts
from apiserver.auth import user as users
from apiserver.auth import webhook
from apiserver.auth import worker as workers
from openapi import resources

PLUGIN = admission_facts.Plugin("gpustack-system", "model-manager-node")
PLUGIN_USER = PLUGIN.username
WORKER = workers.WorkerIdentity.configured("system:serviceaccount:gpustack-system:worker")


def plugin(node: str | None = "node-a", *, pod: str = "plugin-a",
           uid: str = "1db066b1", name: str = PLUGIN_USER,
           **extra: tuple[str, ...]) -> users.UserInfo:
    found: dict[str, tuple[str, ...]] = {users.POD_NAME: (pod,), users.POD_UID: (uid,)}
    if node is not None:
        found[users.NODE_NAME] = (node,)
    for key, values in extra.items():
        found[key] = values
    return users.UserInfo(name, groups=users.service_account_groups("gpustack-system"),
                          extra=found)


class Pods:
    def __init__(self, pods: dict[str, admission_facts.PodFacts] | None = None, *,
                 down: bool = False) -> None:
        self.pods = pods or {}
        self.down = down
        self.asked: list[tuple[str, str]] = []

    async def pod(self, namespace: str, name: str) -> admission_facts.PodFacts | None:
        self.asked.append((namespace, name))
        if self.down:
            raise webhook.Unavailable("connection refused")
        return self.pods.get(name)


def _guards(pods: Pods | None = None) -> chain.Chain:
    return chain.build(admission_facts.ClusterFacts(worker=WORKER, plugin=PLUGIN, pods=pods))


async def _refusal(guard: chain.Chain, user: users.UserInfo, name: str) -> str:
    with pytest.raises(errors.Forbidden) as refused:
        await guard.check(resources.NODE_MODEL_STORE, user, name)
    assert refused.value.code == 403
    return refused.value.message


def test_only_the_worker_writes_artifact_status() -> None:
    writers.require_worker(users.UserInfo(WORKER.name), WORKER)
    with pytest.raises(errors.Forbidden) as refused:
        writers.require_worker(users.UserInfo("alice"), WORKER)
    assert "only the worker writes a ModelArtifact's status" in refused.value.message
    assert '"alice"' in refused.value.message


def test_masters_and_the_plugin_are_refused_artifact_status() -> None:
    admin = users.UserInfo("admin", groups=(users.MASTERS, users.AUTHENTICATED))
    for who in (admin, plugin()):
        with pytest.raises(errors.Forbidden):
            writers.require_worker(who, WORKER)


def test_unknown_worker_identity_refuses_everyone_and_says_why() -> None:
    unknown = workers.WorkerIdentity.unknown("kube-apiserver does not serve SelfSubjectReview")
    with pytest.raises(errors.Forbidden) as refused:
        writers.require_worker(users.UserInfo(""), unknown)
    assert "worker identity is unknown" in refused.value.message
    assert "SelfSubjectReview" in refused.value.message


async def test_plugin_of_node_a_writes_a_and_is_refused_b() -> None:
    guard = _guards()
    await guard.check(resources.NODE_MODEL_STORE, plugin("node-a"), "node-a")
    message = await _refusal(guard, plugin("node-a"), "node-b")
    assert message.startswith('nodemodelstores/status "node-b": refused by rule 3 (same node)')
    assert '"node-a"' in message


@pytest.mark.parametrize("who", [
    users.UserInfo(WORKER.name),
    users.UserInfo("admin", groups=(users.MASTERS,)),
    plugin(name="system:serviceaccount:other:model-manager-node"),
])  # fmt: skip
async def test_rule_1_refuses_anyone_but_the_plugin_service_account(who: users.UserInfo) -> None:
    message = await _refusal(_guards(), who, "node-a")
    assert "refused by rule 1 (plugin service account)" in message
    assert PLUGIN_USER in message


@pytest.mark.parametrize("extra", [
    {},
    {users.POD_NAME: ("p",)},
    {users.POD_UID: ("u",)},
    {users.POD_NAME: ("p", "q"), users.POD_UID: ("u",)},
    {users.POD_NAME: ("p",), users.POD_UID: ("u", "v")},
    {users.POD_NAME: ("",), users.POD_UID: ("u",)},
])  # fmt: skip
async def test_rule_2_needs_exactly_one_pod_name_and_pod_uid(
        extra: dict[str, tuple[str, ...]]) -> None:
    who = users.UserInfo(PLUGIN_USER, extra={**extra, users.NODE_NAME: ("node-a",)})
    message = await _refusal(_guards(), who, "node-a")
    assert "refused by rule 2 (pod-bound token)" in message


async def test_rule_3_two_node_names_refused() -> None:
    message = await _refusal(_guards(), plugin(None, **{users.NODE_NAME: ("node-a", "node-b")}),
                             "node-a")
    assert "refused by rule 3 (same node)" in message


async def test_rule_3_without_node_name_and_without_cluster_is_refused() -> None:
    message = await _refusal(_guards(None), plugin(None), "node-a")
    assert "refused by rule 3 (same node)" in message
    assert "no authentication.kubernetes.io/node-name extra" in message


async def test_rule_3_pod_lookup_by_uid_and_node() -> None:
    pods = Pods({"plugin-a": admission_facts.PodFacts(uid="1db066b1", node_name="node-a")})
    guard = _guards(pods)
    await guard.check(resources.NODE_MODEL_STORE, plugin(None), "node-a")
    assert pods.asked == [("gpustack-system", "plugin-a")]
    message = await _refusal(guard, plugin(None), "node-b")
    assert "refused by rule 3 (same node)" in message and '"node-a"' in message
    assert pods.asked == [("gpustack-system", "plugin-a")]  # a Pod's node is remembered


@pytest.mark.parametrize(("facts", "says"), [
    (None, "does not exist"),
    (admission_facts.PodFacts(uid="another", node_name="node-a"), "UID differs"),
    (admission_facts.PodFacts(uid="1db066b1", node_name=""), "not scheduled"),
])  # fmt: skip
async def test_rule_3_pod_lookup_refusals(facts: admission_facts.PodFacts | None,
                                          says: str) -> None:
    pods = Pods({"plugin-a": facts} if facts else {})
    message = await _refusal(_guards(pods), plugin(None), "node-a")
    assert "refused by rule 3 (same node)" in message and says in message


async def test_rule_3_lookup_outage_is_503_and_never_allows() -> None:
    with pytest.raises(errors.ServiceUnavailable) as failed:
        await _guards(Pods(down=True)).check(resources.NODE_MODEL_STORE, plugin(None), "node-a")
    assert "rule 3 (same node) could not be checked" in failed.value.message


async def test_long_names_are_cut_in_messages() -> None:
    message = await _refusal(_guards(), users.UserInfo("x" * 10_000), "n" * 10_000)
    assert len(message) < 1200
