"""Controllers embedded in the server process; they reach objects through a client protocol, never storage."""
