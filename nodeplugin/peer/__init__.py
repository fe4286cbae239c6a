"""Node-to-node sync: a plugin serves its published trees to other plugins, and pulls from them.

``wire`` names the endpoints and the token audience, ``admission`` checks the caller (a
TokenReview of its projected ServiceAccount token, through ``nodeplugin.reviews``), ``server``
answers a tree's stored manifest and its files by byte range, ``client`` is one peer as a
``materialize.peers.Candidate``, and ``holders`` finds the Ready nodes holding a digest. The
downloader treats a peer as one more byte source (``materialize.peers``).
"""
