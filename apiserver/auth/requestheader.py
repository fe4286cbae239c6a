"""Front-proxy authentication: ``X-Remote-*`` headers, believed only over a verified certificate.

kube-aggregator authenticates the caller itself and forwards the identity in headers, over a TLS
connection where it presents the front-proxy client certificate (docs/auth.md, "Cluster mode"). The
headers count only when, for this request:

1. the TLS layer verified a peer chain, and that chain ends in the requestheader CA, is within
   its validity and allows client authentication; otherwise this authenticator fails (when a
   certificate was presented) or has no opinion (when none was), and the headers are ignored;
2. the leaf's CN is in the allowed names, when that list is not empty;
3. a username header is non-empty (else no opinion: the next authenticator runs).

Then: the user is the first non-empty username header; groups are every value of every group
header (one line per group, never split on commas; empty values dropped); extras come from
headers starting with an extra prefix (case-insensitive), the rest of the name lower-cased and
percent-decoded (kept raw when it does not decode), every value kept; the UID from the uid headers.
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Callable

from apiserver.auth import authenticator, trust, x509
from apiserver.auth import user as users

Now = Callable[[], datetime.datetime]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class FrontProxy:
    def __init__(self, source: trust.Trust, *, now: Now = utcnow) -> None:
        self.source = source
        self.now = now

    async def authenticate(self, credentials: authenticator.Credentials) -> authenticator.Outcome:
        config = self.source.config.request_header
        if config is None or not credentials.peer_chain:
            return authenticator.NO_OPINION
        verified = x509.verify(credentials.peer_chain, config.ca, self.now())
        if isinstance(verified, str):
            return authenticator.failed(f"front proxy: {verified}")
        if config.allowed_names and verified.common_name not in config.allowed_names:
            return authenticator.failed(
                "front proxy: the client certificate's common name is not an allowed name")
        return identify(config, credentials)


def identify(config: trust.RequestHeader,
             credentials: authenticator.Credentials) -> authenticator.Outcome:
    """The identity the headers carry (the certificate already checked)."""
    headers = credentials.headers
    name = _first_non_empty(headers, config.username_headers)
    if not name:
        return authenticator.NO_OPINION
    groups = tuple(value for header in config.group_headers
                   for value in headers.get(header, ()) if value)
    extra: dict[str, list[str]] = {}
    prefixes = config.extra_prefixes
    for header, values in headers.items():
        if not header.startswith(prefixes):
            continue
        for prefix in prefixes:
            if header.startswith(prefix) and len(header) > len(prefix):
                extra.setdefault(unescape_key(header[len(prefix):]), []).extend(values)
                break
    return authenticator.Outcome(users.UserInfo(
        name=name,
        uid=_first_non_empty(headers, config.uid_headers),
        groups=groups,
        extra={key: tuple(values) for key, values in extra.items()},
    ))


def _first_non_empty(headers: dict[str, list[str]], names: tuple[str, ...]) -> str:
    for name in names:
        values = headers.get(name)
        if values and values[0]:
            return values[0]
    return ""


def unescape_key(encoded: str) -> str:
    """Go's ``url.PathUnescape`` of a lower-cased extra key; the raw key when it fails."""
    lowered = encoded.lower()
    try:
        return urllib.parse.unquote(lowered, errors="strict") if _well_formed(lowered) \
            else lowered
    except UnicodeDecodeError:
        return lowered


def _well_formed(text: str) -> bool:
    """Every ``%`` starts a two-digit hex escape (Go refuses the whole string otherwise)."""
    index = text.find("%")
    while index != -1:
        pair = text[index + 1:index + 3]
        if len(pair) != 2 or any(c not in "0123456789abcdef" for c in pair):
            return False
        index = text.find("%", index + 3)
    return True

