"""The peer endpoints' paths, the token audience and the byte-range header grammar."""

from __future__ import annotations

import re
import urllib.parse

from openapi import volume

AUDIENCE = f"{volume.DRIVER}/peer"
"""The audience of the projected token a pulling plugin sends (never the API server's)."""
PREFIX = "/peer/v1/trees/"
CHUNK_BYTES = 1 << 20
MAX_DIGITS = 19
"""Digits of a Range number: an int64 byte offset has at most 19, and a longer number is refused
before it is converted (Python refuses ``int()`` past 4,300 digits with a ValueError)."""
_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]*)", re.ASCII)


def tree_path(hex_digest: str) -> str:
    return PREFIX + hex_digest


def file_path(hex_digest: str, path: str) -> str:
    return f"{PREFIX}{hex_digest}/files/{urllib.parse.quote(path, safe='/')}"


class RangeError(ValueError):
    """A Range header this server does not satisfy (answered 416)."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end inclusive)`` of one ``bytes=a-b`` / ``bytes=a-`` range, None without a
    header; ``RangeError`` for several ranges, suffix ranges, numbers of more than
    ``MAX_DIGITS`` digits or a range outside the file."""
    if header is None:
        return None
    found = _RANGE.fullmatch(header.strip())
    if found is None:
        raise RangeError("only one bytes=start-end range is served")
    if max(len(found.group(1)), len(found.group(2))) > MAX_DIGITS:
        raise RangeError(f"a range number has at most {MAX_DIGITS} digits")
    start = int(found.group(1))
    end = int(found.group(2)) if found.group(2) else size - 1
    end = min(end, size - 1)
    if start > end:
        raise RangeError(f"range starts at {start} in a file of {size} bytes")
    return start, end
