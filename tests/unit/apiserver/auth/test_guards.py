"""The worker-only status guard."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.auth import guards
from apiserver.auth import user as users


def test_only_the_worker_passes() -> None:
    guards.require_worker(users.UserInfo("worker"), "worker")
    with pytest.raises(errors.Forbidden) as refused:
        guards.require_worker(users.UserInfo("alice"), "worker")
    assert "only the worker writes a ModelArtifact's status" in refused.value.message
    assert '"alice"' in refused.value.message
    with pytest.raises(errors.Forbidden):
        guards.require_worker(users.UserInfo(""), "")
