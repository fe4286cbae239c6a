"""The aggregator: a ModelArtifact's status.nodes counts from the NodeModelStores that hold its
digest."""
