"""The controllers: the resolver, the node stores, the prefetches and their pools and bindings,
the warm gate, and the NodeView (the digest index, the progress read of the plugins and the
artifacts' node counts) they and the API server read.

``assembly.build(mode, inputs)`` builds the controller set for a mode, for the API server
(``--controllers=embedded``, or its part of ``external``) and ``python -m controllers`` alike,
from the one table ``assembly.REGISTERED``. The folders are layers (an import-linter contract,
``docs/controllers.md``): ``__main__``, ``health``, ``assembly``, one folder per controller
(``resolver``, ``nodestores``, ``prefetches``, ``bindings``, ``warmgate``; none imports another),
``registration``, ``sources`` and ``nodeview``, ``config``, ``runtime``. Controllers reach
objects through ``runtime.client.Client``, a protocol implemented over the registry in process
(``apiserver/wiring/inprocess.py``) or over HTTP (``sources/kubeapi.py``); never through
storage.
"""
