"""The development kit: stand-ins and harnesses that speak the real wire, for the tests, the demo,
the benchmarks and an operator trying the chart without internet.

- ``fixturehub``: a Hugging Face Hub + ModelScope + CDN serving fixture or local files
  (``python -m devkit.fixturehub``, docs/hub.md);
- ``controlplane``: the fixture kube-apiserver (authentication, RBAC, aggregation, watches);
- ``harness``: the real processes started and stopped for a test or a benchmark (the API server,
  etcd, the aggregator's requests, the API server behind the fixture control plane, node plugins);
- ``realnode``: a real one-node Kubernetes (the end-to-end tests, ``make bench BENCH=pod-start``);
- ``admitting``, ``clock``, ``helm``, ``chartrbac``, ``trees``: the admission chain as the
  standalone server builds it, a manual clock, the chart tool, the chart's RBAC as a policy, and
  published trees.

The product never imports this package (pyproject.toml's import contracts); it imports the
product.
"""
