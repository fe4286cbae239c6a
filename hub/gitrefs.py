"""The refs a git server advertises over smart HTTP (what ``git ls-remote`` prints).

``GET <repo>.git/info/refs?service=git-upload-pack`` answers pkt-lines: a service header, a flush,
then ``<sha> <refname>`` lines (the first carries the capabilities after a NUL), an annotated
tag's peeled commit as ``<refname>^{}``, and a final flush. Only protocol v0/v1 is asked for (no
``Git-Protocol`` header), which every git server still speaks.
"""

from __future__ import annotations

import contextlib
import re

import httpx

from hub import errors, fetch
from openapi import reasons

MAX_BYTES = 8 * 1024 * 1024
_SHA = re.compile(r"[0-9a-f]{40}")
_SERVICE = b"# service=git-upload-pack"


def parse(body: bytes, what: str) -> dict[str, str]:
    """refname -> sha of an advertisement; malformed input is ``SourceUnavailable``."""

    def bad(detail: str) -> errors.HubError:
        return errors.HubError(reasons.SOURCE_UNAVAILABLE,
                               f"{what}: git refs unreadable ({detail})")

    refs: dict[str, str] = {}
    position = 0
    header_seen = False
    while position < len(body):
        length_text = body[position : position + 4]
        try:
            length = int(length_text, 16)
        except ValueError:
            raise bad("not pkt-line") from None
        if length == 0:  # flush
            position += 4
            continue
        if length < 4 or position + length > len(body):
            raise bad("truncated pkt-line")
        line = body[position + 4 : position + length].rstrip(b"\n")
        position += length
        if not header_seen and line.startswith(b"# service="):
            if line != _SERVICE:
                raise bad("unexpected service")
            header_seen = True
            continue
        line = line.split(b"\0", 1)[0]
        sha, _, name = line.partition(b" ")
        text_sha, text_name = sha.decode(errors="replace"), name.decode(errors="replace")
        if not _SHA.fullmatch(text_sha) or not text_name:
            raise bad("bad ref line")
        if text_name == "capabilities^{}":  # an empty repository
            continue
        refs[text_name] = text_sha
    return refs


def commit_for(refs: dict[str, str], revision: str) -> str | None:
    """The commit ``revision`` names, as git resolves a short name (tags before branches), an
    annotated tag peeled to its commit."""
    if revision.startswith("refs/"):
        names = [revision]
    elif revision == "HEAD":
        names = ["HEAD"]
    else:
        names = [f"refs/{revision}", f"refs/tags/{revision}", f"refs/heads/{revision}"]
    for name in names:
        peeled = refs.get(name + "^{}")
        if peeled is not None:
            return peeled
        if name in refs:
            return refs[name]
    return None


async def list_refs(client: httpx.AsyncClient, url: str, *, endpoint: str, token: str | None,
                    what: str, mapper: fetch.ErrorMapper) -> dict[str, str]:
    """The advertised refs of the repository at ``url`` (``.../<id>.git``); a token goes as HTTP
    Basic with the user ``oauth2``."""
    async with fetch.open_response(
        client, "GET", f"{url}/info/refs?service=git-upload-pack", endpoint=endpoint,
        token=token, basic_user="oauth2", what=what, mapper=mapper,
        headers={"accept": "application/x-git-upload-pack-advertisement, */*"},
    ) as response:
        if response.status_code != 200:
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                  f"{what}: git refs answered HTTP {response.status_code}",
                                  status=response.status_code)
        kind = response.headers.get("content-type", "").split(";")[0].strip()
        if kind != "application/x-git-upload-pack-advertisement":
            raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                  f"{what}: git refs are not a smart-HTTP advertisement")
        collected = bytearray()
        async with contextlib.aclosing(fetch.body(response, None, what)) as chunks:
            async for chunk in chunks:
                collected += chunk
                if len(collected) > MAX_BYTES:
                    raise errors.HubError(reasons.SOURCE_UNAVAILABLE,
                                          f"{what}: git refs larger than {MAX_BYTES} bytes")
    return parse(bytes(collected), what)
