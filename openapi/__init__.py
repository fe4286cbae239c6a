"""The API contract of worker.gpustack.ai/v1: schemas, defaults, validation, pruning, documents, the manifest digest."""
