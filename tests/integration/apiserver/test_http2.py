"""HTTP/2 and TLS as clients use them: refused requests whose bodies the handler never reads, real
kubectl commands the server answers 404/405, and clients that end their TLS badly (bodies past the
drain budget are the guard's: tests/unit/tlsserver/test_guards.py). Each keeps
the connection (later requests on the same HTTP/2 connection are answered), and the server logs
no traceback.

Before the fix, hypercorn raised ``KeyError`` for DATA on an answered stream and tore down the
whole connection (kubectl: ``unexpected EOF``), and a client's TLS error at close was logged as
an unhandled error with a traceback (and escaped ``serve`` at shutdown).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import socket
import ssl
from collections.abc import Iterator

import pytest

from devkit.harness import apiserver as support
from tests.support import h2client
from tests.support import kubectl as kubectl_support

NS = "h2"
BASE = "/apis/worker.gpustack.ai/v1"
ARTIFACTS = f"{BASE}/namespaces/{NS}/modelartifacts"
TIMEOUT = 120.0
LIMIT = 3 * 1024 * 1024
REFUSED = [
    # (the self reviews kubectl auth whoami/can-i send are served now: their bodies are read)
    ("/apis/authentication.k8s.io/v1/tokenreviews", 404),  # a cluster's API, not ours
    ("/apis/authorization.k8s.io/v1/subjectaccessreviews", 404),
    (f"{BASE}/nodemodelstores", 405),  # creating a NodeModelStore
    (f"{BASE}/modelartifacts", 405),  # create needs a namespace
    (f"{BASE}/namespaces/{NS}/modelartifacts/x/progress", 405),
]
SIZES = [1, 70_000]  # one byte, and more than the first flow-control window


@pytest.fixture
def connection(apiserver: support.RunningServer) -> Iterator[h2client.Connection]:
    with h2client.Connection("127.0.0.1", apiserver.port, str(apiserver.ca_file),
                             timeout=TIMEOUT) as opened:
        yield opened


def _auth(server: support.RunningServer, token: str | None = None) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token or server.admin_token}"),
            ("content-type", "application/json")]


def _clean(server: support.RunningServer) -> None:
    log = server.log()
    assert "Traceback" not in log and "KeyError" not in log, log[-5000:]
    assert " ERROR " not in log, log[-5000:]


def _still_serves(connection: h2client.Connection, server: support.RunningServer) -> None:
    ready = connection.request("GET", "/readyz", headers=_auth(server))
    assert (ready.status, bytes(ready.body)) == (200, b"ok")
    assert not connection.terminated


@pytest.mark.parametrize("size", SIZES)
def test_refused_posts_with_unread_bodies_keep_the_connection(
        connection: h2client.Connection, apiserver: support.RunningServer, size: int) -> None:
    body = b"{" + b" " * (size - 1)
    for path, code in REFUSED:
        answered = connection.request("POST", path, body, _auth(apiserver))
        assert (answered.status, answered.ended) == (code, True), answered
        assert json.loads(answered.body)["code"] == code
        # the answer came only once the whole body was in: nothing arrives for an answered stream
        assert answered.sent_at_response == len(body)
        _still_serves(connection, apiserver)
    refused = connection.request("POST", ARTIFACTS, body, _auth(apiserver, "not-a-token"))
    assert refused.status == 401 and refused.sent_at_response == len(body)
    _still_serves(connection, apiserver)
    assert not connection.terminated
    _clean(apiserver)


def test_a_refused_body_at_the_limit_is_read_before_the_answer(
        connection: h2client.Connection, apiserver: support.RunningServer) -> None:
    body = b"{" + b" " * (LIMIT - 1)
    answered = connection.request("POST", REFUSED[0][0], body, _auth(apiserver))
    assert (answered.status, answered.sent_at_response) == (404, len(body))
    _still_serves(connection, apiserver)
    _clean(apiserver)


@pytest.fixture
def kubectl(apiserver: support.RunningServer, tmp_path: pathlib.Path) -> kubectl_support.Kubectl:
    return kubectl_support.Kubectl(apiserver.kubeconfig, tmp_path / "cache")


def test_kubectl_commands_refused_before_their_body_is_read(
        kubectl: kubectl_support.Kubectl, apiserver: support.RunningServer) -> None:
    answers = set()
    for _ in range(10):
        result = kubectl.run("auth", "whoami", check=False)
        assert "EOF" not in result.stderr and "connection" not in result.stderr, result.stderr
        answers.add(("whoami", result.returncode, result.stderr))
    for _ in range(3):
        result = kubectl.run("auth", "can-i", "create", "modelartifacts", check=False)
        assert "EOF" not in result.stderr, result.stderr
        answers.add(("can-i", result.returncode, result.stderr))
    store = "apiVersion: worker.gpustack.ai/v1\nkind: NodeModelStore\nmetadata:\n  name: node-a\n"
    for _ in range(3):
        stderr = kubectl.fails("create", "-f", "-", stdin=store)
        assert "MethodNotAllowed" in stderr and "EOF" not in stderr, stderr
        answers.add(("create", 1, stderr))
    assert len(answers) == 3  # the same answer every time, for each command
    _clean(apiserver)


def _tls(server: support.RunningServer) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(server.ca_file))
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


def _data_after_close_notify(server: support.RunningServer) -> None:
    """A request, our close_notify, then another record: the server reads a record past the
    alert (as fuzzers and some proxies do)."""
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _tls(server).wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            raw.sendall(outgoing.read())
            incoming.write(raw.recv(65536))
    raw.sendall(outgoing.read())
    request = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
    tls.write(request)
    first = outgoing.read()
    tls.write(request)
    second = outgoing.read()
    with pytest.raises(ssl.SSLWantReadError):
        tls.unwrap()
    raw.sendall(first + outgoing.read() + second)
    with contextlib.suppress(OSError):
        raw.recv(65536)
    raw.close()


def _reset(server: support.RunningServer, *, after_handshake: bool) -> None:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    sock: socket.socket = raw
    if after_handshake:
        sock = _tls(server).wrap_socket(raw, server_hostname="127.0.0.1")
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()  # RST instead of FIN


def test_clients_that_end_their_tls_badly_are_logged_at_debug(tmp_path: pathlib.Path) -> None:
    server = support.start(tmp_path / "apiserver", extra_args=["--log-level", "DEBUG"])
    try:
        for _ in range(3):
            _data_after_close_notify(server)
            _reset(server, after_handshake=True)
            _reset(server, after_handshake=False)
        with server.client() as http:
            assert http.get("/readyz").status_code == 200
    finally:
        server.stop()
    assert server.process.returncode == 0
    log = server.log()
    assert "client connection ended uncleanly" in log
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
