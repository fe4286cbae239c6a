"""The review APIs over ``kube.Client``: each call one request; failures become
``webhook.Unavailable`` (retriable when kube-apiserver may answer next time) or ``NotServed``."""

from __future__ import annotations

from typing import Any

import kube
from apiserver.auth import reviews, webhook, worker
from apiserver.auth import user as users


def unavailable(exc: kube.KubeError) -> webhook.Unavailable:
    """A short, fixed-form reason (the typed error's code and reason word; never a body)."""
    if isinstance(exc, kube.ConnectionFailed):
        return webhook.Unavailable(f"kube-apiserver unreachable ({exc.reason})")
    if isinstance(exc, kube.ServerError):
        return webhook.Unavailable(f"kube-apiserver answered {exc.code} {exc.reason}")
    return webhook.Unavailable(f"kube-apiserver answered {exc.code} {exc.reason}",
                               retriable=False)


async def _post(client: kube.Client, path: str, body: dict[str, Any]) -> Any:
    try:
        return (await client.request("POST", path, json_body=body)).json()
    except kube.KubeError as exc:
        raise unavailable(exc) from None
    except ValueError:
        raise webhook.Unavailable("kube-apiserver answered something that is not JSON",
                                  retriable=False) from None


class TokenReviews:
    """``tokenreviews`` (needs ``system:auth-delegator``)."""

    def __init__(self, client: kube.Client) -> None:
        self.client = client

    async def review(self, token: str, audiences: tuple[str, ...]
                     ) -> reviews.TokenReviewStatus:
        answer = await _post(self.client, reviews.TOKEN_REVIEWS,
                             reviews.token_review(token, audiences))
        return reviews.parse_token_review(answer)


class AccessReviews:
    """``subjectaccessreviews`` (needs ``system:auth-delegator``)."""

    def __init__(self, client: kube.Client) -> None:
        self.client = client

    async def review(self, spec: reviews.AccessReviewSpec) -> reviews.AccessReviewStatus:
        answer = await _post(self.client, reviews.SUBJECT_ACCESS_REVIEWS,
                             reviews.access_review(spec))
        return reviews.parse_access_review(answer)


class OwnIdentity:
    """The server's own identity: SelfSubjectReview, and TokenReview of its own token."""

    def __init__(self, client: kube.Client, reviewer: kube.Client) -> None:
        self.client = client
        self.reviewer = reviewer

    async def whoami(self) -> users.UserInfo:
        try:
            answer = await self.client.self_subject_review()
        except kube.NotFound:
            raise worker.NotServed() from None
        except kube.KubeError as exc:
            raise unavailable(exc) from None
        found = reviews.user_info(answer)
        if found is None:
            raise webhook.Unavailable("the SelfSubjectReview answer names no user",
                                      retriable=False)
        return found

    async def review_own_token(self) -> reviews.TokenReviewStatus | None:
        try:
            token = await self.client.bearer_token()
        except kube.KubeError as exc:
            raise unavailable(exc) from None
        if not token:
            return None
        try:
            answer = (await self.reviewer.request(
                "POST", reviews.TOKEN_REVIEWS, json_body=reviews.token_review(token))).json()
        except kube.NotFound:
            raise worker.NotServed() from None
        except kube.KubeError as exc:
            raise unavailable(exc) from None
        return reviews.parse_token_review(answer)
