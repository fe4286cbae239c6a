"""Continue tokens round-trip and refuse tampering."""

from __future__ import annotations

import pytest

from apiserver import errors
from apiserver.registry import continuation


def test_round_trip() -> None:
    token = continuation.encode(42, "/modelartifacts/a/m01")
    assert continuation.decode(token, prefix="/modelartifacts/a/") == (42,
                                                                      "/modelartifacts/a/m01")
    assert continuation.decode(token, prefix="/modelartifacts/") == (42, "/modelartifacts/a/m01")


@pytest.mark.parametrize("token", ["", "%%%", "eyJ4IjoxfQ", continuation.encode(1, "/other/x")])
def test_refused(token: str) -> None:
    with pytest.raises(errors.BadRequest, match="continue key is not valid"):
        continuation.decode(token, prefix="/modelartifacts/")
