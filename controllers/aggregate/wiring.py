"""The aggregator's registration: it writes only status, so it runs wherever controllers run."""

from __future__ import annotations

from controllers import registration
from controllers.aggregate import controller
from controllers.runtime import manager


def build(deps: registration.Deps) -> manager.Runnable:
    return controller.Aggregator(deps.api, deps.artifacts, deps.view.index, deps.clock)


REGISTRATION = registration.Registration(name="aggregate", needs=frozenset(), build=build)
