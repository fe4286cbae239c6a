"""The controllers: the resolver, the node-state aggregation, the node stores and the prefetches,
and the NodeView (the digest index and the progress read of the plugins) they and the API server
read.

``assembly.build(mode, inputs)`` builds the controller set for a mode, for the API server
(``--controllers=embedded``, or its part of ``external``) and ``python -m controllers`` alike,
from the one table ``assembly.REGISTERED``. The folders are layers (an import-linter contract,
``docs/controllers.md``): ``__main__``, ``health``, ``assembly``, one folder per controller
(``resolver``, ``aggregate``, ``nodestores``, ``prefetches``; none imports another),
``registration``, ``sources`` and ``nodeview``, ``config``, ``runtime``. Controllers reach
objects through ``runtime.client.Client``, a protocol implemented over the registry in process
(``apiserver/wiring/inprocess.py``) or over HTTP (``sources/kubeapi.py``); never through
storage.
"""
