"""Real processes started for a test or a benchmark and always stopped: the API server
(``apiserver``), etcd (``etcd``), the aggregator's requests (``aggregator``), the API server in
cluster mode behind the fixture control plane (``clustermode``), node plugins that sync from each
other (``peernodes``), and stopping a process for real (``processes``)."""
