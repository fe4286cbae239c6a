"""One model of who may do what with worker.gpustack.ai: the chart's ClusterRoles, the roles
standalone mode builds in (``apiserver.auth.policy``) and the YAML docs/auth.md prints grant the
same verbs on the same resources, under the same names and to the same identities."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pytest
import yaml

from apiserver.auth import policy, rbac
from apiserver.flags import config
from devkit import helm

GROUP = "worker.gpustack.ai"
Triple = tuple[str, str, str, tuple[str, ...]]


def _chart_rules(role: dict[str, Any]) -> set[Triple]:
    return {(group, resource, verb, tuple(rule.get("resourceNames") or ()))
            for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]
            if group == GROUP}  # fmt: skip


def _policy_rules(rules: Iterable[rbac.Rule]) -> set[Triple]:
    return {(group, resource, verb, rule.resource_names) for rule in rules
            for group in rule.api_groups for resource in rule.resources for verb in rule.verbs}


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return helm.template().docs()


@pytest.mark.parametrize("builtin", [policy.WORKER, policy.PLUGIN, policy.TENANT_READER,
                                     policy.TENANT_EDITOR, policy.GPUSTACK_SERVER,
                                     policy.ANCHOR_GRANTER],
                         ids=lambda r: r.name)
def test_the_charts_cluster_roles_are_the_builtin_roles(
    docs: list[dict[str, Any]], builtin: rbac.Role
) -> None:
    chart = helm.one(docs, "ClusterRole", builtin.name)  # same name with the default release
    assert _chart_rules(chart) == _policy_rules(builtin.rules)
    # the standalone policy parser reads the chart's own YAML to the same rules
    parsed = rbac.parse([chart], source="chart")
    (role,) = [r for r in parsed.roles if r.name == builtin.name]
    assert _policy_rules(r for r in role.rules if GROUP in r.api_groups) \
        == _policy_rules(builtin.rules)


def test_they_are_bound_to_the_identities_standalone_mode_creates(
    docs: list[dict[str, Any]],
) -> None:
    worker = helm.one(docs, "ClusterRoleBinding", policy.WORKER_ROLE)
    (subject,) = worker["subjects"]
    assert f"system:serviceaccount:{subject['namespace']}:{subject['name']}" \
        == config.DEFAULT_WORKER_USER
    plugin = helm.one(docs, "ClusterRoleBinding", policy.PLUGIN_ROLE)
    (subject,) = plugin["subjects"]
    assert subject["name"] == config.DEFAULT_PLUGIN_SERVICE_ACCOUNT
    assert subject["namespace"] == config.DEFAULT_NAMESPACE == helm.NAMESPACE


def test_docs_auth_prints_the_same_roles() -> None:
    text = (helm.REPO / "docs" / "auth.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    printed = {doc["metadata"]["name"]: doc for block in blocks
               for doc in yaml.safe_load_all(block) if doc and doc.get("kind") == "ClusterRole"}
    for builtin in (policy.WORKER, policy.PLUGIN, policy.TENANT_READER, policy.TENANT_EDITOR,
                    policy.GPUSTACK_SERVER, policy.ANCHOR_GRANTER):
        assert _chart_rules(printed[builtin.name]) == _policy_rules(builtin.rules), builtin.name


def test_a_difference_would_show(docs: list[dict[str, Any]]) -> None:
    chart = helm.one(docs, "ClusterRole", policy.PLUGIN_ROLE)
    widened = {**chart, "rules": [*chart["rules"], {
        "apiGroups": [GROUP], "resources": ["modelartifacts/status"], "verbs": ["patch"]}]}
    assert _chart_rules(widened) != _policy_rules(policy.PLUGIN.rules)
