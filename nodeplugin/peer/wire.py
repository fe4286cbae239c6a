"""The peer endpoints' paths, the token audience, the byte-range header grammar and the
``held`` exchange (which stored or fetching files a peer has, by content identity)."""

from __future__ import annotations

import re
import urllib.parse

from openapi import volume

AUDIENCE = f"{volume.DRIVER}/peer"
"""The audience of the projected token a pulling plugin sends (never the API server's)."""
PREFIX = "/peer/v1/trees/"
FILES_PREFIX = "/peer/v1/files/"
"""``FILES_PREFIX<algorithm>/<hex>``: one stored file by its content identity."""
HELD_PATH = "/peer/v1/held"
"""POST: which of the identities in the body the peer stores or is fetching."""
MAX_HELD = 10_000
"""Identities one ``held`` request may ask about (a manifest of more asks in several)."""
MAX_HELD_BODY = MAX_HELD * 80
STORED = "stored"
FETCHING = "fetching"
CHUNK_BYTES = 1 << 20
MAX_DIGITS = 19
"""Digits of a Range number: an int64 byte offset has at most 19, and a longer number is refused
before it is converted (Python refuses ``int()`` past 4,300 digits with a ValueError)."""
_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]*)", re.ASCII)


def tree_path(hex_digest: str) -> str:
    return PREFIX + hex_digest


def file_path(hex_digest: str, path: str) -> str:
    return f"{PREFIX}{hex_digest}/files/{urllib.parse.quote(path, safe='/')}"


def stored_file_path(algorithm: str, hexdigest: str) -> str:
    return f"{FILES_PREFIX}{algorithm}/{hexdigest}"


_IDENTITY = re.compile(r"(sha256)/([0-9a-f]{64})|(gitsha1)/([0-9a-f]{40})", re.ASCII)


def identity(text: str) -> tuple[str, str] | None:
    """``(algorithm, hex)`` of ``<algorithm>/<hex>``, None when it is not one."""
    found = _IDENTITY.fullmatch(text)
    if found is None:
        return None
    if found.group(1):
        return found.group(1), found.group(2)
    return found.group(3), found.group(4)


def held_request(idents: list[tuple[str, str]]) -> bytes:
    """The body of a ``held`` request: one ``<algorithm>/<hex>`` a line."""
    return "".join(f"{a}/{h}\n" for a, h in idents).encode()


class HeldError(ValueError):
    """A ``held`` body this server refuses (answered 400)."""


def parse_held_request(data: bytes) -> list[tuple[str, str]]:
    if len(data) > MAX_HELD_BODY:
        raise HeldError(f"at most {MAX_HELD} identities a request")
    try:
        lines = data.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise HeldError("the body is one <algorithm>/<hex> a line, in ASCII") from None
    if len(lines) > MAX_HELD:
        raise HeldError(f"at most {MAX_HELD} identities a request")
    found: list[tuple[str, str]] = []
    for number, line in enumerate(lines, 1):
        ident = identity(line)
        if ident is None:
            raise HeldError(f"line {number}: not sha256/<64 hex> or gitsha1/<40 hex>")
        found.append(ident)
    return found


def parse_held_answer(data: bytes, asked: set[tuple[str, str]]
                      ) -> dict[tuple[str, str], int | None]:
    """``identity -> None`` (stored) or the bytes fetched so far, for the identities asked; a
    line that is not one of them or does not parse is ignored (the puller trusts no answer
    beyond where to ask: the bytes are hashed)."""
    held: dict[tuple[str, str], int | None] = {}
    for line in data.decode("ascii", "replace").splitlines():
        fields = line.split(" ")
        ident = identity(fields[0]) if fields else None
        if ident is None or ident not in asked:
            continue
        if fields[1:] == [STORED]:
            held[ident] = None
        elif len(fields) == 3 and fields[1] == FETCHING and fields[2].isdigit() \
                and len(fields[2]) <= MAX_DIGITS:
            held[ident] = int(fields[2])
    return held


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
