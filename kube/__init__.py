"""The one async Kubernetes client (lightkube underneath) for the server, the controllers and the
node plugin: configuration from a kubeconfig or the Pod, a raw-request helper, our own
resources and typed errors. Imports nothing of ours except ``openapi`` (group and names)."""

from kube.client import LIST_TIMEOUT, Client, ListResult, RawResponse, VersionInfo, minor_version
from kube.config import ClusterConfig, from_env, from_kubeconfig, in_cluster
from kube.decoding import Bookmark
from kube.errors import (
    AlreadyExists,
    BadRequest,
    ConfigError,
    Conflict,
    ConnectionFailed,
    CredentialError,
    Expired,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TLSError,
    TooLargeResourceVersion,
    Unauthorized,
    Undecodable,
)

__all__ = [
    "LIST_TIMEOUT",
    "AlreadyExists",
    "BadRequest",
    "Bookmark",
    "Client",
    "ClusterConfig",
    "ConfigError",
    "Conflict",
    "ConnectionFailed",
    "CredentialError",
    "Expired",
    "Forbidden",
    "Invalid",
    "KubeError",
    "ListResult",
    "NotFound",
    "RawResponse",
    "ServerError",
    "TLSError",
    "TooLargeResourceVersion",
    "Unauthorized",
    "Undecodable",
    "VersionInfo",
    "from_env",
    "from_kubeconfig",
    "in_cluster",
    "minor_version",
]
