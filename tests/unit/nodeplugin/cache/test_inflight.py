"""The files this node fetches from a hub now: one claim per identity, its progress read live,
one registry per cache root."""

from __future__ import annotations

import pathlib

from nodeplugin.cache import inflight, layout

IDENT = ("sha256", "ab" * 32)


def test_one_claim_per_identity_and_its_progress_read_when_asked(tmp_path: pathlib.Path) -> None:
    registry = inflight.of(layout.Layout(tmp_path))
    assert registry is inflight.of(layout.Layout(tmp_path / "."))
    assert registry is not inflight.of(layout.Layout(tmp_path / "other"))
    got = [0]
    assert registry.received(IDENT) is None
    assert registry.claim(IDENT, lambda: got[0])
    assert not registry.claim(IDENT, lambda: 99)  # a second attempt of this node: refused
    got[0] = 4096
    assert registry.received(IDENT) == 4096
    registry.release(IDENT)
    assert registry.received(IDENT) is None
    assert registry.claim(IDENT, lambda: 1)
    registry.release(IDENT)
