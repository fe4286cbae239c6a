"""A fixture kube-apiserver on loopback HTTPS, answering like the recorded samples in
``tests/data/kube-samples``: TokenReview, SubjectAccessReview, SelfSubjectReview,
``/version``, and get/list/watch/create/update/patch/delete of ConfigMaps, Secrets, Pods, Nodes
(+ ``proxy/configz``), CSINodes, PersistentVolumeClaims, Leases and Events, authenticated by
token or client certificate, impersonation honoured as kube's filter honours it, and authorized
by a small RBAC table the tests set. Registered APIServices are proxied to their backends, whose
documents join legacy and aggregated discovery and the merged ``/openapi/v2`` and ``/openapi/v3``
(``aggregation``, ``discovery``, ``openapiv2``)."""

from devkit.controlplane import resources
from devkit.controlplane.faults import Fault, Recorded
from devkit.controlplane.frontproxy import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, FrontProxy
from devkit.controlplane.identity import (
    ANONYMOUS,
    API_AUDIENCE,
    Token,
    UserInfo,
    service_account,
)
from devkit.controlplane.pki import Authority, KeyPair
from devkit.controlplane.plane import ADMIN_TOKEN, ControlPlane, version_document
from devkit.controlplane.rbac import Binding, Policy, Role, Rule, Subject

__all__ = [
    "ADMIN_TOKEN",
    "ANONYMOUS",
    "API_AUDIENCE",
    "CONFIGMAP_NAME",
    "CONFIGMAP_NAMESPACE",
    "Authority",
    "Binding",
    "ControlPlane",
    "Fault",
    "FrontProxy",
    "KeyPair",
    "Policy",
    "Recorded",
    "Role",
    "Rule",
    "Subject",
    "Token",
    "UserInfo",
    "resources",
    "service_account",
    "version_document",
]
