"""A black-box conformance suite for an installed ``worker.gpustack.ai/v1``.

``python -m conformance --kubeconfig FILE`` checks whatever endpoint the kubeconfig names (a
cluster through the aggregator, or the standalone server) and reports each rule as pass, fail or
skip. It depends only on pytest, lightkube (kubeconfig handling, HTTP) and PyYAML, plus the
``kubectl`` binary for the checks that exercise kubectl itself; it never imports the server.
"""
