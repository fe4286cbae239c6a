"""The self reviews of standalone mode: what ``kubectl auth can-i`` and ``kubectl auth whoami`` ask.

In a cluster kube-apiserver answers them; standalone mode has no kube-apiserver, so it serves
them itself (``wiring.access`` adds these routes and ``GROUPS`` to discovery in that mode only),
decided by the same local policy that judges every request (``auth.selfreviews``):

- ``authorization.k8s.io/v1`` ``selfsubjectaccessreviews``: may the caller (after impersonation,
  so ``--as`` works) do this? The full authorizer answers (system:masters included);
- ``authorization.k8s.io/v1`` ``selfsubjectrulesreviews``: every rule the caller holds in a
  namespace (``kubectl auth can-i --list``), from the local RBAC policy;
- ``authentication.k8s.io/v1`` ``selfsubjectreviews`` (and ``v1beta1``, ``v1alpha1``, which older
  kubectl ask for): who the caller is.

Each is a create that stores nothing (201, the review with its status), as in kube. Every
authenticated user may create them (``system:basic-user`` in ``apiserver.auth.policy``). Bodies
come as JSON, YAML or, as client-go sends built-in kinds, protobuf (``kubeprotobuf``); answers are
JSON. A body of another kind or version is a 400, a spec kube would refuse a 422 naming the field;
neither echoes more than a bounded piece of what was sent, and the answer carries back only the
attributes read (each at most ``MAX_FIELD`` characters).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from starlette import requests, routing
from starlette import responses as starlette_responses

from apiserver import errors
from apiserver.auth import attributes as attrs
from apiserver.auth import authorizer, middleware, rbac
from apiserver.auth import selfreviews as decide
from apiserver.auth import user as users
from apiserver.endpoints import body as bodies
from apiserver.endpoints import discovery, kubeprotobuf, request, responses
from apiserver.registry import statuses
from apiserver.request import info as infos
from openapi import fields, wire

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
REVIEW_VERSIONS = ("v1", "v1beta1", "v1alpha1")
"""SelfSubjectReview versions served (kubectl 1.27 asks v1beta1, 1.28+ v1 first)."""
MAX_FIELD = 1024
"""Characters of one attribute kept; longer is a 422 (no real attribute comes near)."""
_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_FIELDS = ("path", "verb")
_EMPTY_METADATA = ("creationTimestamp", "managedFields")
"""What a client's empty metadata may still carry (client-go sends ``creationTimestamp: null``)."""

_ACCESS = discovery.Resource("selfsubjectaccessreviews", "selfsubjectaccessreview",
                             "SelfSubjectAccessReview", ("create",))
_RULES = discovery.Resource("selfsubjectrulesreviews", "selfsubjectrulesreview",
                            "SelfSubjectRulesReview", ("create",))
_IDENTITY = discovery.Resource("selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview",
                               ("create",))
GROUPS = (
    discovery.Group(AUTHENTICATION, tuple(discovery.Version(v, (_IDENTITY,))
                                          for v in REVIEW_VERSIONS)),
    discovery.Group(AUTHORIZATION, (discovery.Version("v1", (_ACCESS, _RULES)),)),
)
"""The groups of these routes as discovery lists them (kube's order: authentication first)."""

Endpoint = Callable[[requests.Request], Any]
RulesFor = Callable[[users.UserInfo, str], Sequence[rbac.Rule]]


def _invalid(kind: str, group: str, problems: list[fields.FieldError]) -> errors.Invalid:
    return errors.Invalid(fields.invalid_message(kind, group, "", problems),
                          details={"group": group, "kind": kind,
                                   "causes": statuses.causes(problems)})


