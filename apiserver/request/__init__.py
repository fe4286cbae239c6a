"""A request, parsed once: what it asks for (``info``) and every query option (``query``).

Authorization, the status guards, the handlers and the log line all read the one
``RequestInfo`` that ``info.of`` parses per request and keeps in the ASGI scope; nothing reads
the raw query string or re-splits the path after it.
"""
