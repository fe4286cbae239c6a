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
    assert documented.roles == (policy.WORKER, policy.PLUGIN, reader)
