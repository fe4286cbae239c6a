"""The controllers: the resolver, the node-state aggregation and the progress read of the plugins.

They run embedded in the API server (``--controllers=embedded``) or as their own process
(``python -m controllers``). Either way they reach objects through ``client.Client``, a protocol
implemented over the registry in process (``apiserver/wiring/inprocess.py``) or over HTTP; never
through storage (an import-linter contract checks this). ``docs/controllers.md`` describes each one.
"""
