"""The node stores' registrations: ``REGISTRATION`` creates NodeModelStores and writes their spec
(the settings with the winning ModelStore merged over them), which only the in-process client
can, so it runs in the API server (``Need.WRITER``); ``POOLS`` writes the ModelStores' status
(nodes won, ``SelectorOverlap``) and runs wherever controllers run. Both read the same pool
layer (``pools.Pools``)."""

from __future__ import annotations

from controllers import registration
from controllers.nodestores import controller, nodes, pools, storestatus
from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import informer, manager


def _pools(deps: registration.Deps) -> pools.Pools:
    stores = deps.informer(deps.api, clients.MODEL_STORES)
    if deps.cluster is None:
        return pools.Pools(stores, pools.HostnameOnly())
    found = deps.informer(deps.cluster, clients.NODES)
    return pools.Pools(stores, pools.NodeLabels(found), found)


def build(deps: registration.Deps) -> manager.Runnable:
    base = storesettings.base_of(deps.config.hub)
    found = deps.settings
    layer = _pools(deps)
    if deps.cluster is None or deps.kube is None or found is None:
        names = [name for name, _ in deps.config.nodes]
        return controller.NodeStores(deps.writer(), deps.view.informer,
                                     nodes.StaticNodes(names),
                                     controller.FixedSettings(base), deps.clock, pools=layer)
    # run by the controller itself (nodes.CsiNodes.run): CSINodes that cannot be read hold up the
    # node stores only
    csinodes = informer.Informer(deps.cluster, clients.CSI_NODES, deps.clock)
    watched = storesettings.ConfigMapSettings(
        found.configmaps, namespace=found.namespace, name=found.name, base=base,
        recorder=deps.recorder)
    # run by the controller itself too: the CSIDriver's absence removes every node store
    drivers = informer.Informer(deps.cluster, clients.CSI_DRIVERS, deps.clock)
    return controller.NodeStores(
        deps.writer(), deps.view.informer, nodes.CsiNodes(csinodes, deps.cluster), watched,
        deps.clock, configz=nodes.KubeConfigz(deps.kube.node_configz), pools=layer,
        driver=nodes.CsiDriver(drivers))


def build_pools(deps: registration.Deps) -> manager.Runnable:
    return storestatus.StoreStatus(deps.api, _pools(deps), deps.view.informer, deps.clock)


REGISTRATION = registration.Registration(
    name="nodestores", needs=frozenset({registration.Need.WRITER}), build=build)
POOLS = registration.Registration(name="nodestores.pools", needs=frozenset(), build=build_pools)
