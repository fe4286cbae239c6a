"""The node plugin's domain errors: one class per outcome kubelet must tell apart.

Each class carries an operator-facing message (never a token, Authorization header or signed URL).
``nodeplugin.csi.errors`` maps them to gRPC status codes in one place; nothing below the CSI layer
imports grpc.
"""

from __future__ import annotations


class Shown(Exception):
    """An error whose ``message`` (also ``str(err)``) is safe to show: it names no token,
    Authorization header or signed URL."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PluginError(Shown):
    """Base of the outcomes kubelet tells apart: ``str(err)`` is the message kubelet records on
    the Pod."""


class InvalidArgument(PluginError):
    """The request is malformed (a required field is missing or unusable)."""


class PermissionDenied(PluginError):
    """A mount authorization rule failed; the message names the rule."""


class Unavailable(PluginError):
    """Not now: the artifact list is not read yet, or the digest is backing off."""


class Aborted(PluginError):
    """The digest is being materialized; the message carries the progress. kubelet retries."""


class NotFound(PluginError):
    """The volume the request names is not published here."""


class ResourceExhausted(PluginError):
    """The node's cache cannot hold the digest."""


class AlreadyExists(PluginError):
    """The target is already published with different content."""


class FailedPrecondition(PluginError):
    """The node is in a state the request cannot proceed from (e.g. a non-empty target)."""


class Internal(PluginError):
    """Anything else; the full detail is in the plugin's log."""
