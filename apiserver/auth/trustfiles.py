"""Trust from files: ``--client-ca-file``, ``--requestheader-client-ca-file``, reloaded on change.

Each file is re-read when its inode, size or times change (checked at every TLS handshake, see
``apiserver.serving.tls``), so a rotated CA file takes effect for new connections without a
restart, as kube's dynamic CA file content does. A file that cannot be read or parsed keeps the
previous bundle and is logged once per change.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib

from apiserver.auth import trust, x509
from apiserver.flags import config

log = logging.getLogger(__name__)


def _stamp(path: pathlib.Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def load_bundle(path: pathlib.Path) -> x509.Bundle:
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise trust.ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        return x509.Bundle.from_pem(pem, source=str(path))
    except x509.BundleError as exc:
        raise trust.ConfigError(str(exc)) from None


@dataclasses.dataclass
class _Watched:
    path: pathlib.Path
    stamp: tuple[int, int, int, int] | None = None


class FileSources:
    """Keeps ``target``'s client CA and/or requestheader CA equal to the flag-named files."""

    def __init__(self, target: trust.Trust, *, client_ca_file: pathlib.Path | None,
                 request_header: config.RequestHeaderFlags) -> None:
        self.target = target
        self.flags = request_header
        self.client_ca = _Watched(client_ca_file) if client_ca_file else None
        self.request_header = (_Watched(request_header.client_ca_file)
                               if request_header.client_ca_file else None)

    @property
    def empty(self) -> bool:
        return self.client_ca is None and self.request_header is None

    def load(self) -> None:
        """First read: a bad file is an error (the server does not start without its trust)."""
        if self.client_ca is not None:
            self.client_ca.stamp = _stamp(self.client_ca.path)
            self.target.set_client_ca(load_bundle(self.client_ca.path))
        if self.request_header is not None:
            self.request_header.stamp = _stamp(self.request_header.path)
            self.target.set_request_header(self._request_header(self.request_header.path))

    def refresh(self) -> None:
        for watched, apply in ((self.client_ca, self._apply_client_ca),
                               (self.request_header, self._apply_request_header)):
            if watched is None:
                continue
            stamp = _stamp(watched.path)
            if stamp == watched.stamp:
                continue
            watched.stamp = stamp
            try:
                apply(watched.path)
            except trust.ConfigError as exc:
                log.warning("keeping the previous CA bundle: %s", exc)
            else:
                log.info("reloaded %s", watched.path)

    def _apply_client_ca(self, path: pathlib.Path) -> None:
        self.target.set_client_ca(load_bundle(path))

    def _apply_request_header(self, path: pathlib.Path) -> None:
        self.target.set_request_header(self._request_header(path))

    def _request_header(self, path: pathlib.Path) -> trust.RequestHeader:
        # kube's defaults for any name not given
        return overrides(trust.RequestHeader.build(load_bundle(path)), self.flags)


def overrides(header: trust.RequestHeader,
              flags: config.RequestHeaderFlags) -> trust.RequestHeader:
    """``header`` with the ``--requestheader-*`` names that were given."""
    return trust.with_overrides(
        header, allowed_names=flags.allowed_names, username_headers=flags.username_headers,
        uid_headers=flags.uid_headers, group_headers=flags.group_headers,
        extra_prefixes=flags.extra_headers_prefix)
