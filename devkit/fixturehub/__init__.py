"""A fixture Hugging Face Hub + ModelScope + CDN on loopback, for tests and benchmarks.

Usage::

    with fixturehub.run() as hub:
        hub.add_repo("org/model", {"config.json": b"{}", "model.safetensors": 64 << 20})
        hub.faults("org/model", "model.safetensors").stall_at = 10 << 20
        ...  # point a client at hub.endpoint; assert on hub.bytes_served(...) etc.
"""

from devkit.fixturehub.content import FileSpec
from devkit.fixturehub.hub import Hub, run
from devkit.fixturehub.state import Faults

__all__ = ["Faults", "FileSpec", "Hub", "run"]
