"""The aggregated API server for worker.gpustack.ai/v1 (starlette on hypercorn).

Layers, top to bottom (import-linter checks them; ``docs/architecture.md`` has the table):
``__main__`` (``python -m apiserver``), ``wiring`` (the app and each mode's parts put together),
``serving`` (hypercorn over TLS, ``--processes N``) beside ``cluster`` (calls to
kube-apiserver) and ``endpoints`` (HTTP glue), ``auth`` (who is calling, may they), ``request``
(each request parsed once), ``registry`` (one generic store plus a strategy per resource),
``options`` (flags -> ``Settings``), ``storage`` (SQLite | etcd), and ``errors``, the one error
model everything raises.
"""
