"""Small ASGI pieces for tests that serve an app of their own."""

from __future__ import annotations

from typing import Any


async def lifespan(receive: Any, send: Any) -> None:
    """Answer a lifespan scope: complete startup and shutdown, return after shutdown."""
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return
