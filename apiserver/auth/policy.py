"""The standalone authorization policy: the chart's roles for this API, plus the operator's file.

Standalone mode has no kube-apiserver to ask, so it judges requests with local RBAC
(``apiserver.auth.rbac``) over:

- kube's own defaults that matter here: ``system:discovery`` (discovery, OpenAPI, ``/version``
  for every authenticated user), ``system:basic-user`` (every authenticated user may ask about
  its own access and identity: the self reviews ``kubectl auth can-i`` and ``whoami`` send),
  ``system:public-info-viewer`` (health and ``/version`` for everyone, anonymous included) and
  ``cluster-admin`` for ``system:masters``;
- the chart's ClusterRoles for this API group, bound to the identities standalone mode creates:
  ``model-manager-worker`` (the worker: reads artifacts, writes their status, owns
  NodeModelStores) and ``model-manager-node`` (the node plugin: reads artifacts and stores, writes
  ``nodemodelstores/status``);
- the tenant ClusterRoles ``model-manager-tenant-reader`` and ``-editor`` (artifacts, their
  progress and prefetches), bound to nobody: a RoleBinding in a tenant's namespace grants them
  there only;
- ``model-manager-gpustack-server`` (the GPUStack server: artifacts and prefetches in every
  namespace, their progress, and ``copies``, which names nodes, so no tenant role has it; reads
  the NodeModelStores), bound to nobody: the operator binds it to GPUStack's identity;
- ``model-manager-anchor-granter`` (verb ``anchor`` on modelartifacts: may set the anchor grant,
  ``openapi.anchors``), bound to nobody: the administrators have it already, a binding gives it
  to whoever migrates a legacy cache;
- the documents of the policy file (``DATA_DIR/policy.yaml``): Roles, ClusterRoles and bindings
  the operator adds, e.g. the ``model-artifact-reader`` Role for a tenant.

The admin (``system:masters``) is allowed everything before any of this is consulted, as in a
cluster. The chart mirrors these ClusterRoles; ``docs/auth.md`` prints them.
"""

from __future__ import annotations

import pathlib

import yaml

from apiserver.auth import rbac
from apiserver.auth import user as users
from durable import disk
from openapi import anchors, install, resources

GROUP = resources.GROUP
WORKER_ROLE = install.WORKER_SERVICE_ACCOUNT
PLUGIN_ROLE = install.PLUGIN_SERVICE_ACCOUNT
TENANT_READER_ROLE = "model-manager-tenant-reader"
TENANT_EDITOR_ROLE = "model-manager-tenant-editor"
ANCHOR_GRANTER_ROLE = "model-manager-anchor-granter"
GPUSTACK_SERVER_ROLE = "model-manager-gpustack-server"

