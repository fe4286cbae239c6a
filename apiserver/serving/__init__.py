"""Serving TLS: certificates reloaded on change, and the client's verified chain in the scope."""
