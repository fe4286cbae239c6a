"""Hugging Face and ModelScope access, shared by the resolver (controllers) and the node plugin."""
