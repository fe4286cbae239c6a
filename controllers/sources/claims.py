"""Whether a claim source's PersistentVolumeClaim exists: the claim is the whole resolution.

In a cluster the claims come from an informer on PersistentVolumeClaims (``ClaimInformer``). In
standalone mode there is no cluster to ask, so every claim counts as present (``AnyClaim``): the
artifact resolves at once and mounting it is the cluster's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from controllers.runtime import informer
from openapi import wire

Listener = Callable[[str, str], None]


class ClaimUnreadable(Exception):
    """The claims cannot be read right now (the informer has not listed them yet)."""


class Claims(Protocol):
    def exists(self, namespace: str, name: str) -> bool:
        """Raises ``ClaimUnreadable`` when it cannot tell."""
        ...

    def subscribe(self, listener: Listener) -> None: ...

    @property
    def checked(self) -> bool:
        """False when claims are not checked at all (standalone)."""
        ...


class AnyClaim:
    checked = False

    def exists(self, namespace: str, name: str) -> bool:
        return True

    def subscribe(self, listener: Listener) -> None:
        return None


class ClaimInformer:
    checked = True

    def __init__(self, claims: informer.Informer) -> None:
        self._informer = claims

    def exists(self, namespace: str, name: str) -> bool:
        if not self._informer.synced.is_set():
            why = self._informer.last_error or "listing"
            raise ClaimUnreadable(f"PersistentVolumeClaims are not read yet ({why})")
        return self._informer.get(namespace, name) is not None

    def subscribe(self, listener: Listener) -> None:
        def changed(old: wire.Obj | None, new: wire.Obj | None) -> None:
            obj = new or old
            if obj is None:
                return
            metadata = obj.get("metadata") or {}
            existed = old is not None
            exists = new is not None
            if existed != exists:
                listener(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))

        self._informer.add_handler(changed)
