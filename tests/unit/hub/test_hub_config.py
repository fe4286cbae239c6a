"""hub.config: settings checks, no_proxy rules, and the client's shape."""

from __future__ import annotations

import pathlib

import httpx
import pytest

from hub import config, errors


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypass"),
    [
        ("huggingface.co", 443, "", False),
        ("huggingface.co", 443, "*", True),
        ("huggingface.co", 443, "huggingface.co", True),
        ("cdn.huggingface.co", 443, ".huggingface.co", True),
        ("cdn.huggingface.co", 443, "huggingface.co", True),
        ("nothuggingface.co", 443, "huggingface.co", False),
        ("10.1.2.3", 443, "10.0.0.0/8", True),
        ("11.1.2.3", 443, "10.0.0.0/8", False),
        ("10.1.2.3", 443, "10.1.2.3", True),
        ("hub.local", 8443, "hub.local:8443", True),
        ("hub.local", 443, "hub.local:8443", False),
        ("::1", 443, "::1/128", True),
        ("example.com", 443, " foo.org , example.com ", True),
    ],
)
def test_no_proxy(host: str, port: int, no_proxy: str, bypass: bool) -> None:
    assert config.bypasses_proxy(host, port, no_proxy) is bypass


@pytest.mark.parametrize(
    "settings",
    [
        {"huggingface_endpoint": "ftp://huggingface.co"},
        {"huggingface_endpoint": "huggingface.co"},
        {"modelscope_endpoint": "https://user:pw@www.modelscope.cn"},
        {"huggingface_endpoint": "https://huggingface.co/?x=1"},
        {"https_proxy": "not a url"},
        {"ca_bundle": "/nonexistent/ca.pem"},
        {"read_timeout": 0},
    ],
)
def test_check_refuses_invalid_settings(settings: dict[str, object]) -> None:
    with pytest.raises(errors.HubError) as caught:
        config.check(config.HubConfig(**settings))  # type: ignore[arg-type]
    assert caught.value.reason == "InvalidRequest"


def test_check_refuses_a_ca_bundle_that_is_not_pem(tmp_path: pathlib.Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate")
    with pytest.raises(errors.HubError) as caught:
        config.check(config.HubConfig(ca_bundle=str(bundle)))
    assert caught.value.reason == "InvalidRequest"


async def test_make_client_has_every_timeout_and_no_redirects() -> None:
    settings = config.HubConfig(
        connect_timeout=1, read_timeout=2, write_timeout=3, pool_timeout=4,
        https_proxy="http://proxy.example:3128", no_proxy="10.0.0.0/8",
    )
    async with config.make_client(settings) as client:
        assert client.timeout == httpx.Timeout(connect=1, read=2, write=3, pool=4)
        assert client.follow_redirects is False
        assert client.trust_env is False
