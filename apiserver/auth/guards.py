"""Write guards that go beyond authentication: who may write a status."""

from __future__ import annotations

from apiserver import errors
from apiserver.auth import user as users


def require_worker(user: users.UserInfo, worker_username: str, *,
                   what: str = "a ModelArtifact's status") -> None:
    """Refuse (403) anyone but the worker identity; only the worker writes ``what``."""
    if worker_username and user.name == worker_username:
        return
    raise errors.Forbidden(
        f'only the worker writes {what}; user "{user.name}" may not'
        " (the worker reports what it resolved and downloaded, and mounts are authorized"
        " from it)"
    )
