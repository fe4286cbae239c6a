"""Benchmarks: ``python -m bench [NAME]``; each prints value, baseline and ratio
(docs/performance.md)."""
