"""TLS in cluster mode: the serving certificate files rotate under a running server and the next
connection gets the new certificate; the client certificate chain reaches the app over HTTP/2 and
HTTP/1.1; trust given by flag files (``--requestheader-client-ca-file``, ``--client-ca-file``)
instead of the ConfigMap, reloaded when the files change."""

from __future__ import annotations

import asyncio
import pathlib
import ssl

import httpx
import pytest
from cryptography import x509

from devkit.controlplane import Authority, ControlPlane, FrontProxy
from devkit.harness import aggregator, clustermode
from tests.integration.apiserver import cluster

G = cluster.G


async def _served_certificate(url: str, ca_pem: bytes) -> x509.Certificate:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    host, port = url.removeprefix("https://").rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port), ssl=context,
                                              server_hostname="localhost")
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return x509.load_der_x509_certificate(der)


async def test_rotated_serving_files_reach_the_next_connection(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        clustermode.prepare(cp)
        with clustermode.running(cp, tmp_path / "server") as server:
            before = await _served_certificate(server.url, server.ca_pem)
            async with httpx.AsyncClient(verify=ssl.create_default_context(
                    cadata=server.ca_pem.decode()), http2=True) as kept:
                assert (await kept.get(server.url + "/readyz")).status_code == 200
                rotated = Authority("rotated-serving-ca")
                # a rotation writes both files; the server picks them up at the next handshake
                rotated.serving(("127.0.0.1", "localhost")).write(server.data_dir, "serving")
                after = await _served_certificate(server.url, rotated.cert_pem)
                assert after.serial_number != before.serial_number
                assert after.issuer == rotated.cert.subject
                with pytest.raises(ssl.SSLCertVerificationError):
                    await _served_certificate(server.url, server.ca_pem)
                # the open connection keeps working on what it negotiated
                assert (await kept.get(server.url + "/readyz")).status_code == 200
            assert server.process.poll() is None
            assert "the serving certificate files changed" in server.log()


async def test_a_half_written_pair_keeps_the_old_certificate(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        clustermode.prepare(cp)
        with clustermode.running(cp, tmp_path / "server") as server:
            before = await _served_certificate(server.url, server.ca_pem)
            other = Authority("other").serving(("127.0.0.1", "localhost"))
            (server.data_dir / "serving.crt").write_bytes(other.cert_pem)  # key not yet
            still = await _served_certificate(server.url, server.ca_pem)
            assert still.serial_number == before.serial_number
            assert "keeping the previous certificate" in server.log()


async def test_trust_from_flag_files_reloads_on_change(tmp_path: pathlib.Path) -> None:
    proxy = FrontProxy()
    with ControlPlane(tmp_path / "cp", front_proxy=proxy) as cp:
        clustermode.prepare(cp)
        # without the reader Role the ConfigMap cannot be read: the flags must be enough
        cp.policy.remove_binding("model-manager-authentication-reader", "kube-system")
        files = tmp_path / "trust"
        files.mkdir()
        front_ca = files / "front-proxy-ca.crt"
        front_ca.write_bytes(proxy.ca.cert_pem)
        client_ca = cp.client_ca.write_ca(files / "client-ca.crt")
        args = ["--requestheader-client-ca-file", str(front_ca),
                "--requestheader-allowed-names", "front-proxy-client",
                "--client-ca-file", str(client_ca)]
        with clustermode.running(cp, tmp_path / "server", extra_args=args) as server:
            async with server.aggregator() as agg:
                assert (await agg.get(G, aggregator.AVAILABILITY)).status_code == 200
            proxy.rotate()
            front_ca.write_bytes(proxy.ca.cert_pem)
            async with server.aggregator() as agg:
                assert (await agg.get(G, aggregator.AVAILABILITY)).status_code == 200
            carol = cp.issue_client_cert("carol", ["tenants"])
            async with server.aggregator(certificate=carol) as agg:
                response = await agg.get(f"{G}/namespaces/x/modelartifacts", aggregator.ADMIN)
            assert response.status_code == 403 and 'User "carol"' in response.json()["message"]
            assert server.process.poll() is None


@pytest.mark.parametrize("http2", [True, False])
async def test_uid_headers_are_read_when_the_configmap_names_them(
        tmp_path: pathlib.Path, http2: bool) -> None:
    with ControlPlane(tmp_path / "cp", front_proxy=FrontProxy(uid_headers=["X-Remote-Uid"])) as cp:
        clustermode.prepare(cp)
        with clustermode.running(cp, tmp_path / "server") as server:
            async with server.aggregator(http2=http2) as agg:
                await agg.get(f"{G}/namespaces/team-a/modelartifacts", aggregator.ALICE)
        specs = [r.body["spec"] for r in cp.recorder.requests(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews", "POST")
            if isinstance(r.body, dict)]
        assert any(spec.get("uid") == "alice-uid" for spec in specs)


async def test_allowed_names_flag_replaces_the_configmaps(tmp_path: pathlib.Path) -> None:
    with ControlPlane(tmp_path / "cp") as cp:
        clustermode.prepare(cp)
        args = ["--requestheader-allowed-names", "another-proxy"]
        with clustermode.running(cp, tmp_path / "server", extra_args=args) as server:
            async with server.aggregator() as agg:  # CN front-proxy-client, allowed by the CM
                assert (await agg.get(G, aggregator.AVAILABILITY)).status_code == 401
            other = cp.front_proxy.issue("another-proxy")
            async with server.aggregator(certificate=other) as agg:
                assert (await agg.get(G, aggregator.AVAILABILITY)).status_code == 200
