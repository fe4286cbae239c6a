"""The node stores' registration: it creates NodeModelStores and writes their spec, which only the
in-process client can, so it runs in the API server (``Need.WRITER``)."""

from __future__ import annotations

from controllers import registration
from controllers.nodestores import controller, nodes
from controllers.nodestores import settings as storesettings
from controllers.runtime import client as clients
from controllers.runtime import informer, manager


def build(deps: registration.Deps) -> manager.Runnable:
    base = storesettings.base_of(deps.config.hub)
    found = deps.settings
    if deps.cluster is None or deps.kube is None or found is None:
        names = [name for name, _ in deps.config.nodes]
        return controller.NodeStores(deps.writer(), deps.view.informer,
                                     nodes.StaticNodes(names),
                                     controller.FixedSettings(base), deps.clock)
    # run by the controller itself (nodes.CsiNodes.run): CSINodes that cannot be read hold up the
    # node stores only
    csinodes = informer.Informer(deps.cluster, clients.CSI_NODES, deps.clock)
    watched = storesettings.ConfigMapSettings(
        found.configmaps, namespace=found.namespace, name=found.name, base=base,
        recorder=deps.recorder)
    return controller.NodeStores(
        deps.writer(), deps.view.informer, nodes.CsiNodes(csinodes, deps.cluster), watched,
        deps.clock, configz=nodes.KubeConfigz(deps.kube.node_configz))


REGISTRATION = registration.Registration(
    name="nodestores", needs=frozenset({registration.Need.WRITER}), build=build)
