"""Storage: an etcd-shaped key-value store with revisions, compare-and-swap and watch.

`interface` defines the contract every backend meets; `sqlite` is the embedded default (its SQL
lives in `logtable`, its in-memory watch fan-out in `broadcast`).
"""
