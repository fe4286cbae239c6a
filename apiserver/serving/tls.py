"""The server's TLS contexts: a serving certificate reloaded when its files change, and one trust
bundle for client certificates that follows the trust configuration.

asyncio binds a listening socket to one ``SSLContext``, so that context (``base``) carries an SNI
callback which, at every handshake (with or without SNI), first lets the registered refreshers
look at their files, then hands the connection the current context. A new connection therefore
sees a rotated certificate or CA at once; open connections keep what they negotiated, as with
kube-apiserver's dynamic serving certificates.

Client certificates are requested, not required (``CERT_OPTIONAL``). The handshake verifies a
presented chain against the union of the trusted client CAs (the requestheader CA and the client
CA); which of them the chain ends in, and so what it may do, is checked per request by the
authenticators (``apiserver.auth.x509``). A client presenting a certificate from a CA outside that
union fails the handshake, where Go would ignore the certificate.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import ssl
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

ALPN = ("h2", "http/1.1")
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"

Refresher = Callable[[], None]


def fingerprint(path: pathlib.Path) -> tuple[int, int, int, int] | None:
    """What changes when a file is replaced or rewritten (inode, size, mtime, ctime)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclasses.dataclass(frozen=True, slots=True)
class _Loaded:
    cert: tuple[int, int, int, int] | None
    key: tuple[int, int, int, int] | None
    client_cas: bytes


class ServingContexts:
    def __init__(self, cert_file: pathlib.Path, key_file: pathlib.Path, *,
                 alpn: Sequence[str] = ALPN) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.alpn = tuple(alpn)
        self.refreshers: list[Refresher] = []
        self._client_cas = b""
        self._loaded = _Loaded(None, None, b"")
        self._failed: _Loaded | None = None
        self._current = self._build()  # a bad pair at start is an error, not a warning
        self.base = self._current
        self.base.sni_callback = self._on_handshake

    def current(self) -> ssl.SSLContext:
        return self._current

    def set_client_cas(self, pem: bytes) -> None:
        """Trust exactly these client CAs from the next handshake on (a trust subscriber)."""
        if pem != self._client_cas:
            self._client_cas = pem
            self._rebuild("the client CA bundle changed")

    def refresh(self) -> None:
        """Reload the certificate when its files changed (a half-written pair keeps the old)."""
        for refresher in self.refreshers:
            try:
                refresher()
            except Exception:  # a refresher's bad file must not break the handshake
                log.exception("reloading a TLS source failed")
        if (fingerprint(self.cert_file), fingerprint(self.key_file)) != (
                self._loaded.cert, self._loaded.key):
            self._rebuild("the serving certificate files changed")

    def _rebuild(self, why: str) -> None:
        attempt = _Loaded(fingerprint(self.cert_file), fingerprint(self.key_file),
                          self._client_cas)
        if attempt == self._failed:
            return  # the same unusable files as last time: wait for them to change again
        try:
            self._current = self._build()
        except (OSError, ssl.SSLError, ValueError) as exc:
            self._failed = attempt
            log.warning("%s, but the new files cannot be used yet (%s); keeping the previous "
                        "certificate", why, type(exc).__name__)
            return
        log.info("%s: new connections use it", why)

    def _build(self) -> ssl.SSLContext:
        cert, key = fingerprint(self.cert_file), fingerprint(self.key_file)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # RFC 7540 9.2
        context.options |= ssl.OP_NO_COMPRESSION  # RFC 7540 9.2.1
        context.set_ciphers(CIPHERS)
        context.set_alpn_protocols(list(self.alpn))
        context.load_cert_chain(certfile=str(self.cert_file), keyfile=str(self.key_file))
        if self._client_cas.strip():
            context.load_verify_locations(cadata=self._client_cas.decode())
        # the base context's mode is the one every connection keeps (swapping a context does
        # not change it), so it is always "request, verify if presented"
        context.verify_mode = ssl.CERT_OPTIONAL
        self._loaded = _Loaded(cert, key, self._client_cas)
        return context

    def _on_handshake(self, connection: ssl.SSLObject, server_name: str | None,
                      context: ssl.SSLContext) -> None:
        self.refresh()
        if connection.context is not self._current:
            connection.context = self._current


def peer_chain(ssl_object: ssl.SSLObject | None) -> tuple[bytes, ...]:
    """The client chain the handshake verified, leaf first, as DER (empty without one).

    Python 3.13 has ``get_verified_chain``; 3.11 and 3.12 have it on the internal object."""
    if ssl_object is None or ssl_object.getpeercert(binary_form=True) is None:
        return ()
    public = getattr(ssl_object, "get_verified_chain", None)
    if public is not None:
        return tuple(bytes(der) for der in public())
    internal = ssl_object._sslobj  # type: ignore[attr-defined]
    chain = internal.get_verified_chain() or []
    return tuple(cert.public_bytes(ssl._ssl.ENCODING_DER)  # type: ignore[attr-defined]
                 for cert in chain)
