"""hypercorn over TLS, run by us: the API server's HTTPS port and the node plugin's.

``listener.serve`` runs hypercorn's own per-connection handler (``TCPServer``) over sockets it
listens on itself, so that each program can set what hypercorn has no setting for: the TLS
shutdown timeout of its served connections (never asyncio's process-wide constant), and an app
per connection (the API server hands every request its connection's verified client chain).
``guards`` holds the subclasses of hypercorn's classes that keep a connection alive through what
clients do every day. Imports nothing of ours.
"""
