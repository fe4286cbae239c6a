"""HTTP glue: discovery, OpenAPI, health, and the REST routes of the stored resources.

Handlers parse requests into registry calls and render registry results (JSON, Table,
PartialObjectMetadata, watch streams); every failure is an ``apiserver.errors`` status.
"""
