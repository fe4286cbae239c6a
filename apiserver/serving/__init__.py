"""Serving: hypercorn over TLS until a signal (``server``), ``--processes`` server processes on one
socket (``processes``), TLS contexts reloaded when their files change (``tls``) and the client's
verified chain in every request's scope (``listener``, over ``tlsserver``, which also holds the
guards around hypercorn's flaws)."""
