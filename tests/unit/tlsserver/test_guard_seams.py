"""The hypercorn seams ``tlsserver.guards`` stands on, checked on the installed
hypercorn: when a release renames, re-signs or stops assigning one, this fails here, naming it,
instead of the guards silently no longer applying. The pinned range is the one tested
(pyproject: hypercorn >=0.17,<0.19)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from hypercorn.asyncio import tcp_server
from hypercorn.protocol import ProtocolWrapper
from hypercorn.protocol import h2 as hypercorn_h2

from tlsserver import guards as hypercorn_guards


def _parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def _assigned_attributes(function: Callable[..., Any]) -> dict[str, list[str]]:
    """``self.X = Call(...)`` in ``function``'s body: X -> the called names."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self"):
                    called = node.value.func
                    name = called.id if isinstance(called, ast.Name) else ast.unparse(called)
                    found.setdefault(target.attr, []).append(name)
    return found


def test_the_overridden_methods_keep_their_signatures() -> None:
    assert _parameters(hypercorn_h2.H2Protocol._handle_events) == ["self", "events"]
    assert _parameters(hypercorn_h2.H2Protocol.stream_send) == ["self", "event"]
    assert _parameters(tcp_server.TCPServer._close) == ["self"]
    assert _parameters(tcp_server.TCPServer.protocol_send) == ["self", "event"]
    for method in (hypercorn_h2.H2Protocol._handle_events, hypercorn_h2.H2Protocol.stream_send,
                   tcp_server.TCPServer._close, tcp_server.TCPServer.protocol_send):
        assert inspect.iscoroutinefunction(method)


def test_the_direct_body_path_leans_on_hypercorns_per_stream_state() -> None:
    """``H2.stream_send`` answers a one-frame body itself: it relies on hypercorn keeping a
    ``StreamBuffer`` per open stream in ``stream_buffers`` and sending through ``_flush``."""
    source = inspect.getsource(hypercorn_h2.H2Protocol)
    assert "self.stream_buffers[request.stream_id] = StreamBuffer(" in source
    assert "async def _flush(self) -> None:" in source
    assert "self.priority.remove_stream(stream_id)" in source


def test_the_connection_assigns_hypercorns_protocol_wrapper() -> None:
    assert "ProtocolWrapper" in _assigned_attributes(tcp_server.TCPServer.run)["protocol"]
    assert tcp_server.ProtocolWrapper is ProtocolWrapper


@pytest.mark.parametrize("method", [ProtocolWrapper.__init__, ProtocolWrapper.handle])
def test_every_http2_protocol_is_assigned_before_use(method: Callable[..., Any]) -> None:
    assert "H2Protocol" in _assigned_attributes(method)["protocol"]


def test_the_wrapper_builds_hypercorns_own_http2_class() -> None:
    import hypercorn.protocol as package

    assert package.H2Protocol is hypercorn_h2.H2Protocol
    assert hypercorn_guards.H2.__mro__[1] is hypercorn_h2.H2Protocol
