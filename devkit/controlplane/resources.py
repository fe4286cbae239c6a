"""The kinds the fixture control plane serves, with the field selectors kube supports for each."""

from __future__ import annotations

import dataclasses
from typing import Any

COMMON_FIELDS = ("metadata.name", "metadata.namespace")


@dataclasses.dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False
    # kube answers DELETE with the object for some kinds and with a Success Status for others.
    returns_deleted: bool = False
    fields: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )  # fmt: skip

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str]:
        return self.group, self.plural

    def selectable(self, field: str) -> bool:
        return field in COMMON_FIELDS or field in self.fields

    def base_path(self, namespace: str = "") -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


NAMESPACES = Kind(
    "", "v1", "namespaces", "Namespace", False, has_status=True, returns_deleted=True,
    fields=("status.phase",), short_names=("ns",),
)  # fmt: skip
CONFIGMAPS = Kind("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",))
SECRETS = Kind("", "v1", "secrets", "Secret", True, fields=("type",))
PODS = Kind(
    "", "v1", "pods", "Pod", True, has_status=True, returns_deleted=True,
    fields=(
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    ),
    short_names=("po",),
)  # fmt: skip
NODES = Kind(
    "", "v1", "nodes", "Node", False, has_status=True, fields=("spec.unschedulable",),
    short_names=("no",),
)  # fmt: skip
PVCS = Kind(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, has_status=True,
    returns_deleted=True, short_names=("pvc",),
)  # fmt: skip
EVENTS = Kind(
    "", "v1", "events", "Event", True,
    fields=(
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
    ),
    short_names=("ev",),
)  # fmt: skip
SERVICE_ACCOUNTS = Kind("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",))
CSINODES = Kind("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSIDRIVERS = Kind("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
DAEMONSETS = Kind("apps", "v1", "daemonsets", "DaemonSet", True, has_status=True,
                  short_names=("ds",))
LEASES = Kind("coordination.k8s.io", "v1", "leases", "Lease", True)
EVENTS_V1 = Kind(
    "events.k8s.io", "v1", "events", "Event", True,
    fields=(
        "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
        "reason", "reportingController", "type",
    ),
    short_names=("ev",),
)  # fmt: skip

ALL: tuple[Kind, ...] = (
    NAMESPACES, CONFIGMAPS, SECRETS, PODS, NODES, PVCS, EVENTS, SERVICE_ACCOUNTS,
    CSINODES, LEASES, EVENTS_V1, DAEMONSETS, CSIDRIVERS,
)  # fmt: skip

BY_PATH: dict[tuple[str, str, str], Kind] = {(k.group, k.version, k.plural): k for k in ALL}


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string kube compares a field selector against (booleans as true/false, missing as
    the empty string)."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, dict | list):
        return ""
    return str(node)
