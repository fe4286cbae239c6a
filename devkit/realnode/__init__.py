"""A real one-node Kubernetes for the end-to-end tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, containerd and kubelet, started from the directory
``$MODEL_MANAGER_SHARED_KUBE`` names (its binaries and its reference scripts
``cluster-up``/``node-up``/``node-down``, which handle this machine's quirks), plus the locally
built images imported into containerd.

``rig.missing()`` names what this machine lacks (the test skips with it); ``rig.Rig`` starts the
cluster and always tears it down (processes, mounts, the ``agg`` network namespace, state);
``deploy.hub_on_node`` serves the fixture hub on the rig's host address, which the Pods reach.
"""
