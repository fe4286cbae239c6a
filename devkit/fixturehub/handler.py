"""The fixture hub's request-handler base: JSON answers, status faults, and file bodies served
with Range support and the byte-level faults (stall, reset, truncate, corrupt, rate)."""

from __future__ import annotations

import array
import fcntl
import json
import re
import socket
import struct
import termios
import threading
import time
from http import server as http_server
from typing import TYPE_CHECKING, Any

from devkit.fixturehub import content
from devkit.fixturehub import state as hubstate

if TYPE_CHECKING:
    from devkit.fixturehub import server as hubserver

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
SEND_BYTES = 1 << 20


class Abort(Exception):
    """Stop serving this connection (after a reset, a truncation or a client hang-up)."""


class BaseHandler(http_server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: hubserver.Server
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        return

    # --- responses ----------------------------------------------------------------------

    def _json(
        self, status: int, body: object, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _status_faults(self, repo_id: str, path: str | None) -> bool:
        """Answer a 5xx or 429 fault if one is armed; True when it answered."""
        shared = self.server.shared
        for key in ((repo_id, None), (repo_id, path)) if path else ((repo_id, None),):
            faults = shared.fault(*key)
            if faults is None:
                continue
            if faults.fail_after_bytes is not None and path is not None:
                with shared.lock:
                    served = shared.bytes_served[(repo_id, path)]
                if served < faults.fail_after_bytes:
                    continue
            if shared.take(faults, "fail"):
                body: dict[str, object] = {"error": "injected failure"}
                if faults.fail_code is not None:
                    body = {"Code": faults.fail_code, "Data": None, "Message": "injected",
                            "RequestId": "fixturehub", "Success": False}
                coded = {} if faults.fail_error_code is None else {
                    "x-error-code": faults.fail_error_code}
                self._json(faults.fail_status, body, coded)
                return True
            if shared.take(faults, "rate_limit"):
                if faults.ratelimit_reset is not None:
                    headers = {
                        "ratelimit": f'"api";r=0;t={faults.ratelimit_reset}',
                        "ratelimit-policy": '"fixed window";"api";q=500;w=300',
                    }
                else:
                    headers = {"retry-after": str(faults.retry_after)}
                self._json(429, {"error": "rate limited"}, headers)
                return True
        return False

    def _repo(self, repo_id: str) -> hubstate.Repo | None:
        with self.server.shared.lock:
            return self.server.shared.repos.get(repo_id)
    # --- bytes --------------------------------------------------------------------------

    def _serve_file(
        self, repo: hubstate.Repo, remote: hubstate.RemoteFile, headers: dict[str, str]
    ) -> None:
        size = remote.content.size
        wanted = self.headers.get("range")
        start, stop, status = 0, size, 200
        if wanted is not None:
            match = _RANGE.fullmatch(wanted.strip())
            if match is None or (match[1] == "" and match[2] == ""):
                start, stop = 0, size  # unsupported (multi-range): whole body, like many CDNs
            elif match[1] == "":
                start, stop, status = max(0, size - int(match[2])), size, 206
            else:
                start = int(match[1])
                stop = min(size, int(match[2]) + 1) if match[2] else size
                status = 206
                if start >= size or stop <= start:
                    self.send_response(416)
                    self.send_header("content-range", f"bytes */{size}")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
        self.send_response(status)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("accept-ranges", "bytes")
        self.send_header("content-length", str(stop - start))
        if status == 206:
            self.send_header("content-range", f"bytes {start}-{stop - 1}/{size}")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        self._send_bytes(repo, remote, start, stop)

    def _send_bytes(
        self, repo: hubstate.Repo, remote: hubstate.RemoteFile, start: int, stop: int
    ) -> None:
        shared = self.server.shared
        key = (repo.repo_id, remote.path)
        faults = shared.fault(repo.repo_id, remote.path) or hubstate.Faults()

        def fires(name: str) -> int | None:
            offset: int | None = getattr(faults, f"{name}_at")
            if offset is None or not start <= offset < stop:
                return None
            return offset if shared.take(faults, name) else None

        stall_at, reset_at, truncate_at = fires("stall"), fires("reset"), fires("truncate")
        corrupt_at = faults.corrupt_at
        with shared.lock:
            shared.file_requests[key] += 1
            shared.ranges.append((repo.repo_id, remote.path, start, stop))
            shared.open_downloads += 1
            shared.max_open_downloads = max(shared.max_open_downloads, shared.open_downloads)
        began, sent = time.monotonic(), 0
        position = start
        cuts = {c for c in (stall_at, reset_at, truncate_at) if c is not None}
        boundaries = sorted(cuts | {stop})
        # Large pieces keep the hub's own CPU small (the benchmarks measure the client); a paced
        # response sends small ones so its rate is smooth.
        size = content.CHUNK if faults.rate else SEND_BYTES
        open_download = True
        try:
            for boundary in boundaries:
                for piece in remote.content.chunks(position, boundary, size):
                    if corrupt_at is not None and position <= corrupt_at < position + len(piece):
                        at = corrupt_at - position
                        piece = bytes(piece[:at]) + bytes([piece[at] ^ 0xFF]) + piece[at + 1 :]
                    if position + len(piece) == stop:
                        # The counters are settled before the last piece goes out: a client
                        # that has every byte must find the download closed and counted.
                        with shared.lock:
                            shared.served(key, len(piece))
                            shared.open_downloads -= 1
                        open_download = False
                        self.wfile.write(piece)
                        break
                    self.wfile.write(piece)
                    position += len(piece)
                    sent += len(piece)
                    with shared.lock:
                        shared.served(key, len(piece))
                    if faults.rate:
                        ahead = sent / faults.rate - (time.monotonic() - began)
                        if ahead > 0 and shared.stop.wait(ahead):
                            raise Abort
                if boundary == reset_at:
                    self._reset()
                if boundary == truncate_at:
                    raise Abort
                if boundary == stall_at and _stalled(shared.stop, faults):
                    raise Abort
        finally:
            if open_download:
                with shared.lock:
                    shared.open_downloads -= 1

    def _reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0) rather than a clean close.

        The RST comes only once the client's kernel acknowledged every byte sent before it, so
        the client reads exactly the bytes up to the fault's offset and then the reset: an RST
        discards whatever is still in the sender's queue, which would make the offset the client
        stops at depend on timing (Nagle, a busy client) instead of on the fault.
        """
        try:
            self._wait_until_acknowledged()
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            self.connection.close()
        finally:
            raise Abort

    def _wait_until_acknowledged(self, timeout: float = 10.0) -> None:
        """Until the socket's send queue is empty (TIOCOUTQ counts unsent plus unacked bytes)."""
        stop = self.server.shared.stop
        deadline = time.monotonic() + timeout
        queued = array.array("i", [0])
        while time.monotonic() < deadline:
            fcntl.ioctl(self.connection.fileno(), termios.TIOCOUTQ, queued, True)
            if queued[0] == 0 or stop.wait(0.001):
                return


def _stalled(stop: threading.Event, faults: hubstate.Faults) -> bool:
    """Wait out a stall (``stall_seconds``, or until ``stall_until`` is set, whichever comes
    first); True when the hub stops meanwhile."""
    if faults.stall_until is None:
        return stop.wait(faults.stall_seconds)
    deadline = None if faults.stall_seconds is None else time.monotonic() + faults.stall_seconds
    while not faults.stall_until.is_set():
        if stop.wait(0.05):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            break
    return False
