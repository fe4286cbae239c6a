"""The admission chain as the tests build it: standalone's facts (its local policy judging the
requester), or a given cluster version."""

from __future__ import annotations

from typing import Any

from apiserver.admission import chain, facts
from apiserver.auth import authorizer, policy, rbac
from apiserver.registry import strategy
from openapi import fields, install, resources

WORKER = install.WORKER_USER
PLUGIN = facts.Plugin(install.DEFAULT_NAMESPACE, install.PLUGIN_SERVICE_ACCOUNT)
PLUGIN_USER = PLUGIN.username


def local_policy(worker: str = WORKER, extra: rbac.Policy | None = None) -> authorizer.Delegating:
    """Standalone's authorizer: the built-in roles (masters allowed everything) and ``extra``."""
    built = policy.builtin(worker=worker, plugin=PLUGIN_USER)
    return authorizer.Delegating(rbac.Evaluator(built + extra if extra is not None else built))


def standalone(worker: str = WORKER, extra: rbac.Policy | None = None) -> chain.Chain:
    """The chain of a standalone server whose worker is ``worker``."""
    return chain.build(facts.standalone(worker, PLUGIN, authorizer=local_policy(worker, extra)))


def at_version(version: tuple[int, int] | None) -> chain.Chain:
    """The chain in a cluster whose kube-apiserver is ``version`` (None: it cannot be read)."""
    cluster = facts.standalone(WORKER, PLUGIN, authorizer=local_policy())
    cluster.kubernetes_version = lambda: version
    return chain.build(cluster)


def admit_create(obj: dict[str, Any], *,
                 cluster_version: tuple[int, int] | None = facts.IMAGE_VOLUME_FLOOR
                 ) -> list[fields.FieldError]:
    """Every refusal of a new ModelArtifact (the schema and every admission rule)."""
    write = strategy.Write("CREATE", resources.MODEL_ARTIFACT, obj)
    return at_version(cluster_version).admit(write)


def admit_update(old: dict[str, Any], new: dict[str, Any]) -> list[fields.FieldError]:
    """Every refusal of ``new`` replacing the stored ``old`` ModelArtifact (main resource)."""
    return standalone().admit(strategy.Write("UPDATE", resources.MODEL_ARTIFACT, new, old))
