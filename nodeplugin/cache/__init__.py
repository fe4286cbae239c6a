"""The node cache on disk: layout, atomic publication, references, usage state, locks, mounts."""
