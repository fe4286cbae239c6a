"""Standalone Secrets: DIR/<namespace>/<name>/token, missing vs unreadable, and the watcher."""

from __future__ import annotations

import pathlib

import pytest

from controllers.sources import secrets
from devkit import clock as manual


async def test_reading_tokens(tmp_path: pathlib.Path) -> None:
    source = secrets.DirSecrets(tmp_path, manual.ManualClock())
    (tmp_path / "team-a" / "hf").mkdir(parents=True)
    with pytest.raises(secrets.SecretMissing, match="no key 'token'"):
        await source.token("team-a", "hf")
    with pytest.raises(secrets.SecretMissing, match="not found"):
        await source.token("team-a", "other")
    (tmp_path / "team-a" / "hf" / "token").write_text("  hf_abc123\n")
    assert await source.token("team-a", "hf") == "hf_abc123"
    (tmp_path / "team-a" / "hf" / "token").write_text("two words")
    with pytest.raises(secrets.SecretUnreadable) as caught:
        await source.token("team-a", "hf")
    assert "two words" not in str(caught.value)
    (tmp_path / "team-a" / "hf" / "token").write_text("")
    with pytest.raises(secrets.SecretMissing, match="empty"):
        await source.token("team-a", "hf")
    with pytest.raises(secrets.SecretMissing, match="not a valid"):
        await source.token("..", "hf")


async def test_the_watcher_reports_changes(tmp_path: pathlib.Path) -> None:
    source = secrets.DirSecrets(tmp_path, manual.ManualClock())
    heard: list[tuple[str, str]] = []
    source.subscribe(lambda namespace, name: heard.append((namespace, name)))
    source.scan()
    assert heard == []
    (tmp_path / "a" / "s").mkdir(parents=True)
    (tmp_path / "a" / "s" / "token").write_text("one")
    source.scan()
    assert heard == [("a", "s")]
    source.scan()
    assert heard == [("a", "s")]  # nothing changed
    replacement = tmp_path / "a" / "s" / "token.new"
    replacement.write_text("two")
    replacement.replace(tmp_path / "a" / "s" / "token")  # an atomic rotation, new inode
    source.scan()
    (tmp_path / "a" / "s" / "token").unlink()
    source.scan()
    assert heard == [("a", "s")] * 3


def test_fingerprints_tell_tokens_apart_without_keeping_them() -> None:
    first, second = secrets.fingerprint("alpha"), secrets.fingerprint("beta")
    assert first != second and "alpha" not in first and len(first) == 16
