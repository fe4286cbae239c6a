"""The etcd backend: ``client`` (grpc.aio over stubs generated from ``rpc.proto``), ``store``
(``interface.Store`` on etcd), ``keys`` (the key layout under the prefix), ``compactor``."""