DISCOVERY = rbac.Role("system:discovery", (rbac.Rule(
    verbs=("get",),
    non_resource_urls=("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                       "/openapi/*", "/readyz", "/version", "/version/"),
),))
PUBLIC_INFO = rbac.Role("system:public-info-viewer", (rbac.Rule(
    verbs=("get",),
    non_resource_urls=("/healthz", "/livez", "/readyz", "/version", "/version/"),
),))

BASIC_USER = rbac.Role("system:basic-user", (
    # what kube grants every authenticated user: ask about one's own access and identity
    rbac.Rule(("create",), ("authorization.k8s.io",),
              ("selfsubjectaccessreviews", "selfsubjectrulesreviews")),
    rbac.Rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
))
CLUSTER_ADMIN = rbac.Role("cluster-admin", (
    rbac.Rule(("*",), ("*",), ("*",)),
    rbac.Rule(("*",), non_resource_urls=("*",)),
))
"""kube's cluster-admin, bound to system:masters: the masters are allowed before RBAC is asked,
so it changes no verdict; it makes their SelfSubjectRulesReview say what they may do."""

WORKER = rbac.Role(WORKER_ROLE, (
    # resolve artifacts; the prefetches, bindings and warm gate read them too
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("modelartifacts",)),
    # report what was resolved; the server also admits only the worker here
    rbac.Rule(("get", "update", "patch"), (GROUP,), ("modelartifacts/status",)),
    # one NodeModelStore per node running the plugin: create, configure, recreate, read
    rbac.Rule(("get", "list", "watch", "create", "update", "patch", "delete"), (GROUP,),
              ("nodemodelstores",)),
    # warm the prefetched artifacts: resolve targets, write pins, report per-node status
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("modelprefetches",)),
    rbac.Rule(("get", "update", "patch"), (GROUP,), ("modelprefetches/status",)),
    # the pool layer: merge each ModelStore into its nodes' spec, count each binding's usage
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("modelstores", "modelstorebindings")),
    rbac.Rule(("get", "update", "patch"), (GROUP,),
              ("modelstores/status", "modelstorebindings/status")),
))
PLUGIN = rbac.Role(PLUGIN_ROLE, (
    # mount authorization: the artifacts of the Pods' namespaces
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("modelartifacts",)),
    # its own node's configuration
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("nodemodelstores",)),
    # its own node's facts; the status guard narrows this to the plugin's own node
    rbac.Rule(("get", "update", "patch"), (GROUP,), ("nodemodelstores/status",)),
))

# What a tenant is granted in its own namespace: ClusterRoles nobody is bound to by default, bound
# with a RoleBinding in the tenant's namespace, so they grant nothing anywhere else. A prefetch
# names its artifact by name in its own namespace, so a tenant prefetches only its own artifacts.
TENANT_READER = rbac.Role(TENANT_READER_ROLE, (
    rbac.Rule(("get", "list", "watch"), (GROUP,),
              ("modelartifacts", "modelartifacts/progress", "modelprefetches")),
))
TENANT_EDITOR = rbac.Role(TENANT_EDITOR_ROLE, (
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("modelartifacts/progress",)),
    rbac.Rule(("create", "delete", "get", "list", "patch", "update", "watch"), (GROUP,),
              ("modelartifacts", "modelprefetches")),
))

# The GPUStack server, the API's main client: every namespace's artifacts and prefetches, the
# computed views (``copies`` names nodes: administrators and this role only), the node stores.
GPUSTACK_SERVER = rbac.Role(GPUSTACK_SERVER_ROLE, (
    rbac.Rule(("create", "delete", "get", "list", "patch", "update", "watch"), (GROUP,),
              ("modelartifacts", "modelprefetches")),
    rbac.Rule(("get",), (GROUP,), ("modelartifacts/progress", "modelartifacts/copies",
                                   "modelartifacts/manifest")),
    rbac.Rule(("get", "list", "watch"), (GROUP,), ("nodemodelstores",)),
))

# The anchor grant (docs/security.md): an artifact's expectedDigest may stand for content the hub
# has not shown its namespace. Never part of a tenant's role; bound to nobody.
ANCHOR_GRANTER = rbac.Role(ANCHOR_GRANTER_ROLE, (
    rbac.Rule((anchors.VERB,), (GROUP,), (anchors.RESOURCE,)),
))


def builtin(*, worker: str, plugin: str) -> rbac.Policy:
    """kube's defaults plus the chart's roles bound to the worker and plugin user names."""
    def group(name: str) -> rbac.Subject:
        return rbac.Subject("Group", name)

    def subject(name: str) -> rbac.Subject:
        found = users.split_service_account(name)
        if found is not None:
            return rbac.Subject("ServiceAccount", found[1], found[0])
        return rbac.Subject("User", name)

    return rbac.Policy(
        roles=(DISCOVERY, PUBLIC_INFO, BASIC_USER, CLUSTER_ADMIN, WORKER, PLUGIN,
               TENANT_READER, TENANT_EDITOR, GPUSTACK_SERVER, ANCHOR_GRANTER),
        bindings=(
            rbac.Binding("system:discovery", "ClusterRole", DISCOVERY.name,
                         (group(users.AUTHENTICATED),)),
            rbac.Binding("system:basic-user", "ClusterRole", BASIC_USER.name,
                         (group(users.AUTHENTICATED),)),
            rbac.Binding("cluster-admin", "ClusterRole", CLUSTER_ADMIN.name,
                         (group(users.MASTERS),)),
            rbac.Binding("system:public-info-viewer", "ClusterRole", PUBLIC_INFO.name,
                         (group(users.AUTHENTICATED), group(users.UNAUTHENTICATED))),
            rbac.Binding(WORKER_ROLE, "ClusterRole", WORKER_ROLE, (subject(worker),)),
            rbac.Binding(PLUGIN_ROLE, "ClusterRole", PLUGIN_ROLE, (subject(plugin),)),
        ),
    )


FILE_HEADER = """\
# Local authorization policy of the standalone model-manager server.
#
# Add Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (rbac.authorization.k8s.io/v1,
# the same YAML as in a cluster), one document each, then restart the server. The admin
# (system:masters) may do everything; the worker and node-plugin roles and kube's discovery
# roles are built in (docs/auth.md lists them). Example: let user alice read team-a's artifacts
# and their progress (seed 001's model-artifact-reader Role):
#
# ---
# apiVersion: rbac.authorization.k8s.io/v1
# kind: Role
# metadata: {name: model-artifact-reader, namespace: team-a}
# rules:
#   - apiGroups: [worker.gpustack.ai]
#     resources: [modelartifacts, modelartifacts/progress]
#     verbs: [get, list, watch]
# ---
# apiVersion: rbac.authorization.k8s.io/v1
# kind: RoleBinding
# metadata: {name: alice-model-artifact-reader, namespace: team-a}
# roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: model-artifact-reader}
# subjects:
#   - {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
"""


def load(path: pathlib.Path) -> rbac.Policy:
    """The operator's documents (an absent file is an empty policy)."""
    if not path.exists():
        return rbac.Policy()
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError as exc:
        raise rbac.PolicyError(f"{path}: not valid YAML ({exc})") from None
    return rbac.parse(documents, source=str(path))


def ensure_file(path: pathlib.Path) -> None:
    """Write the commented starting file on first start; an existing file is left alone."""
    if not path.exists():
        disk.write_atomic(path, FILE_HEADER.encode())
