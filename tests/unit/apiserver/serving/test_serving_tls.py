"""Serving contexts: the certificate reloaded from its files at the next handshake, a half-written
pair ignored until it is whole, and the client CA bundle swapped for new connections."""

from __future__ import annotations

import pathlib
import ssl

import pytest

from apiserver.serving import tls
from devkit.controlplane import Authority


def _files(tmp_path: pathlib.Path, ca: Authority) -> tuple[pathlib.Path, pathlib.Path]:
    return ca.serving(("localhost",)).write(tmp_path, "serving")


def test_refresh_reloads_changed_files_only(tmp_path: pathlib.Path) -> None:
    ca = Authority("ca")
    cert, key = _files(tmp_path, ca)
    contexts = tls.ServingContexts(cert, key)
    first = contexts.current()
    assert contexts.base is first and first.verify_mode == ssl.CERT_OPTIONAL
    contexts.refresh()
    assert contexts.current() is first
    _files(tmp_path, ca)
    contexts.refresh()
    assert contexts.current() is not first


def test_a_mismatched_pair_keeps_the_previous_context(tmp_path: pathlib.Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    ca = Authority("ca")
    cert, key = _files(tmp_path, ca)
    contexts = tls.ServingContexts(cert, key)
    first = contexts.current()
    cert.write_bytes(Authority("other").serving(("localhost",)).cert_pem)  # key not yet
    contexts.refresh()
    contexts.refresh()
    assert contexts.current() is first
    assert sum("keeping the previous certificate" in r.message for r in caplog.records) == 1
    _files(tmp_path, ca)
    contexts.refresh()
    assert contexts.current() is not first


def test_a_bad_pair_at_start_is_an_error(tmp_path: pathlib.Path) -> None:
    cert, key = _files(tmp_path, Authority("ca"))
    cert.write_text("not a certificate")
    with pytest.raises(ssl.SSLError):
        tls.ServingContexts(cert, key)


def test_client_cas_and_refreshers(tmp_path: pathlib.Path) -> None:
    cert, key = _files(tmp_path, Authority("ca"))
    contexts = tls.ServingContexts(cert, key)
    first = contexts.current()
    calls: list[int] = []
    contexts.refreshers.append(lambda: calls.append(1))

    def broken() -> None:
        raise RuntimeError("a bad file")

    contexts.refreshers.append(broken)
    contexts.refresh()
    assert calls == [1]
    client_ca = Authority("client-ca")
    contexts.set_client_cas(client_ca.cert_pem)
    second = contexts.current()
    assert second is not first
    assert len(second.get_ca_certs()) == 1
    contexts.set_client_cas(client_ca.cert_pem)  # unchanged: no rebuild
    assert contexts.current() is second
    assert tls.peer_chain(None) == ()
