"""The aggregated API server for worker.gpustack.ai/v1 (starlette on hypercorn).

Layers, top to bottom: ``endpoints`` (HTTP glue), ``auth`` (who is calling, may they),
``registry`` (one generic store plus a strategy per resource), ``storage`` (SQLite | etcd).
"""
