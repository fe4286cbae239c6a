"""Materialization: bring a digest's files onto the node, verified, and publish them."""
