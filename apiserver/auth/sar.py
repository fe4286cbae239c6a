"""Delegated authorization: a SubjectAccessReview per request, cached (kube's webhook authorizer).

The review's spec carries the user (name, uid, groups, extra) and the request's attributes
(``apiserver.auth.attributes``): resource requests with verb, group, version, resource,
subresource, namespace and name, non-resource requests with path and verb. ``allowed`` allows;
``denied`` or neither refuses (403); both set refuses. Answers are cached by what the spec holds
(kube keys by its JSON), allowed ones ``allowed_ttl`` and refusals ``denied_ttl`` (10 s each,
kube's defaults), at most
``max_entries`` of them. When the review cannot be made the request fails closed (500) and the
log says why; nothing is cached then.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, cache, reviews, webhook

log = logging.getLogger(__name__)

DEFAULT_TTL = 10.0
DEFAULT_MAX_ENTRIES = 8192


Key = tuple[object, ...]


def _key(a: attrs.Attributes) -> Key:
    """Everything the review's spec carries: the user and the request's attributes."""
    user = a.user
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items())) if user.extra else ()
    if a.resource_request:
        what: Key = (True, a.namespace, a.verb, a.api_group, a.api_version, a.resource,
                     a.subresource, a.name)
    else:
        what = (False, a.path, a.verb)
    return (user.name, user.uid, user.groups, extra, *what)


class AccessReviewer(Protocol):
    """One SubjectAccessReview; raises ``webhook.Unavailable`` when it cannot be made."""

    async def review(self, spec: reviews.AccessReviewSpec) -> reviews.AccessReviewStatus: ...


class SubjectAccessReview:
    def __init__(
        self,
        reviewer: AccessReviewer,
        *,
        allowed_ttl: float = DEFAULT_TTL,
        denied_ttl: float = DEFAULT_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        calls: webhook.Calls = webhook.DEFAULT_CALLS,
        clock: cache.Clock | None = None,
    ) -> None:
        self.reviewer = reviewer
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self.calls = calls
        self.cache: cache.ExpiringCache[Key, authorizer.Verdict] = cache.ExpiringCache(
            max_entries, clock=clock or time.monotonic)

    async def authorize(self, attributes: attrs.Attributes) -> authorizer.Verdict:
        # The key holds exactly what the review's spec holds (kube keys by the spec's JSON), as
        # a tuple: hashing it is cheaper than building and encoding the spec on every hit.
        return await self.cache.get_or_compute(
            _key(attributes), lambda: self._review(reviews.access_review_spec(attributes)),
            self._ttl)

    def _ttl(self, verdict: authorizer.Verdict) -> float:
        if verdict.error:
            return 0.0
        return self.allowed_ttl if verdict.allowed else self.denied_ttl

    async def _review(self, spec: reviews.AccessReviewSpec) -> authorizer.Verdict:
        try:
            status = await self.calls.call(lambda: self.reviewer.review(spec))
        except webhook.Unavailable as exc:
            log.error("SubjectAccessReview failed, refusing the request (fail closed): %s",
                      exc.reason)
            return authorizer.Verdict(authorizer.Decision.NO_OPINION,
                                      error=f"SubjectAccessReview failed: {exc.reason}")
        if status.allowed and status.denied:
            return authorizer.Verdict(authorizer.Decision.DENY, status.reason)
        if status.allowed:
            return authorizer.Verdict(authorizer.Decision.ALLOW, status.reason)
        if status.denied:
            return authorizer.Verdict(authorizer.Decision.DENY, status.reason)
        return authorizer.Verdict(authorizer.Decision.NO_OPINION, status.reason)
