"""Controllers embedded in the server process (resolver, node stores, progress fan-out).

They reach objects through a client protocol, never storage. They arrive with later issues; the
package exists now so the layer contracts in ``pyproject.toml`` cover it from the start.
"""
