"""Learning the worker identity: SelfSubjectReview, else TokenReview of the own token, else
unknown with the reason."""

from __future__ import annotations

from apiserver.auth import reviews, webhook, worker
from apiserver.auth import user as users

SA = users.UserInfo("system:serviceaccount:gpustack-system:model-manager-worker",
                    groups=(users.AUTHENTICATED,))


class Self:
    def __init__(self, outcome: users.UserInfo | Exception) -> None:
        self.outcome = outcome

    async def whoami(self) -> users.UserInfo:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


class Own:
    def __init__(self, outcome: reviews.TokenReviewStatus | Exception | None) -> None:
        self.outcome = outcome
        self.asked = 0

    async def review_own_token(self) -> reviews.TokenReviewStatus | None:
        self.asked += 1
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


async def test_self_subject_review_first() -> None:
    own = Own(None)
    found = await worker.learn(Self(SA), own)
    assert found.known and found.user == SA and found.learned_by == "SelfSubjectReview"
    assert own.asked == 0
    assert found.is_worker(users.UserInfo(SA.name))
    assert not found.is_worker(users.UserInfo("alice"))


async def test_token_review_where_ssr_is_not_served() -> None:
    found = await worker.learn(Self(worker.NotServed()),
                               Own(reviews.TokenReviewStatus(True, SA)))
    assert found.user == SA and found.learned_by == "TokenReview"


async def test_neither_says_why() -> None:
    cases = [
        (Self(worker.NotServed()), Own(None), "not a bearer token"),
        (Self(worker.NotServed()), Own(reviews.TokenReviewStatus(False, error="expired")),
         "did not authenticate it (expired)"),
        (Self(worker.NotServed()), Own(webhook.Unavailable("timeout")), "failed: timeout"),
        (Self(webhook.Unavailable("connection refused")), Own(None),
         "SelfSubjectReview failed: connection refused"),
    ]
    for self_reviewer, own, says in cases:
        found = await worker.learn(self_reviewer, own)
        assert not found.known and says in found.reason
        assert not found.is_worker(users.UserInfo(""))


def test_unknown_until_learned() -> None:
    assert not worker.UNKNOWN_YET.known and worker.UNKNOWN_YET.name == ""
    assert worker.WorkerIdentity.configured("w").is_worker(users.UserInfo("w"))


def test_a_configured_name_must_match_the_learned_one() -> None:
    learned = worker.WorkerIdentity(SA, learned_by="SelfSubjectReview")
    assert worker.expect(learned, "") is learned
    assert worker.expect(learned, SA.name) is learned
    wrong = worker.expect(learned, "system:serviceaccount:ns:someone-else")
    assert not wrong.known
    assert SA.name in wrong.reason and "someone-else" in wrong.reason
    unknown = worker.WorkerIdentity.unknown("no review")
    assert worker.expect(unknown, SA.name) is unknown
