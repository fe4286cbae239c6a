"""The self reviews of standalone mode: what ``kubectl auth can-i`` and ``kubectl auth whoami`` ask.

In a cluster kube-apiserver answers them; standalone mode has no kube-apiserver, so it serves
them itself, decided by the same local policy that judges every request:

- ``authorization.k8s.io/v1`` ``selfsubjectaccessreviews``: may the caller (after impersonation,
  so ``--as`` works) do this? The full authorizer answers (system:masters included);
- ``authorization.k8s.io/v1`` ``selfsubjectrulesreviews``: every rule the caller holds in a
  namespace (``kubectl auth can-i --list``), from the local RBAC policy;
- ``authentication.k8s.io/v1`` ``selfsubjectreviews`` (and ``v1beta1``, ``v1alpha1``, which older
  kubectl ask for): who the caller is.

Each is a create that stores nothing (201, the review with its status), as in kube. Every
authenticated user may create them (``system:basic-user`` in ``apiserver.auth.policy``). A spec
that is not one kube accepts is a 422 naming the field. Bodies come as JSON, YAML or, as
client-go sends built-in kinds, protobuf (``kubeprotobuf``); answers are JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette import requests, routing
from starlette import responses as starlette_responses

from apiserver import errors
from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, middleware, rbac
from apiserver.auth import user as users
from apiserver.endpoints import body as bodies
from apiserver.endpoints import kubeprotobuf, request, responses
from apiserver.registry import statuses
from apiserver.request import info as infos
from openapi import fields

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
REVIEW_VERSIONS = ("v1", "v1beta1", "v1alpha1")
"""SelfSubjectReview versions served (kubectl 1.27 asks v1beta1, 1.28+ v1 first)."""
MAX_FIELD = 1024
"""Characters of one attribute kept; longer is a 422 (no real attribute comes near)."""
_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_FIELDS = ("path", "verb")

Obj = dict[str, Any]
Endpoint = Callable[[requests.Request], Any]
RulesFor = Callable[[users.UserInfo, str], Sequence[rbac.Rule]]


def _invalid(kind: str, group: str, problems: list[fields.FieldError]) -> errors.Invalid:
    return errors.Invalid(fields.invalid_message(kind, group, "", problems),
                          details={"group": group, "kind": kind,
                                   "causes": statuses.causes(problems)})


async def _document(req: requests.Request, limits: bodies.Limits) -> Obj:
    infos.served(req.scope)
    body = await request.read_body(req, limits.max_bytes)
    content_type = req.headers.get("content-type", "")
    if bodies.media_type(content_type) == kubeprotobuf.MEDIA_TYPE:
        return kubeprotobuf.decode(body)  # what client-go (kubectl) sends
    if not body.strip():
        return {}
    return (await bodies.decode(body, content_type, limits)).document


def _strings(where: str, value: Any, names: Sequence[str]) -> tuple[dict[str, str],
                                                                     list[fields.FieldError]]:
    found: dict[str, str] = {}
    problems: list[fields.FieldError] = []
    if not isinstance(value, dict):
        return found, [fields.invalid(where, value, "must be an object")]
    for name in names:
        item = value.get(name, "")
        if item is None:
            item = ""
        if not isinstance(item, str):
            problems.append(fields.invalid(f"{where}.{name}", item, "must be a string"))
        elif len(item) > MAX_FIELD:
            problems.append(fields.too_long(f"{where}.{name}", item, MAX_FIELD))
        else:
            found[name] = item
    return found, problems


def _echo(document: Obj, kind: str, group: str, version: str) -> Obj:
    return {"kind": kind, "apiVersion": f"{group}/{version}",
            "metadata": {"creationTimestamp": None}, "spec": document.get("spec") or {}}


def access_review(judge: authorizer.Authorizer, limits: bodies.Limits) -> Endpoint:
    kind = "SelfSubjectAccessReview"

    async def review(req: requests.Request) -> starlette_responses.Response:
        document = await _document(req, limits)
        spec = document.get("spec") or {}
        if not isinstance(spec, dict):
            raise _invalid(kind, AUTHORIZATION, [fields.invalid("spec", spec, "must be an object")])
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (non_resource is None):
            raise _invalid(kind, AUTHORIZATION, [fields.invalid(
                "spec.resourceAttributes", resource,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified")])
        user = middleware.user_of(req.scope)
        if resource is not None:
            values, problems = _strings("spec.resourceAttributes", resource, _RESOURCE_FIELDS)
            target = attrs.Attributes(
                user=user, verb=values.get("verb", ""), path="", resource_request=True,
                api_group=values.get("group", ""), api_version=values.get("version", ""),
                namespace=values.get("namespace", ""), resource=values.get("resource", ""),
                subresource=values.get("subresource", ""), name=values.get("name", ""))
        else:
            values, problems = _strings("spec.nonResourceAttributes", non_resource,
                                        _NON_RESOURCE_FIELDS)
            target = attrs.Attributes(user=user, verb=values.get("verb", ""),
                                      path=values.get("path", ""))
        if problems:
            raise _invalid(kind, AUTHORIZATION, problems)
        verdict = await judge.authorize(target)
        status: Obj = {"allowed": verdict.allowed}
        if verdict.reason:
            status["reason"] = verdict.reason
        if verdict.error:
            status["evaluationError"] = fields.cut(verdict.error)
        answer = _echo(document, kind, AUTHORIZATION, "v1")
        answer["status"] = status
        return responses.json_response(answer, 201)

    return review


def _rule(rule: rbac.Rule) -> tuple[str, Obj]:
    if rule.non_resource_urls:
        return "nonResourceRules", {"verbs": list(rule.verbs),
                                    "nonResourceURLs": list(rule.non_resource_urls)}
    found: Obj = {"verbs": list(rule.verbs), "apiGroups": list(rule.api_groups),
                  "resources": list(rule.resources)}
    if rule.resource_names:
        found["resourceNames"] = list(rule.resource_names)
    return "resourceRules", found


def rules_review(rules_for: RulesFor, limits: bodies.Limits) -> Endpoint:
    kind = "SelfSubjectRulesReview"

    async def review(req: requests.Request) -> starlette_responses.Response:
        document = await _document(req, limits)
        values, problems = _strings("spec", document.get("spec") or {}, ("namespace",))
        if problems:
            raise _invalid(kind, AUTHORIZATION, problems)
        status: Obj = {"resourceRules": [], "nonResourceRules": [], "incomplete": False}
        for rule in rules_for(middleware.user_of(req.scope), values.get("namespace", "")):
            key, shown = _rule(rule)
            status[key].append(shown)
        answer = _echo(document, kind, AUTHORIZATION, "v1")
        answer["status"] = status
        return responses.json_response(answer, 201)

    return review


def identity_review(version: str, limits: bodies.Limits) -> Endpoint:
    async def review(req: requests.Request) -> starlette_responses.Response:
        await _document(req, limits)
        user = middleware.user_of(req.scope)
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = {key: list(values) for key, values in user.extra.items()}
        return responses.json_response({
            "kind": "SelfSubjectReview", "apiVersion": f"{AUTHENTICATION}/{version}",
            "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}}, 201)

    return review


def routes(judge: authorizer.Authorizer, rules_for: RulesFor,
           limits: bodies.Limits = bodies.DEFAULT) -> list[routing.BaseRoute]:
    """The self reviews, POST only (anything else answers 405 as a Status)."""
    found: list[routing.BaseRoute] = [
        routing.Route(f"/apis/{AUTHORIZATION}/v1/selfsubjectaccessreviews",
                      access_review(judge, limits), methods=["POST"]),
        routing.Route(f"/apis/{AUTHORIZATION}/v1/selfsubjectrulesreviews",
                      rules_review(rules_for, limits), methods=["POST"]),
    ]
    found += [routing.Route(f"/apis/{AUTHENTICATION}/{version}/selfsubjectreviews",
                            identity_review(version, limits), methods=["POST"])
              for version in REVIEW_VERSIONS]
    return found
