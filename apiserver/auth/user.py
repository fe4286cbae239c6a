"""The authenticated identity attached to each request (``request.scope["user"]``)."""

from __future__ import annotations

import dataclasses

ANONYMOUS = "system:anonymous"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclasses.dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS
