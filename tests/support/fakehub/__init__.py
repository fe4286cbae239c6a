"""A fixture Hugging Face Hub + ModelScope + CDN on loopback, for tests and benchmarks.

Usage::

    with fakehub.run_fakehub() as hub:
        hub.add_repo("org/model", {"config.json": b"{}", "model.safetensors": 64 << 20})
        hub.faults("org/model", "model.safetensors").stall_at = 10 << 20
        ...  # point a client at hub.endpoint; assert on hub.bytes_served(...) etc.
"""

from tests.support.fakehub.content import FileSpec
from tests.support.fakehub.hub import FakeHub, run_fakehub
from tests.support.fakehub.state import Faults

__all__ = ["FakeHub", "Faults", "FileSpec", "run_fakehub"]
