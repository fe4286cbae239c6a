"""The bindings' registration: status only, so it runs wherever controllers run."""

from __future__ import annotations

from controllers import registration
from controllers.bindings import controller
from controllers.runtime import client as clients
from controllers.runtime import manager


def build(deps: registration.Deps) -> manager.Runnable:
    return controller.Bindings(
        deps.api, deps.informer(deps.api, clients.MODEL_STORE_BINDINGS),
        deps.informer(deps.api, clients.MODEL_PREFETCHES), deps.artifacts, deps.view.informer,
        deps.view.index, deps.clock)


REGISTRATION = registration.Registration(name="bindings", needs=frozenset(), build=build)
