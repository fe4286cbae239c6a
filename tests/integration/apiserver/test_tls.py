"""Transport: TLS with the generated CA, HTTP/2 via ALPN and HTTP/1.1, the 413 body limit."""

from __future__ import annotations

import ssl

import httpx
import pytest

from devkit.harness import apiserver as support

COLLECTION = "/apis/worker.gpustack.ai/v1/namespaces/tls/modelartifacts"
LIMIT = 3 * 1024 * 1024


@pytest.mark.parametrize(("http2", "version"), [(True, "HTTP/2"), (False, "HTTP/1.1")])
def test_protocols(apiserver: support.RunningServer, http2: bool, version: str) -> None:
    with apiserver.client(http2=http2) as client:
        for path in ("/readyz", "/apis/worker.gpustack.ai/v1", COLLECTION):
            response = client.get(path)
            assert response.status_code == 200, response.text
            assert response.http_version == version


def test_certificate_has_loopback_sans(apiserver: support.RunningServer) -> None:
    for host in ("127.0.0.1", "localhost"):
        url = apiserver.url.replace("127.0.0.1", host)
        with httpx.Client(verify=support.ssl_context(apiserver.ca_file)) as client:
            assert client.get(f"{url}/livez").status_code == 200


def test_untrusted_client_is_refused(apiserver: support.RunningServer) -> None:
    with httpx.Client() as client, pytest.raises(httpx.ConnectError) as info:
        client.get(f"{apiserver.url}/livez")
    assert isinstance(info.value.__context__, ssl.SSLCertVerificationError) or "CERTIFICATE" in str(
        info.value
    )


def test_a_bad_token_is_401_and_no_token_is_anonymous(apiserver: support.RunningServer) -> None:
    with httpx.Client(verify=support.ssl_context(apiserver.ca_file)) as client:
        response = client.get(f"{apiserver.url}{COLLECTION}",
                              headers={"Authorization": "Bearer not-a-token"})
        anonymous = client.get(f"{apiserver.url}{COLLECTION}")
    assert response.status_code == 401
    assert response.json()["reason"] == "Unauthorized"
    assert anonymous.status_code == 403  # as kube-apiserver: anonymous, then refused by RBAC
    assert anonymous.json()["message"] == (
        'modelartifacts.worker.gpustack.ai is forbidden: User "system:anonymous" cannot list '
        'resource "modelartifacts" in API group "worker.gpustack.ai" in the namespace "tls"')


@pytest.mark.parametrize("http2", [True, False])
def test_body_over_3mib_is_413(apiserver: support.RunningServer, http2: bool) -> None:
    body = b"{" + b" " * (LIMIT - 2) + b"}"  # exactly the limit
    with apiserver.client(http2=http2) as client:
        too_big = client.post(COLLECTION, content=body + b" ",
                              headers={"Content-Type": "application/json"})  # fmt: skip
        at_limit = client.post(COLLECTION, content=body,
                               headers={"Content-Type": "application/json"})  # fmt: skip
        assert at_limit.status_code != 413  # the body is read and judged on its content
        assert too_big.status_code == 413
        assert too_big.json()["reason"] == "RequestEntityTooLarge"
        # the connection stays usable for the next request
        assert client.get("/readyz").status_code == 200
