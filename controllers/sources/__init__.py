"""Where the controllers' objects and facts come from: the client over kube-apiserver, its
Events, Secrets (a directory or kube-apiserver), claims, the node plugins' Pods and HTTPS
endpoints, and the sources of a cluster as one bundle."""
