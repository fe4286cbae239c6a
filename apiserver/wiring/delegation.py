"""The delegated chain of cluster mode, as kube's generic API server builds it
(k8s.io/apiserver DelegatingAuthenticationOptions / DelegatingAuthorizationOptions):

authentication: front proxy (requestheader) -> client certificate -> bearer token (the token
file when given, then TokenReview, cached); anonymous when none had an opinion.
authorization: system:masters -> always-allowed paths -> SubjectAccessReview (cached).
Trust comes from the flag files when given, else from the watched ConfigMap; both feed the TLS
handshake bundle. At start, before listening: the trust is read, the worker identity is asked for
(SelfSubjectReview, else TokenReview of the own token; when that fails, asked again with backoff
in the background until learned: ``controllers.runtime.identity``) and kube-apiserver's version
is read.
Built from ``apiserver.cluster``'s calls into the ``access.Auth`` either mode hands the app.
"""

from __future__ import annotations

import asyncio
import logging

import kube
from apiserver.admission import chain as admission_chain
from apiserver.admission import facts
from apiserver.auth import (
    authenticator,
    authorizer,
    bearer,
    clientcert,
    requestheader,
    sar,
    static,
    tokenreview,
    trust,
    trustfiles,
    worker,
)
from apiserver.cluster import authconfig, pods, reviews, version
from apiserver.flags import config
from apiserver.serving import tls
from apiserver.wiring import access
from controllers.runtime import identity as identities
from openapi import install
from timing import clock as clocks

log = logging.getLogger(__name__)


def _client(path: object) -> kube.Client:
    return kube.Client.connect(path)  # type: ignore[arg-type]


def delegated(settings: config.Settings, serving: tls.ServingContexts) -> access.Auth:
    d = settings.delegation
    own = _client(d.kubeconfig)
    authn = own if d.authentication_config() == d.kubeconfig else _client(
        d.authentication_config())
    authz = own if d.authorization_config() == d.kubeconfig else _client(
        d.authorization_config())
    clients = {id(c): c for c in (own, authn, authz)}

    holder = trust.Trust()
    files = trustfiles.FileSources(holder, client_ca_file=d.client_ca_file,
                                   request_header=d.request_header)
    configmap = authconfig.AuthConfigMap(
        authn, holder, client_ca=d.client_ca_file is None,
        request_header=d.request_header.client_ca_file is None, flags=d.request_header)
    holder.subscribe(lambda current: serving.set_client_cas(current.handshake_pem()))
    serving.refreshers.append(files.refresh)

    tokens: list[bearer.TokenAuthenticator] = []
    if settings.token_auth_file is not None:
        tokens.append(bearer.StaticTokens(static.load(settings.token_auth_file)))
    tokens.append(tokenreview.TokenReview(
        reviews.TokenReviews(authn), audiences=d.api_audiences,
        success_ttl=d.token_cache_ttl, failure_ttl=d.token_cache_ttl))
    chain = authenticator.Chain([
        requestheader.FrontProxy(holder),
        clientcert.ClientCertificate(holder),
        bearer.Bearer(tokens),
    ])
    judge = authorizer.Delegating(
        sar.SubjectAccessReview(reviews.AccessReviews(authz),
                                allowed_ttl=d.authorized_cache_ttl,
                                denied_ttl=d.unauthorized_cache_ttl),
        # kube-apiserver calls the Pod webhooks without credentials
        always_allow_paths=(*d.always_allow_paths, *install.WEBHOOK_PATHS))
    cluster_version = version.ClusterVersion(own)
    cluster = facts.ClusterFacts(
        worker=worker.UNKNOWN_YET,
        plugin=facts.Plugin(settings.plugin_namespace, settings.plugin_service_account),
        pods=pods.Pods(own), kubernetes_version=cluster_version.current, authorizer=judge)
    identity = reviews.OwnIdentity(own, authn)

    async def trust_sources() -> None:
        files.load()
        if configmap.needed:
            await configmap.start()

    async def attempt() -> str:
        learned = worker.expect(await worker.learn(identity, identity), settings.worker_username)
        cluster.worker = learned
        return learned.reason

    learning = identities.Learning(attempt, clocks.SystemClock())
    retrying: list[asyncio.Task[None]] = []

    async def learn_worker() -> None:
        if not await learning.first():
            retrying.append(asyncio.create_task(learning.run(), name="learn the worker identity"))

    async def stop() -> None:
        for task in retrying:
            task.cancel()
        await asyncio.gather(*retrying, return_exceptions=True)
        await configmap.stop()
        await cluster_version.stop()
        for client in clients.values():
            await client.aclose()

    return access.Auth(
        authentication=chain,
        authorization=judge,
        admission=admission_chain.build(cluster),
        startup=[trust_sources, learn_worker, cluster_version.start],
        shutdown=[stop],
        cluster_client=own,
        identity=learning,
    )
