"""Opaque list continue tokens: the revision the first page was read at plus the last key served."""

from __future__ import annotations

import base64
import binascii

import orjson

from apiserver import errors
from openapi import resources


def encode(revision: int, last_key: str) -> str:
    body = orjson.dumps({"v": resources.GROUP_VERSION, "rv": revision, "start": last_key})
    return base64.urlsafe_b64encode(body).decode().rstrip("=")


def decode(token: str, *, prefix: str) -> tuple[int, str]:
    """``(revision, last_key)``; BadRequest when the token is malformed or for another list."""
    try:
        padded = token + "=" * (-len(token) % 4)
        body = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
        revision = body["rv"]
        last_key = body["start"]
    except (binascii.Error, ValueError, TypeError, KeyError, orjson.JSONDecodeError) as exc:
        raise errors.BadRequest(f"continue key is not valid: {str(exc)[:200]}") from exc
    # bool is an int in Python; a revision is a positive int64, as etcd's
    if (not isinstance(revision, int) or isinstance(revision, bool) or not 1 <= revision < 2**63
            or not isinstance(last_key, str)):
        raise errors.BadRequest("continue key is not valid: malformed token")
    if not last_key.startswith(prefix):
        raise errors.BadRequest("continue key is not valid: the token belongs to another list")
    return revision, last_key
