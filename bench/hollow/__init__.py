"""Hollow node plugins: the real plugin's API side over a simulated disk, many in a process
(``bench/fleet.py``'s scenario, and the integration test of the simulator itself)."""
