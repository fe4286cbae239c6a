"""The resolver's registration: it writes only status, so it runs wherever controllers run."""

from __future__ import annotations

import logging

from controllers import registration
from controllers.resolver import controller, hubs, passes
from controllers.resolver import settings as resolver_settings
from controllers.runtime import manager
from hub import config as hub_config
from hub import errors as hub_errors

log = logging.getLogger(__name__)


def build(deps: registration.Deps) -> manager.Runnable:
    cfg = deps.config
    hub_set = hubs.Hubs(cfg.hub)
    deps.on_close(hub_set.aclose)
    resolver = controller.Resolver(
        deps.api, deps.artifacts, passes.Passes(hub_set, hubs.ListingCache()), hub_set,
        deps.secrets, deps.claims, deps.clock, interval=cfg.revalidate_interval,
        recorder=deps.recorder, concurrency=cfg.resolver_concurrency, ledger=deps.ledger,
        manifests=deps.manifests)
    found = deps.settings
    if found is not None:

        def reconfigure(hub: hub_config.HubConfig, interval: float) -> None:
            """New hub settings or interval (the settings ConfigMap changed)."""
            try:
                hub_set.reconfigure(hub)
            except hub_errors.HubError as exc:
                log.warning("hub settings refused: %s; keeping the previous ones", exc.message)
            resolver.interval = interval

        resolver_settings.ClusterSettings(
            found.configmaps, namespace=found.namespace, name=found.name, base=cfg.hub,
            interval=cfg.revalidate_interval, state_dir=deps.state_dir, apply=reconfigure)
    return resolver


REGISTRATION = registration.Registration(name="resolver", needs=frozenset(), build=build)
