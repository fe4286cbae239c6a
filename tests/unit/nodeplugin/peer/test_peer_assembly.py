"""What a plugin publishes as its peer port: ``https://HOST:PORT`` from ``--peer-advertise-address``
(default ``$POD_IP``) and ``--peer-port``, only while the port serves, and cleared otherwise."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator

import pytest

from devkit import clock as clocks
from nodeplugin import __main__ as cli
from nodeplugin import plugin
from nodeplugin.nodestore import reporter
from nodeplugin.peer import assembly
from tests.unit.nodeplugin import fakes


@pytest.mark.parametrize(("host", "url"), [
    ("10.244.1.17", "https://10.244.1.17:32445"),
    ("fd00:10:244::17", "https://[fd00:10:244::17]:32445"),
    ("plugin-a.nodes.example", "https://plugin-a.nodes.example:32445"),
])
def test_the_url_of_an_address(host: str, url: str) -> None:
    assert assembly.url_of(host, 32445) == url
    assert assembly.Settings(port=32445, advertise_address=host).url == url


@pytest.mark.parametrize("host", ["10.0.0.1/24", "https://10.0.0.1", "a b", "-x", "u@h", ""])
def test_an_address_the_schema_refuses_is_refused(host: str) -> None:
    with pytest.raises(ValueError, match="not an IP address or DNS name"):
        assembly.url_of(host, 32445)


def test_nothing_is_published_when_off_or_without_an_address() -> None:
    assert assembly.Settings(port=0, advertise_address="10.0.0.1").url == ""
    assert assembly.Settings(port=32445).url == ""


def test_the_flags_default_to_the_pod_ip_and_check_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_IP", "10.244.1.17")
    args = cli.parser().parse_args(["--node-name=n", "--peer-port=32445"])
    assert cli.problem(args) is None
    assert cli.config_from(args).peer.url == "https://10.244.1.17:32445"
    wrong = cli.parser().parse_args(["--node-name=n", "--peer-port=32445",
                                     "--peer-advertise-address=10.0.0.1/24"])
    assert "--peer-advertise-address (or $POD_IP)" in (cli.problem(wrong) or "")
    off = cli.parser().parse_args(["--node-name=n", "--peer-advertise-address=10.0.0.1/24"])
    assert cli.problem(off) is None  # not published with the port off
    monkeypatch.delenv("POD_IP")
    assert cli.parser().parse_args(["--node-name=n"]).peer_advertise_address == ""


def test_published_tells_only_changes() -> None:
    told: list[str] = []
    published = assembly.Published()
    published.changed = lambda: told.append(published())
    published.set("https://10.0.0.1:1")
    published.set("https://10.0.0.1:1")
    published.set("")
    assert told == ["https://10.0.0.1:1", ""]


@pytest.fixture
async def running(tmp_path: pathlib.Path) -> AsyncIterator[tuple[plugin.Plugin,
                                                                 fakes.FakeStoreApi,
                                                                 clocks.ManualClock]]:
    clock = clocks.ManualClock()
    async with fakes.started_plugin(tmp_path, {"config.json": b"{}"}, clock) as (started, api, _):
        yield started, api, clock


async def _written(api: fakes.FakeStoreApi, clock: clocks.ManualClock, count: int) -> None:
    async with asyncio.timeout(10):
        while len(api.writes) < count:
            clock.advance(reporter.TICK_SECONDS)
            await asyncio.sleep(0.01)


async def test_the_status_carries_the_url_while_the_port_serves_and_clears_it_after(
    running: tuple[plugin.Plugin, fakes.FakeStoreApi, clocks.ManualClock],
) -> None:
    started, api, clock = running
    api.put(fakes.node_store())
    await _written(api, clock, 1)
    # no peer port: the field is cleared (null in the merge patch), whatever a run before wrote
    assert "peer" in api.writes[-1] and api.writes[-1]["peer"] is None
    started.peer_url.set("https://10.244.1.17:32445")
    await _written(api, clock, 2)
    assert api.writes[-1]["peer"] == {"url": "https://10.244.1.17:32445"}
    started.peer_url.set("")
    await _written(api, clock, 3)
    assert api.writes[-1]["peer"] is None


async def test_stopping_the_port_leaves_the_pullers_client_open_until_close() -> None:
    """A plugin stops its peer port while its store can still clear the URL, and closes the
    pulling side only after its downloader (no running attempt's range meets a closed client)."""

    class Holders:
        closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    served = asyncio.Event()

    async def serve(stop: asyncio.Event) -> None:
        served.set()
        await stop.wait()

    found = Holders()
    sync = assembly.PeerSync(found, asyncio.Event())  # type: ignore[arg-type]
    sync.task = asyncio.create_task(serve(sync.stop))
    await served.wait()
    await sync.stop_serving()
    assert sync.task.done() and found.closed == 0
    await sync.close()
    assert found.closed == 1
