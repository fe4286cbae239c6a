"""The warm-gate controller's registration: it patches Pods in kube-apiserver and writes none of
our objects, so it runs wherever controllers run; standalone (no Pods) it idles."""

from __future__ import annotations

import asyncio

from controllers import registration
from controllers.runtime import client as clients
from controllers.runtime import manager
from controllers.warmgate import controller
from openapi import keys


class Idle:
    """Standalone: no kube-apiserver, no gated Pod."""

    name = "warmgate"

    def __init__(self) -> None:
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        await self._stopped.wait()

    def stop(self) -> None:
        self._stopped.set()


def build(deps: registration.Deps) -> manager.Runnable:
    if deps.cluster is None:
        return Idle()
    pods = deps.informer(deps.cluster, clients.PODS, label_selector=keys.WAITING_SELECTOR)
    return controller.WarmGate(pods, deps.cluster, deps.warm, deps.view.index, deps.artifacts,
                               deps.recorder, deps.clock)


REGISTRATION = registration.Registration(name="warmgate", needs=frozenset(), build=build)
