"""The read side every API server runs, leader or not: the digest index over the
NodeModelStores and the live progress of an artifact's delivery."""
