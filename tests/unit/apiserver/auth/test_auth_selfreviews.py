"""The statuses of the self reviews, in kube-apiserver's shapes (the recorded samples)."""

from __future__ import annotations

import json
import pathlib

from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, rbac, reviews, selfreviews
from apiserver.auth import user as users

SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "data" / "kube-samples"
ALICE = users.UserInfo("alice", "alice-uid", ("tenants", users.AUTHENTICATED))


class Fixed:
    def __init__(self, verdict: authorizer.Verdict) -> None:
        self.verdict = verdict
        self.asked: list[attrs.Attributes] = []

    async def authorize(self, a: attrs.Attributes) -> authorizer.Verdict:
        self.asked.append(a)
        return self.verdict


def _sample(name: str) -> dict[str, object]:
    found: dict[str, object] = json.loads((SAMPLES / name).read_text())
    return found


async def test_an_allowed_review_carries_the_reason_as_kube_does() -> None:
    reason = 'RBAC: allowed by RoleBinding "alice-reader/team-a" of Role "reader" to User "alice"'
    judge = Fixed(authorizer.Verdict(authorizer.Decision.ALLOW, reason))
    target = attrs.Attributes(user=ALICE, verb="get", path="", resource_request=True,
                              namespace="team-a", resource="modelartifacts")
    status = await selfreviews.access(judge, target)
    assert status == _sample("sar-allowed.json")["status"]
    assert judge.asked == [target]


async def test_no_opinion_is_only_allowed_false() -> None:
    status = await selfreviews.access(Fixed(authorizer.NO_OPINION),
                                      attrs.Attributes(user=ALICE, verb="get", path="/x"))
    assert status == _sample("sar-denied.json")["status"] == {"allowed": False}


async def test_a_deny_and_an_evaluation_error_are_shown_bounded() -> None:
    denied = await selfreviews.access(
        Fixed(authorizer.Verdict(authorizer.Decision.DENY, "no")),
        attrs.Attributes(user=ALICE, verb="get", path="/x"))
    assert denied == {"allowed": False, "denied": True, "reason": "no"}
    failed = await selfreviews.access(
        Fixed(authorizer.Verdict(authorizer.Decision.NO_OPINION, error="e" * 5000)),
        attrs.Attributes(user=ALICE, verb="get", path="/x"))
    assert failed["allowed"] is False and len(failed["evaluationError"]) < 300


def test_rules_leave_empty_lists_out() -> None:
    status = selfreviews.rules((
        rbac.Rule(("get", "list"), ("worker.gpustack.ai",), ("modelartifacts",)),
        rbac.Rule(("get",), ("",), ("configmaps",), ("settings",)),
        rbac.Rule(("get",), non_resource_urls=("/healthz", "/version")),
    ))
    assert status == {
        "resourceRules": [
            {"verbs": ["get", "list"], "apiGroups": ["worker.gpustack.ai"],
             "resources": ["modelartifacts"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
             "resourceNames": ["settings"]},
        ],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/version"]}],
        "incomplete": False,
    }
    assert selfreviews.rules(()) == {"resourceRules": [], "nonResourceRules": [],
                                     "incomplete": False}


def test_user_info_is_the_sample_field_for_field_and_in_order() -> None:
    sample = _sample("selfsubjectreview-sa.json")["status"]
    assert isinstance(sample, dict)
    user = reviews.user_info(sample["userInfo"])
    assert user is not None
    shown = selfreviews.user_info(user)
    assert json.dumps(shown) == json.dumps(sample["userInfo"])


def test_user_info_leaves_an_empty_uid_and_extra_out() -> None:
    shown = selfreviews.user_info(users.UserInfo("admin", groups=(users.MASTERS,)))
    assert shown == {"username": "admin", "groups": [users.MASTERS]}
