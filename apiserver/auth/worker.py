"""The worker identity: the one user allowed to write a ModelArtifact's status.

In a cluster the server runs as the worker's ServiceAccount, so it learns the name from
kube-apiserver (docs/auth.md, "Status guards"): a SelfSubjectReview (``authentication.k8s.io/v1``,
served since 1.28), or, where that is not served, a TokenReview of its own token. With neither,
the identity is unknown: status writes are refused with the reason, and the controllers wait.
``learn`` is one attempt; ``controllers.runtime.identity.Learning`` makes them, at start and
again with backoff until one succeeds, logging and counting each failure. In standalone mode the
name is configured (``--worker-user``) and its token is in the token file.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol

from apiserver.auth import reviews, webhook
from apiserver.auth import user as users

log = logging.getLogger(__name__)


class NotServed(Exception):
    """kube-apiserver does not serve the review (404): too old, or the API is disabled."""


class SelfReviewer(Protocol):
    async def whoami(self) -> users.UserInfo:
        """The caller's own identity (SelfSubjectReview); raises ``NotServed`` on 404 and
        ``webhook.Unavailable`` when the review cannot be made."""
        ...


class OwnTokenReviewer(Protocol):
    async def review_own_token(self) -> reviews.TokenReviewStatus | None:
        """A TokenReview of the server's own bearer token; None when its credential is not a
        bearer token (a client certificate, for example)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerIdentity:
    user: users.UserInfo | None
    learned_by: str = ""
    """``SelfSubjectReview``, ``TokenReview`` or ``configured``."""
    reason: str = ""
    """Why the identity is unknown (empty when known)."""

    @property
    def known(self) -> bool:
        return self.user is not None

    @property
    def name(self) -> str:
        return self.user.name if self.user is not None else ""

    def is_worker(self, user: users.UserInfo) -> bool:
        return self.user is not None and bool(self.user.name) and user.name == self.user.name

    @classmethod
    def configured(cls, name: str) -> WorkerIdentity:
        return cls(users.UserInfo(name), learned_by="configured")

    @classmethod
    def unknown(cls, reason: str) -> WorkerIdentity:
        return cls(None, reason=reason)


UNKNOWN_YET = WorkerIdentity.unknown("the worker identity has not been learned yet")


def expect(identity: WorkerIdentity, name: str) -> WorkerIdentity:
    """``identity`` when it is ``name`` (or no name is expected); unknown, saying both names,
    when the server runs as someone else than configured."""
    if not name or not identity.known or identity.name == name:
        return identity
    return WorkerIdentity.unknown(
        f"the server authenticates as {identity.name} ({identity.learned_by}), but --worker-user "
        f"says {name}")


async def learn(self_reviewer: SelfReviewer, token_reviewer: OwnTokenReviewer) -> WorkerIdentity:
    """One attempt: SelfSubjectReview first; TokenReview of the own token only where SSR is not
    served. Unknown, saying why, when neither tells (the caller logs it)."""
    try:
        found = await self_reviewer.whoami()
        log.info("worker identity %s (SelfSubjectReview)", found.name)
        return WorkerIdentity(found, learned_by="SelfSubjectReview")
    except NotServed:
        ssr = "kube-apiserver does not serve SelfSubjectReview"
    except webhook.Unavailable as exc:
        return WorkerIdentity.unknown(f"the SelfSubjectReview failed: {exc.reason}")
    try:
        status = await token_reviewer.review_own_token()
    except (NotServed, webhook.Unavailable) as exc:
        why = exc.reason if isinstance(exc, webhook.Unavailable) else "not served"
        identity = WorkerIdentity.unknown(f"{ssr}, and the TokenReview of its own token failed: "
                                          f"{why}")
    else:
        if status is None:
            identity = WorkerIdentity.unknown(
                f"{ssr}, and the server's credential is not a bearer token it could review")
        elif not status.authenticated or status.user is None:
            identity = WorkerIdentity.unknown(
                f"{ssr}, and the TokenReview of its own token did not authenticate it"
                + (f" ({status.error[:200]})" if status.error else ""))
        else:
            log.info("worker identity %s (TokenReview of its own token)", status.user.name)
            return WorkerIdentity(status.user, learned_by="TokenReview")
    return identity
