"""SubjectAccessReview authorization: kube's decisions, a 10 s cache both ways, fail closed."""

from __future__ import annotations

from apiserver.auth import attributes, authorizer, reviews, sar, webhook
from apiserver.auth import user as users
from tests.unit.apiserver.auth.test_cache import Clock

ALICE = users.UserInfo("alice", groups=("tenants", users.AUTHENTICATED))
G = "/apis/worker.gpustack.ai/v1"


class Reviewer:
    def __init__(self, allowed: set[str] | None = None, *, down: bool = False,
                 status: reviews.AccessReviewStatus | None = None) -> None:
        self.allowed = allowed or set()
        self.down = down
        self.status = status
        self.specs: list[reviews.AccessReviewSpec] = []

    async def review(self, spec: reviews.AccessReviewSpec) -> reviews.AccessReviewStatus:
        self.specs.append(spec)
        if self.down:
            raise webhook.Unavailable("connection refused")
        if self.status is not None:
            return self.status
        namespace = spec.get("resourceAttributes", {}).get("namespace", "")
        return reviews.AccessReviewStatus(allowed=namespace in self.allowed)


def _get(namespace: str, user: users.UserInfo = ALICE) -> attributes.Attributes:
    return attributes.parse(user, "GET", f"{G}/namespaces/{namespace}/modelartifacts/q", "")


ONCE = webhook.Calls(retry=webhook.NO_RETRY)


def _sar(reviewer: Reviewer, clock: Clock | None = None) -> sar.SubjectAccessReview:
    return sar.SubjectAccessReview(reviewer, clock=clock, calls=ONCE)


async def test_allowed_and_denied_are_cached_ten_seconds() -> None:
    clock = Clock()
    reviewer = Reviewer({"team-a"})
    judge = _sar(reviewer, clock)
    for _ in range(3):
        assert (await judge.authorize(_get("team-a"))).allowed
        assert not (await judge.authorize(_get("team-b"))).allowed
    assert len(reviewer.specs) == 2
    clock.now += 10.1
    await judge.authorize(_get("team-a"))
    await judge.authorize(_get("team-b"))
    assert len(reviewer.specs) == 4


async def test_the_key_is_the_whole_spec() -> None:
    reviewer = Reviewer({"team-a"})
    judge = _sar(reviewer)
    await judge.authorize(_get("team-a"))
    await judge.authorize(_get("team-a", users.UserInfo("bob", groups=ALICE.groups)))
    await judge.authorize(_get("team-a", users.UserInfo("alice", groups=("other",))))
    progress = attributes.parse(ALICE, "GET", f"{G}/namespaces/team-a/modelartifacts/q/progress",
                                "")
    await judge.authorize(progress)
    assert len(reviewer.specs) == 4
    assert reviewer.specs[-1]["resourceAttributes"]["subresource"] == "progress"


async def test_outcomes_as_kube_reads_them() -> None:
    def status(**fields: object) -> reviews.AccessReviewStatus:
        return reviews.AccessReviewStatus(**fields)  # type: ignore[arg-type]

    cases = [
        (status(allowed=True, reason="RBAC: ok"), authorizer.Decision.ALLOW, "RBAC: ok"),
        (status(allowed=False, denied=True, reason="no"), authorizer.Decision.DENY, "no"),
        (status(allowed=False), authorizer.Decision.NO_OPINION, ""),
        (status(allowed=True, denied=True), authorizer.Decision.DENY, ""),
    ]
    for answer, decision, reason in cases:
        verdict = await _sar(Reviewer(status=answer)).authorize(_get("x"))
        assert (verdict.decision, verdict.reason, verdict.error) == (decision, reason, "")


async def test_an_outage_fails_closed_and_is_not_cached(caplog: object) -> None:
    reviewer = Reviewer({"team-a"}, down=True)
    judge = _sar(reviewer)
    verdict = await judge.authorize(_get("team-a"))
    assert not verdict.allowed and "SubjectAccessReview failed" in verdict.error
    reviewer.down = False
    assert (await judge.authorize(_get("team-a"))).allowed


async def test_the_cache_is_bounded() -> None:
    judge = sar.SubjectAccessReview(Reviewer(), max_entries=10, calls=ONCE)
    for index in range(500):
        await judge.authorize(_get(f"ns-{index}"))
    assert len(judge.cache) == 10
