"""How every model-manager process logs: one format, one level, and the libraries held back.

``setup`` is called once by each entry point (the API server, the node plugin, the standalone
controllers). Below WARNING it holds back two kinds of library logger whatever the chosen level:

- ``SECRET_BEARING``: the HTTP/2 header codec (``hpack``) and framing (``h2``) log every header
  they encode or decode at DEBUG, ``Authorization: Bearer ...`` included, on the server's side
  (hypercorn) and the clients' (httpx over HTTP/2). Secrets never reach a log, so these never log
  below WARNING, even with ``--log-level DEBUG``.
- ``PER_REQUEST``: the HTTP clients log one line per request at INFO; the programs log what
  matters themselves.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SECRET_BEARING = ("hpack", "h2")
PER_REQUEST = ("httpx", "httpx2", "httpcore", "httpcore2")


def setup(level: str | int) -> None:
    """Log to stderr at ``level`` (a name such as ``"DEBUG"`` or a number), the libraries above
    held at WARNING or the chosen level, whichever is higher."""
    chosen = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(chosen, int):
        raise ValueError(f"unknown log level {str(level)[:32]!r}")
    logging.basicConfig(level=chosen, format=FORMAT, stream=sys.stderr)
    logging.getLogger().setLevel(chosen)  # also when a handler was there before
    for name in (*SECRET_BEARING, *PER_REQUEST):
        logging.getLogger(name).setLevel(max(logging.WARNING, chosen))
