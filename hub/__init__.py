"""Hugging Face and ModelScope access, shared by the resolver (controllers) and the node plugin.

``config`` builds the one httpx client; ``huggingface`` and ``modelscope`` implement the
``source.Source`` seam (resolve a revision, list a commit, stream a byte range) over
``endpoint.Endpoint``, which owns what they do alike; ``listing`` turns
a listing into the canonical manifest; every failure is an ``errors.HubError``.
"""