async def _document(req: requests.Request, limits: bodies.Limits, kind: str,
                    api_version: str) -> wire.Obj:
    """The body as an object of ``kind`` in ``api_version`` (both may be left out, as in kube)."""
    infos.served(req.scope)
    body = await request.read_body(req, limits.max_bytes)
    content_type = req.headers.get("content-type", "")
    if bodies.media_type(content_type) == kubeprotobuf.MEDIA_TYPE:
        document = kubeprotobuf.decode(body)  # what client-go (kubectl) sends
    elif not body.strip():
        document = {}
    else:
        document = (await bodies.decode(body, content_type, limits)).document
    if not isinstance(document, dict):
        raise errors.BadRequest(f"the body must be a {kind} object, not {fields.shown(document)}")
    sent_version = document.get("apiVersion") or api_version
    if sent_version != api_version:
        raise errors.BadRequest(
            f"the API version in the data ({fields.shown(sent_version)}) does not match the"
            f" expected API version ({api_version})")
    sent_kind = document.get("kind") or kind
    if sent_kind != kind:
        raise errors.BadRequest(
            f"the object provided is unrecognized (must be of type {kind}):"
            f" kind {fields.shown(sent_kind)}")
    return document


def _strings(where: str, value: Any, names: Sequence[str]) -> tuple[dict[str, str],
                                                                     list[fields.FieldError]]:
    """The string fields ``names`` of the object ``value`` (absent or null: empty), bounded."""
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


def _spec(document: wire.Obj) -> Any:
    spec = document.get("spec")
    return {} if spec is None else spec


def _set(values: dict[str, str]) -> dict[str, str]:
    """The attributes as kube writes them back: empty ones left out (``omitempty``)."""
    return {name: value for name, value in values.items() if value}


def _answer(kind: str, api_version: str, spec: wire.Obj,
            status: Any) -> starlette_responses.Response:
    # kube-apiserver 1.36 leaves an unset creationTimestamp out of the metadata
    return responses.json_response({"kind": kind, "apiVersion": api_version, "metadata": {},
                                    "spec": spec, "status": status}, 201)


def _metadata_problems(document: wire.Obj) -> list[fields.FieldError]:
    """kube refuses an access review whose metadata is not empty (a name, labels...)."""
    metadata = document.get("metadata")
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        return [fields.invalid("metadata", metadata, "must be an object")]
    if any(key not in _EMPTY_METADATA or (key == "creationTimestamp" and value is not None)
           for key, value in metadata.items()):
        return [fields.invalid("metadata", metadata, "must be empty")]
    return []


def access_review(judge: authorizer.Authorizer, limits: bodies.Limits) -> Endpoint:
    kind, api_version = "SelfSubjectAccessReview", f"{AUTHORIZATION}/v1"

    async def review(req: requests.Request) -> starlette_responses.Response:
        document = await _document(req, limits, kind, api_version)
        spec = _spec(document)
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
            echoed: wire.Obj = {"resourceAttributes": _set(values)}
        else:
            values, problems = _strings("spec.nonResourceAttributes", non_resource,
                                        _NON_RESOURCE_FIELDS)
            target = attrs.Attributes(user=user, verb=values.get("verb", ""),
                                      path=values.get("path", ""))
            echoed = {"nonResourceAttributes": _set(values)}
        problems += _metadata_problems(document)
        if problems:
            raise _invalid(kind, AUTHORIZATION, problems)
        return _answer(kind, api_version, echoed, await decide.access(judge, target))

    return review


def rules_review(rules_for: RulesFor, limits: bodies.Limits) -> Endpoint:
    kind, api_version = "SelfSubjectRulesReview", f"{AUTHORIZATION}/v1"

    async def review(req: requests.Request) -> starlette_responses.Response:
        document = await _document(req, limits, kind, api_version)
        values, problems = _strings("spec", _spec(document), ("namespace",))
        if problems:
            raise _invalid(kind, AUTHORIZATION, problems)
        granted = rules_for(middleware.user_of(req.scope), values.get("namespace", ""))
        # kube answers a new review holding only the status: the spec comes back empty
        return _answer(kind, api_version, {}, decide.rules(granted))

    return review


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def identity_review(version: str, limits: bodies.Limits) -> Endpoint:
    api_version = f"{AUTHENTICATION}/{version}"

    async def review(req: requests.Request) -> starlette_responses.Response:
        await _document(req, limits, "SelfSubjectReview", api_version)
        info = decide.user_info(middleware.user_of(req.scope))
        # kube stamps the review it makes; it has no spec
        return responses.json_response({
            "kind": "SelfSubjectReview", "apiVersion": api_version,
            "metadata": {"creationTimestamp": _now()}, "status": {"userInfo": info}}, 201)

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
