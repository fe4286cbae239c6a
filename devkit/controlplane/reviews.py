"""TokenReview, SubjectAccessReview, SelfSubjectReview and SelfSubjectAccessReview answers, shaped
like kube-samples/ (spec echoed, ``authenticated`` absent on refusal, RBAC's ``reason``)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from devkit.controlplane import status
from devkit.controlplane.identity import API_AUDIENCE, Token, UserInfo, go_quote_list
from devkit.controlplane.rbac import Attributes, Policy

AUTHN = "authentication.k8s.io/v1"
AUTHZ = "authorization.k8s.io/v1"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fieldset(value: Any, top: bool) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    fields: dict[str, Any] = {} if top else {".": {}}
    for key in sorted(value):
        fields[f"f:{key}"] = _fieldset(value[key], False)
    return fields


def managed_fields(manager: str, api_version: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """What kube-apiserver records for a create through a client named ``manager``."""
    return [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": _now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": _fieldset(spec, True)},
        }
    ]


def manager_name(user_agent: str, field_manager: str | None) -> str:
    if field_manager:
        return field_manager
    return user_agent.split("/", 1)[0]


def _spec(body: Mapping[str, Any], kind: str) -> dict[str, Any]:
    if body.get("kind") not in (None, kind):
        raise status.StatusError(status.bad_request(
            f"the API version in the data ({body.get('apiVersion')}) does not match the expected"
            f" API version ({AUTHN if 'Token' in kind or 'Self' in kind else AUTHZ})"
        ))  # fmt: skip
    spec = body.get("spec", {})
    if not isinstance(spec, dict):
        raise status.StatusError(status.bad_request("spec must be an object"))
    return spec


def token_review(
    body: Mapping[str, Any],
    tokens: Mapping[str, Token],
    manager: str,
    api_audiences: tuple[str, ...] = (API_AUDIENCE,),
) -> dict[str, Any]:
    spec = _spec(body, "TokenReview")
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise status.StatusError(
            status.bad_request("token is required for TokenReview in authentication")
        )
    requested = spec.get("audiences") or []
    if not isinstance(requested, list) or not all(isinstance(a, str) for a in requested):
        raise status.StatusError(status.bad_request("spec.audiences must be a list of strings"))
    target = tuple(requested) or api_audiences
    entry = tokens.get(token)
    review_status: dict[str, Any]
    if entry is None:
        review_status = {"user": {}, "error": "invalid bearer token"}
    else:
        held = api_audiences if entry.audiences is None else entry.audiences
        common = [a for a in target if a in held]
        if not common and entry.audiences is None:
            review_status = {"user": {}, "error": "invalid bearer token"}
        elif not common:
            review_status = {
                "user": {},
                "error": f"[invalid bearer token, token audiences {go_quote_list(held)} is "
                f"invalid for the target audiences {go_quote_list(target)}]",
            }
        else:
            review_status = {
                "authenticated": True,
                "user": entry.user.authenticated().wire(),
                "audiences": common,
            }
    return {
        "kind": "TokenReview",
        "apiVersion": AUTHN,
        "metadata": {"managedFields": managed_fields(manager, AUTHN, spec)},
        "spec": spec,
        "status": review_status,
    }


def _invalid(kind: str, field: str, detail: str, value: str = "null") -> status.StatusError:
    return status.StatusError(
        status.invalid(
            kind, "authorization.k8s.io", "", field, "Invalid value", f"{value}: {detail}"
        )
    )


def _attributes(user: UserInfo, spec: Mapping[str, Any], kind: str) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        raise _invalid(
            kind, "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )  # fmt: skip
    if isinstance(resource, dict):
        return Attributes(
            user=user,
            verb=str(resource.get("verb", "")),
            resource_request=True,
            namespace=str(resource.get("namespace", "")),
            group=str(resource.get("group", "")),
            version=str(resource.get("version", "")),
            resource=str(resource.get("resource", "")),
            subresource=str(resource.get("subresource", "")),
            name=str(resource.get("name", "")),
        )
    if not isinstance(non_resource, dict):
        raise status.StatusError(status.bad_request("nonResourceAttributes must be an object"))
    return Attributes(
        user=user,
        verb=str(non_resource.get("verb", "")),
        resource_request=False,
        path=str(non_resource.get("path", "")),
    )


def _decision_status(policy: Policy, attrs: Attributes) -> dict[str, Any]:
    decision = policy.authorize(attrs)
    answer: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        answer["reason"] = decision.reason
    return answer


def subject_access_review(body: Mapping[str, Any], policy: Policy, manager: str) -> dict[str, Any]:
    spec = _spec(body, "SubjectAccessReview")
    name = spec.get("user", "") or ""
    groups = spec.get("groups") or []
    if not name and not groups:
        raise _invalid(
            "SubjectAccessReview", "spec.user", "at least one of user or group must be specified",
            '""',
        )  # fmt: skip
    extra = spec.get("extra") or {}
    user = UserInfo(
        name=str(name),
        uid=str(spec.get("uid", "")),
        groups=tuple(str(g) for g in groups),
        extra={str(k): tuple(str(v) for v in vs) for k, vs in extra.items()},
    )
    attrs = _attributes(user, spec, "SubjectAccessReview")
    return {
        "kind": "SubjectAccessReview",
        "apiVersion": AUTHZ,
        "metadata": {"managedFields": managed_fields(manager, AUTHZ, spec)},
        "spec": spec,
        "status": _decision_status(policy, attrs),
    }


def self_subject_access_review(
    body: Mapping[str, Any], caller: UserInfo, policy: Policy, manager: str
) -> dict[str, Any]:
    spec = _spec(body, "SelfSubjectAccessReview")
    attrs = _attributes(caller, spec, "SelfSubjectAccessReview")
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": AUTHZ,
        "metadata": {"managedFields": managed_fields(manager, AUTHZ, spec)},
        "spec": spec,
        "status": _decision_status(policy, attrs),
    }


def self_subject_review(caller: UserInfo) -> dict[str, Any]:
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": AUTHN,
        "metadata": {"creationTimestamp": _now()},
        "status": {"userInfo": caller.wire()},
    }
