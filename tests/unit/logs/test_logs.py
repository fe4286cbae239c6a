"""``logs.setup``: the chosen level, and the secret-bearing libraries held at WARNING."""

from __future__ import annotations

import logging

import hpack
import pytest

import logs


@pytest.fixture(autouse=True)
def _restore_levels() -> object:
    names = ("", *logs.SECRET_BEARING, *logs.PER_REQUEST)
    before = {name: logging.getLogger(name).level for name in names}
    yield None
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def test_debug_keeps_the_header_codec_quiet(caplog: pytest.LogCaptureFixture) -> None:
    logs.setup("DEBUG")
    assert logging.getLogger().isEnabledFor(logging.DEBUG)
    caplog.set_level(logging.DEBUG)  # the root at DEBUG, as --log-level DEBUG makes it
    for name in logs.SECRET_BEARING:
        logging.getLogger(name).setLevel(logging.WARNING)  # set_level lowered the root only
    encoded = hpack.Encoder().encode([("authorization", "Bearer s3cr3t-token")])
    hpack.Decoder().decode(encoded)
    assert "s3cr3t-token" not in caplog.text
    for name in (*logs.SECRET_BEARING, *logs.PER_REQUEST):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING, name


def test_a_higher_level_stays_higher() -> None:
    logs.setup(logging.ERROR)
    for name in logs.SECRET_BEARING:
        assert logging.getLogger(name).getEffectiveLevel() == logging.ERROR


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        logs.setup("LOUD")


def test_without_the_guard_the_codec_would_log_the_token(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    """The reason for the guard: hpack really logs header values at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="hpack")
    hpack.Decoder().decode(hpack.Encoder().encode([("authorization", "Bearer s3cr3t-token")]))
    assert "s3cr3t-token" in caplog.text
