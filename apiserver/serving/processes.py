"""``--processes N``: N server processes sharing one listening socket.

The parent binds ``--bind``/``--port`` once, then runs N copies of the same command line, each
inheriting the socket (``fd://`` for hypercorn) and told its index through the environment. The
kernel hands each new connection to whichever process accepts first; every process has its own
event loop and its own copy of the live objects: on etcd its client and watch cache, etcd keeping
them consistent exactly as it keeps separate replicas consistent; on SQLite its own store on the
one shared file (``storage.sqlite``, ``shared``), which reads what the others committed before it
answers. The parent only supervises: SIGTERM/SIGINT go to every process
(each drains its own connections), and a process that dies is started again after a pause, so
one crash does not take the socket away from the others.

The flag keeps its name (gunicorn's and uvicorn's); everywhere else in this code base "worker"
is the controllers' identity (``apiserver.auth.worker``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from apiserver.flags import config

log = logging.getLogger(__name__)

FD_ENV = "MODEL_MANAGER_LISTEN_FD"
INDEX_ENV = "MODEL_MANAGER_PROCESS_INDEX"
RESTART_PAUSE = 1.0
"""Seconds before a dead server process is started again."""


def inherited_fd() -> int | None:
    """In a child: the inherited listening socket's descriptor (None in a plain server)."""
    value = os.environ.get(FD_ENV)
    return int(value) if value else None


def index() -> int:
    """In a child: its index, 0 to N-1 (0 in a plain server)."""
    return int(os.environ.get(INDEX_ENV, "0"))


def listen(settings: config.Settings) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((settings.bind, settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def supervise(settings: config.Settings, argv: Sequence[str]) -> int:
    """Run ``settings.storage.processes`` server processes on one socket until SIGTERM/SIGINT."""
    count = settings.storage.processes
    sock = listen(settings)
    stopping = threading.Event()
    children: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(index: int) -> None:
        env = dict(os.environ, **{FD_ENV: str(sock.fileno()), INDEX_ENV: str(index)})
        children[index] = subprocess.Popen(
            [sys.executable, "-m", "apiserver", *argv], env=env, pass_fds=(sock.fileno(),)
        )

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, stopping %d server processes", signal.Signals(signum).name, count)
        stopping.set()
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for index in range(count):
        spawn(index)
    log.info("%d server processes serving %s", count, settings.url)
    while not stopping.is_set():
        for index, child in list(children.items()):
            if child.poll() is not None and not stopping.is_set():
                log.error("server process %d (pid %d) exited with %s; starting it again",
                          index, child.pid, child.returncode)  # fmt: skip
                time.sleep(RESTART_PAUSE)
                if not stopping.is_set():
                    spawn(index)
        stopping.wait(0.2)
    deadline = time.monotonic() + settings.shutdown_timeout + 10
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    sock.close()
    return 0
