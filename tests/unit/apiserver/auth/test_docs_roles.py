"""docs/auth.md prints the built-in roles the chart mirrors; they must be the ones the code uses."""

from __future__ import annotations

import pathlib
import re

import yaml

from apiserver.auth import policy, rbac

DOC = pathlib.Path(__file__).resolve().parents[4] / "docs" / "auth.md"


def test_the_documented_roles_are_the_built_in_ones() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    documented = rbac.parse(doc for block in blocks for doc in yaml.safe_load_all(block))
    reader = rbac.Role("model-artifact-reader", (rbac.Rule(
        ("get", "list", "watch"), (policy.GROUP,), ("modelartifacts", "modelartifacts/progress")),),
        "team-a")  # seed 001's tenant Role
    assert documented.roles == (policy.WORKER, policy.PLUGIN, policy.TENANT_READER,
                                policy.TENANT_EDITOR, policy.GPUSTACK_SERVER,
                                policy.ANCHOR_GRANTER, reader)


async def test_a_tenant_editor_bound_in_its_namespace_prefetches_there_only() -> None:
    from apiserver.auth import attributes as attrs
    from apiserver.auth import user as users

    binding = rbac.Binding("alice-editor", "ClusterRole", policy.TENANT_EDITOR_ROLE,
                           (rbac.Subject("User", "alice"),), "team-a")
    evaluator = rbac.Evaluator(policy.builtin(worker="w", plugin="p")
                               + rbac.Policy(bindings=(binding,)))
    alice = users.UserInfo(name="alice")

    async def allowed(verb: str, namespace: str, resource: str, subresource: str = "") -> bool:
        verdict = await evaluator.authorize(attrs.Attributes(
            user=alice, verb=verb, namespace=namespace, api_group=policy.GROUP,
            resource=resource, subresource=subresource, resource_request=True, path=""))
        return verdict.allowed

    assert await allowed("create", "team-a", "modelprefetches")
    assert await allowed("delete", "team-a", "modelprefetches")
    assert not await allowed("create", "team-b", "modelprefetches")
    assert not await allowed("list", "", "modelprefetches")  # all namespaces: no
    assert not await allowed("update", "team-a", "modelprefetches", "status")  # the worker's


async def test_no_tenant_role_may_anchor_and_the_granter_may_where_bound() -> None:
    from apiserver.auth import attributes as attrs
    from apiserver.auth import user as users

    bindings = (
        rbac.Binding("alice-editor", "ClusterRole", policy.TENANT_EDITOR_ROLE,
                     (rbac.Subject("User", "alice"),), "team-a"),
        rbac.Binding("alice-reader", "ClusterRole", policy.TENANT_READER_ROLE,
                     (rbac.Subject("User", "alice"),), "team-a"),
        rbac.Binding("ops-import", "ClusterRole", policy.ANCHOR_GRANTER_ROLE,
                     (rbac.Subject("User", "ops"),), "team-c"),
    )
    evaluator = rbac.Evaluator(policy.builtin(worker="w", plugin="p")
                               + rbac.Policy(bindings=bindings))

    async def may_anchor(user: str, namespace: str) -> bool:
        verdict = await evaluator.authorize(attrs.Attributes(
            user=users.UserInfo(name=user), verb="anchor", namespace=namespace,
            api_group=policy.GROUP, resource="modelartifacts", name="m", resource_request=True,
            path=""))
        return verdict.allowed

    assert not await may_anchor("alice", "team-a")
    assert await may_anchor("ops", "team-c")
    assert not await may_anchor("ops", "team-a")
    for role in policy.builtin(worker="w", plugin="p").roles:
        grants_anchor = any("anchor" in rule.verbs for rule in role.rules)
        assert grants_anchor == (role.name == policy.ANCHOR_GRANTER_ROLE), role.name
