"""Cluster mode: what the server asks kube-apiserver, through the one client (``kube``):
reviews (TokenReview, SubjectAccessReview, SelfSubjectReview), the plugin's Pods, the
extension-apiserver-authentication ConfigMap, and ``/version``; and the wiring of the delegated
authentication and authorization chain on top of them."""
