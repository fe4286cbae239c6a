"""TokenReview authentication: kube's outcomes, a 10 s cache keyed without the token, a hard
size bound, a bounded wait, and an outage that refuses."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.auth import authenticator, bearer, reviews, tokenreview, webhook
from apiserver.auth import user as users
from tests.unit.apiserver.auth.test_cache import Clock

ALICE = users.UserInfo("alice", uid="a-1", groups=("tenants", users.AUTHENTICATED))


class Reviewer:
    def __init__(self, answers: dict[str, reviews.TokenReviewStatus] | None = None, *,
                 down: bool = False, hang: asyncio.Event | None = None) -> None:
        self.answers = answers or {}
        self.down = down
        self.hang = hang
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    async def review(self, token: str, audiences: tuple[str, ...]
                     ) -> reviews.TokenReviewStatus:
        self.calls.append((token, audiences))
        if self.down:
            raise webhook.Unavailable("connection refused")
        if self.hang is not None:
            await self.hang.wait()
        return self.answers.get(token, reviews.TokenReviewStatus(
            authenticated=False, error="invalid bearer token"))


def _authenticator(reviewer: Reviewer, clock: Clock | None = None,
                   **options: object) -> tokenreview.TokenReview:
    options.setdefault("calls", webhook.Calls(retry=webhook.NO_RETRY))
    return tokenreview.TokenReview(reviewer, clock=clock, **options)  # type: ignore[arg-type]


def _credentials(token: str) -> authenticator.Credentials:
    return authenticator.Credentials({"authorization": [f"Bearer {token}"]})


async def test_a_valid_token_is_its_user_and_cached_ten_seconds() -> None:
    clock = Clock()
    reviewer = Reviewer({"good": reviews.TokenReviewStatus(True, ALICE)})
    tokens = _authenticator(reviewer, clock)
    for _ in range(3):
        assert (await tokens.authenticate_token("good")).user == ALICE
    assert len(reviewer.calls) == 1
    clock.now += 9.9
    await tokens.authenticate_token("good")
    assert len(reviewer.calls) == 1
    clock.now += 0.2
    await tokens.authenticate_token("good")
    assert len(reviewer.calls) == 2


async def test_a_plain_refusal_is_cached_an_error_is_not() -> None:
    reviewer = Reviewer({"unknown": reviews.TokenReviewStatus(False)})
    tokens = _authenticator(reviewer)
    assert (await tokens.authenticate_token("unknown")) == authenticator.NO_OPINION
    assert (await tokens.authenticate_token("unknown")) == authenticator.NO_OPINION
    assert len(reviewer.calls) == 1
    for _ in range(2):
        outcome = await tokens.authenticate_token("expired")
        assert outcome.error == "invalid bearer token"
    assert len(reviewer.calls) == 3


async def test_bearer_layer_turns_every_refusal_into_401() -> None:
    reviewer = Reviewer({"unknown": reviews.TokenReviewStatus(False)})
    chain = authenticator.Chain([bearer.Bearer([_authenticator(reviewer)])])
    for token in ("unknown", "garbage-$%^", "expired"):
        result = await chain.authenticate(_credentials(token))
        assert result.user is None and result.errors
    anonymous = await chain.authenticate(authenticator.Credentials({}))
    assert anonymous.user == users.ANONYMOUS_USER


async def test_audiences_are_sent_and_must_intersect() -> None:
    reviewer = Reviewer({
        "peer": reviews.TokenReviewStatus(True, ALICE, audiences=("gpustack-model-peer",)),
        "api": reviews.TokenReviewStatus(True, ALICE, audiences=("https://kubernetes",)),
        "implicit": reviews.TokenReviewStatus(True, ALICE),
    })
    tokens = _authenticator(reviewer, audiences=("gpustack-model-peer",))
    assert (await tokens.authenticate_token("peer")).user == ALICE
    assert (await tokens.authenticate_token("api")) == authenticator.NO_OPINION
    assert (await tokens.authenticate_token("implicit")).user == ALICE
    assert {audiences for _, audiences in reviewer.calls} == {("gpustack-model-peer",)}
    plain = Reviewer({"t": reviews.TokenReviewStatus(True, ALICE)})
    await _authenticator(plain).authenticate_token("t")
    assert plain.calls == [("t", ())]


async def test_the_cache_key_is_not_the_token() -> None:
    tokens = _authenticator(Reviewer())
    key = tokens.key("secret-token-value")
    assert b"secret-token-value" not in key and len(key) == 32
    assert key == tokens.key("secret-token-value")
    assert key != _authenticator(Reviewer()).key("secret-token-value")  # per-process secret


async def test_a_flood_of_distinct_bad_tokens_keeps_the_cache_bounded() -> None:
    flood = {f"t{i}": reviews.TokenReviewStatus(False) for i in range(2000)}
    tokens = _authenticator(Reviewer(flood), max_entries=100)
    for token in flood:
        await tokens.authenticate_token(token)
        await tokens.authenticate_token(f"garbage-{token}")  # errors: never cached
        assert len(tokens.cache) <= 100
    assert len(tokens.cache) == 100


async def test_an_outage_is_an_error_and_not_cached() -> None:
    reviewer = Reviewer({"good": reviews.TokenReviewStatus(True, ALICE)}, down=True)
    tokens = _authenticator(reviewer)
    outcome = await tokens.authenticate_token("good")
    assert outcome.user is None and "unavailable" in outcome.error
    assert "good" not in outcome.error
    reviewer.down = False
    assert (await tokens.authenticate_token("good")).user == ALICE


async def test_a_slow_review_is_bounded_by_the_timeout() -> None:
    hang = asyncio.Event()  # never set: kube-apiserver never answers
    reviewer = Reviewer(hang=hang)
    tokens = _authenticator(reviewer, calls=webhook.Calls(0.05, webhook.NO_RETRY))
    outcome = await asyncio.wait_for(tokens.authenticate_token("slow"), 30)
    assert outcome.user is None and "no answer within 0.05s" in outcome.error
    assert len(tokens.cache) == 0


async def test_transient_failures_are_retried_with_backoff() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    attempts = 0

    async def flaky() -> int:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise webhook.Unavailable("503")
        return 1

    assert await webhook.call(flaky, sleep=sleep) == 1
    assert attempts == 3 and len(pauses) == 2
    assert 0.5 <= pauses[0] <= 0.6 and 0.75 <= pauses[1] <= 0.9

    async def refused() -> int:
        raise webhook.Unavailable("nope")

    with pytest.raises(webhook.Unavailable):
        await webhook.call(refused, sleep=sleep)
    assert len(pauses) == 2 + 4  # five attempts in all


async def test_no_authorization_or_other_scheme_is_no_opinion() -> None:
    reviewer = Reviewer()
    bearer_auth = bearer.Bearer([_authenticator(reviewer)])
    for headers in ({}, {"authorization": ["Basic Zm9vOmJhcg=="]}, {"authorization": ["Bearer"]},
                    {"authorization": ["Bearer "]}):
        outcome = await bearer_auth.authenticate(authenticator.Credentials(headers))
        assert outcome == authenticator.NO_OPINION
    assert reviewer.calls == []
