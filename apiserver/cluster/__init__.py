"""Cluster mode: what the server asks kube-apiserver, through the one client (``kube``):
reviews (TokenReview, SubjectAccessReview, SelfSubjectReview), the plugin's Pods, the
extension-apiserver-authentication ConfigMap, and ``/version``. The delegated authentication and
authorization chain built on top of them is ``apiserver.wiring.delegation``."""
