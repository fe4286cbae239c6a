"""``--log-level DEBUG`` never writes a bearer token to the server's log: hypercorn's HTTP/2
header codec logs every header it decodes at DEBUG unless ``logs.setup`` holds it back."""

from __future__ import annotations

import pathlib

from devkit.harness import apiserver as support


def test_a_debug_server_logs_no_token_over_http2_or_http11(tmp_path: pathlib.Path) -> None:
    with support.running(tmp_path / "server", extra_args=["--log-level", "DEBUG"]) as server:
        for http2 in (True, False):
            with server.client(http2=http2) as client:
                answer = client.get("/apis/worker.gpustack.ai/v1/modelartifacts")
                assert answer.status_code == 200, answer.text
                assert answer.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
        log = server.log()
    assert " DEBUG " in log  # the level took: the test would see a leak
    assert server.admin_token not in log
