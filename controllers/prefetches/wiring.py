"""The prefetches' two registrations: ``STATUS`` (status and delivery: it writes only a
prefetch's status and makes warm-up Pods, so it runs wherever controllers run) and ``PINS``
(``spec.pinned``: only the in-process client writes a NodeModelStore's spec, so it runs in the
API server). Both read the same informers."""

from __future__ import annotations

from controllers import registration
from controllers.prefetches import controller, inputs, pins, placement, plugindelivery, warmup
from controllers.runtime import client as clients
from controllers.runtime import informer, manager


def _nodes(deps: registration.Deps) -> informer.Informer | None:
    """The Nodes (labels for ``nodeSelector``) in a cluster; none standalone."""
    if deps.cluster is None:
        return None
    return deps.informer(deps.cluster, clients.NODES)


def _bindings(deps: registration.Deps) -> informer.Informer:
    """The ModelStoreBindings: the stores a prefetch may target."""
    return deps.informer(deps.api, clients.MODEL_STORE_BINDINGS)


def build_status(deps: registration.Deps) -> manager.Runnable:
    cfg = deps.config
    found = deps.informer(deps.api, clients.MODEL_PREFETCHES)
    nodes = _nodes(deps)
    if deps.cluster is None or nodes is None or deps.plugin_pods is None:
        # standalone: the request to each --node plugin
        delivery = plugindelivery.PluginDelivery(deps.plugins, deps.plugin_token, deps.secrets,
                                                 ca_file=cfg.plugin_ca_file)
        watched = inputs.Inputs(found, deps.artifacts, deps.view.informer,
                                bindings=_bindings(deps))
        return controller.Prefetches(deps.api, watched, deps.clock, delivery=delivery)
    pods = deps.informer(deps.cluster, clients.PODS, label_selector=warmup.SELECTOR)
    # where a warm-up Pod may go: the plugin Pods (the view's informer), the DaemonSets of the
    # plugin's namespace (their keyed tolerations) and the Nodes (taints, cordons)
    daemonsets = deps.informer(deps.cluster, clients.DAEMON_SETS,
                               namespace=cfg.plugin_namespace)
    warming = warmup.WarmupPods(pods, deps.cluster.create_pod, deps.cluster.delete_pod,
                                deps.clock,
                                placement.PluginPlacement(deps.plugin_pods, daemonsets, nodes),
                                image=cfg.prefetch_warmup_image,
                                retry_seconds=cfg.prefetch_warmup_retry)
    watched = inputs.Inputs(found, deps.artifacts, deps.view.informer, inputs.NodeLabels(nodes),
                            _bindings(deps))
    return controller.Prefetches(deps.api, watched, deps.clock, nodes=nodes, delivery=warming,
                                 owned=pods, failed_recheck=cfg.prefetch_warmup_retry)


def build_pins(deps: registration.Deps) -> manager.Runnable:
    found = deps.informer(deps.api, clients.MODEL_PREFETCHES)
    nodes = _nodes(deps)
    watched = inputs.Inputs(found, deps.artifacts, deps.view.informer,
                            inputs.NodeLabels(nodes) if nodes is not None else None,
                            _bindings(deps))
    return pins.Pins(deps.writer(), watched, deps.clock, nodes=nodes)


STATUS = registration.Registration(name="prefetches", needs=frozenset(), build=build_status)
PINS = registration.Registration(
    name="prefetches.pins", needs=frozenset({registration.Need.WRITER}), build=build_pins)
