"""Shared test harness: real processes (API server, kubectl, the Python client) and fixtures."""
