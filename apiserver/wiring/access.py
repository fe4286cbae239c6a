"""What authenticates, authorizes and guards requests, for each mode: the parts ``__main__``
hands to the app.

``Auth`` is what either mode builds. Standalone (here): static tokens (admin, worker, node
plugin) and the local RBAC policy. Cluster: the delegated chain of ``wiring.delegation`` (front
proxy, client certificates, TokenReview, SubjectAccessReview), built only when a cluster is
configured, since it dials kube-apiserver; ``__main__`` picks one by ``--standalone``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from starlette.routing import BaseRoute

import kube
from apiserver.admission import chain, facts
from apiserver.auth import (
    authenticator,
    authorizer,
    bearer,
    policy,
    rbac,
    static,
)
from apiserver.endpoints import discovery, selfreviews
from apiserver.flags import config
from controllers.runtime import identity as identities
from openapi import install

Hook = Callable[[], Awaitable[None]]


@dataclasses.dataclass
class Auth:
    authentication: authenticator.Chain
    authorization: authorizer.Authorizer
    admission: chain.Chain
    """The admission chain over this mode's cluster facts; ``admission.facts.worker`` is the
    worker identity (``known``, ``reason``) the controllers check."""
    startup: list[Hook] = dataclasses.field(default_factory=list)
    shutdown: list[Hook] = dataclasses.field(default_factory=list)
    cluster_client: kube.Client | None = None
    """Cluster mode: the server's own client (the worker identity), for the controllers too."""
    identity: identities.Learning | None = None
    """Cluster mode: the worker identity's learning (the controllers start once it learned;
    readiness says why not meanwhile). None where the identity is configured (standalone)."""
    routes: list[BaseRoute] = dataclasses.field(default_factory=list)
    """Routes only this mode serves (standalone: the self reviews kube-apiserver answers in a
    cluster)."""
    groups: tuple[discovery.Group, ...] = ()
    """The groups of those routes, for discovery (standalone: ``authorization.k8s.io``,
    ``authentication.k8s.io``)."""


def standalone(settings: config.Settings) -> Auth:
    assert settings.token_auth_file is not None and settings.policy_file is not None
    tokens = static.load(settings.token_auth_file)
    local = policy.builtin(worker=settings.worker_username, plugin=settings.plugin_username)
    local = local + policy.load(settings.policy_file)
    evaluator = rbac.Evaluator(local)
    authorization = authorizer.Delegating(
        evaluator, always_allow_paths=(*authorizer.DEFAULT_ALWAYS_ALLOW_PATHS,
                                       *install.WEBHOOK_PATHS))
    return Auth(
        authentication=authenticator.Chain([bearer.Bearer([bearer.StaticTokens(tokens)])]),
        authorization=authorization,
        routes=selfreviews.routes(authorization, evaluator.rules_for),
        groups=selfreviews.GROUPS,
        # no cluster: no Pods to look up (the plugin's token carries its node-name extra)
        admission=chain.build(facts.standalone(
            settings.worker_username,
            facts.Plugin(settings.plugin_namespace, settings.plugin_service_account),
            authorizer=authorization)),
    )
