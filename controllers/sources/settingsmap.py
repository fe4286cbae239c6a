"""The settings ConfigMap (``--settings-configmap`` in the worker's ``--namespace``), watched once
for every controller that reads it: the resolver's hub settings and interval
(``resolver/settings.py``) and the node stores' spec (``nodestores/settings.py``) add their
handlers to the one informer, which holds every ConfigMap of the namespace (a key may name
another one: the CA bundle)."""

from __future__ import annotations

import dataclasses

from controllers.runtime import informer


@dataclasses.dataclass(frozen=True, slots=True)
class SettingsMap:
    configmaps: informer.Informer
    """The ConfigMaps of ``namespace``."""
    namespace: str
    name: str

