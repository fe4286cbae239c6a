"""The API contract of worker.gpustack.ai/v1.

Schemas, defaults, validation, admission, pruning, printer columns, the OpenAPI documents and the
canonical manifest digest. Everything here is pure and imports nothing else of the project.
"""
