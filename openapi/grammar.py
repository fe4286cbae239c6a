"""The grammars of what a ModelArtifact names: digests, commits, repositories, revisions, images.

The one owner of these rules. Admission refuses what they refuse, the schema's ``pattern`` for
digests is built from here, the hub clients check the same repository and revision before they
call a hub, and the node plugin checks digests with the same pattern, so a value admission
accepts is never refused later for its shape (``_org/model_`` is valid everywhere or nowhere).
"""

from __future__ import annotations

import re

# sha256:<64 lowercase hex>: a manifest digest, expectedDigest, pinned entries, image digests.
DIGEST_REGEX = "sha256:[0-9a-f]{64}"
DIGEST = re.compile(DIGEST_REGEX)
DIGEST_PATTERN = f"^{DIGEST_REGEX}$"
"""The JSON-schema ``pattern`` form of ``DIGEST``."""
DIGEST_RULE = "must be 'sha256:' followed by 64 lowercase hexadecimal digits"

# A full git commit as both hubs name it.
COMMIT = re.compile("[0-9a-f]{40}")

# Hugging Face repository ids (ModelScope follows the same rules): owner/name.
REPOSITORY_PART_MAX = 96
REPOSITORY_MAX = 2 * REPOSITORY_PART_MAX + 1
_REPOSITORY_PART = re.compile(
    rf"[A-Za-z0-9_](?:[A-Za-z0-9._-]{{0,{REPOSITORY_PART_MAX - 2}}}[A-Za-z0-9_])?")
REPOSITORY_RULE = (
    "must be owner/name: two parts joined by one '/', each 1-96 letters, digits, '_', '-' or "
    "'.', starting and ending with a letter, digit or '_', and without '--' or '..'"
)

REVISION_MAX = 256
_REVISION_FORBIDDEN = frozenset("~^:?*[\\")

# distribution/reference: [domain[:port]/]component(/component)*[:tag], then @sha256:<hex>.
IMAGE_NAME_MAX = 255
_HOST_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"(?:{_HOST_PART}(?:\.{_HOST_PART})*(?::[0-9]+)?/)"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"(?::[\w][\w.-]{0,127})?"
_IMAGE_NAME = re.compile(rf"{_DOMAIN}?{_COMPONENT}(?:/{_COMPONENT})*{_TAG}")


def is_digest(value: str) -> bool:
    return DIGEST.fullmatch(value) is not None


def is_commit(value: str) -> bool:
    return COMMIT.fullmatch(value) is not None


def is_repository(value: str) -> bool:
    """``owner/name`` with both parts valid (see ``REPOSITORY_RULE``)."""
    parts = value.split("/")
    return len(parts) == 2 and all(
        _REPOSITORY_PART.fullmatch(part) and "--" not in part and ".." not in part
        for part in parts)


def has_control(value: str) -> bool:
    """Whether ``value`` holds an ASCII control character (C0 or DEL)."""
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)


def revision_problem(revision: str) -> str:
    """Why a revision is unusable as a branch, tag or commit, or "" when it is fine."""
    if not revision or len(revision) > REVISION_MAX:
        return f"must be 1 to {REVISION_MAX} characters long"
    if any(ch.isspace() for ch in revision) or has_control(revision):
        return "must not contain whitespace or control characters"
    if ".." in revision:
        return "must not contain '..'"
    if revision.startswith(("-", "/")) or revision.endswith(("/", ".")):
        return "must not start with '-' or '/', nor end with '/' or '.'"
    if "@{" in revision or _REVISION_FORBIDDEN.intersection(revision):
        return "must be a branch, tag or commit: none of ~ ^ : ? * [ \\ or '@{'"
    return ""


def is_image_name(name: str) -> bool:
    """The part of an image reference before ``@``: ``[registry[:port]/]path[:tag]``."""
    return len(name) <= IMAGE_NAME_MAX and _IMAGE_NAME.fullmatch(name) is not None
