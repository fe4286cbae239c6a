"""The label and annotation keys (and their values) the product sets on objects or selects them by.

The chart labels the node plugin's Pods with ``PLUGIN_LABELS`` and the API server finds them by
``PLUGIN_SELECTOR`` (``tests/unit/charts/test_install_contract.py`` checks the two agree); the
prefetch controller labels its warm-up Pods and lists them back by ``WARMUP_SELECTOR``. The anchor
grant's annotation is an anchor's word (``openapi.anchors``). Finalizers of our own: none yet; a
kind that adds one spells it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from openapi import resources

NAME: Final = "app.kubernetes.io/name"
COMPONENT: Final = "app.kubernetes.io/component"
MANAGED_BY: Final = "app.kubernetes.io/managed-by"

APP: Final = "model-manager"
"""The value of ``NAME`` on the chart's objects and of ``MANAGED_BY`` on the worker's Pods."""
PLUGIN: Final = "node-plugin"
"""The ``COMPONENT`` of the node plugin DaemonSet's Pods."""
WARMUP: Final = "model-prefetch-warmup"
"""The ``COMPONENT`` of a ModelPrefetch's warm-up Pods."""

PREFETCH_UID: Final = f"{resources.GROUP}/prefetch-uid"
"""On a warm-up Pod: the UID of the ModelPrefetch it warms for."""

PLUGIN_LABELS: Final[Mapping[str, str]] = {NAME: APP, COMPONENT: PLUGIN}
PLUGIN_SELECTOR: Final = f"{NAME}={APP},{COMPONENT}={PLUGIN}"
"""The default ``--plugin-pod-selector``: the plugin Pods as the chart labels them."""
WARMUP_SELECTOR: Final = f"{COMPONENT}={WARMUP}"
"""The warm-up Pods, as the prefetch controller lists them."""

HOSTNAME: Final = "kubernetes.io/hostname"
"""kubelet's node label: the placement term selects nodes by it (``openapi.placement``), and a
pool or a prefetch names nodes one by one with it (standalone mode, without Node objects, gives
each ``--node`` this label alone)."""
KUEUE_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
"""Kueue's annotation on a Pod whose PodSet Kueue places by topology: no placement term then."""
REQUIRE_WARM_NODE: Final = f"{resources.GROUP}/require-warm-node"
"""A Pod's opt-in annotation (value ``REQUIRE_WARM_NODE_ON``): run only on a node holding the
digests its model volumes name (the term becomes required)."""
REQUIRE_WARM_NODE_ON: Final = "true"
