"""``Hub``: the handle tests hold on the running fixture hub, and ``run``."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from devkit.fixturehub import content, server
from devkit.fixturehub import state as hubstate


class Hub:
    """Repositories, fault switches and counters of a running fixture hub.

    ``endpoint`` serves the Hugging Face API and resolve URLs and the ModelScope API
    (``modelscope_endpoint`` is the same server); LFS downloads redirect to ``cdn_endpoint``.
    """

    def __init__(self, hub: server.Server, cdn: server.Server, ca_bundle: str | None) -> None:
        self._hub = hub
        self._cdn = cdn
        self._state = hub.shared
        self.ca_bundle = ca_bundle

    @property
    def endpoint(self) -> str:
        return self._hub.endpoint

    @property
    def modelscope_endpoint(self) -> str:
        return self._hub.endpoint

    @property
    def cdn_endpoint(self) -> str:
        return self._cdn.endpoint

    @property
    def hub_netloc(self) -> str:
        return self._hub.netloc

    @property
    def cdn_netloc(self) -> str:
        return self._cdn.netloc

    # --- repositories -------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: Mapping[str, bytes | int | content.FileSpec],
        *,
        private_token: str | None = None,
        commit: str | None = None,
        refs: Mapping[str, str] | None = None,
        gated: bool = False,
        tree_page_size: int = 1000,
        tags: Mapping[str, str] | None = None,
        annotated_tags: Mapping[str, str] | None = None,
    ) -> hubstate.Repo:
        """Serve a repository: ``bytes`` are a regular git file, an ``int`` that many synthetic
        LFS bytes, a ``FileSpec`` anything else. Branches (``refs``) default to ``main`` and
        ``master``; ``tags`` and ``annotated_tags`` map a tag name to the commit it names."""
        built: dict[str, hubstate.RemoteFile] = {}
        for path, spec in files.items():
            data, lfs = content.make(repo_id, path, spec)
            built[path] = hubstate.RemoteFile(path, data, lfs)
        commit = commit or hubstate.default_commit(repo_id, files)
        repo = hubstate.Repo(
            repo_id=repo_id,
            files=built,
            commit=commit,
            refs=dict(refs) if refs is not None else {"main": commit, "master": commit},
            private_token=private_token,
            gated=gated,
            tree_page_size=tree_page_size,
            tags=dict(tags or {}),
            annotated_tags=dict(annotated_tags or {}),
        )
        with self._state.lock:
            self._state.repos[repo_id] = repo
        return repo

    def add_revision(
        self, repo_id: str, files: Mapping[str, bytes | int | content.FileSpec], *,
        commit: str | None = None,
    ) -> hubstate.Repo:
        """A new head commit of a served repository with ``files`` (a spec the previous
        revision had gives the same bytes); ``main``/``master`` move to it, and the earlier
        commits keep being served by their ids."""
        built: dict[str, hubstate.RemoteFile] = {}
        for path, spec in files.items():
            data, lfs = content.make(repo_id, path, spec)
            built[path] = hubstate.RemoteFile(path, data, lfs)
        with self._state.lock:
            repo = self._state.repos[repo_id]
            new = commit or hubstate.default_commit(f"{repo_id}@{len(repo.older) + 1}", files)
            repo.older[repo.commit] = repo.files
            repo.files, repo.commit = built, new
            for branch in ("main", "master"):
                if branch in repo.refs:
                    repo.refs[branch] = new
            return repo

    def remove_repo(self, repo_id: str) -> None:
        with self._state.lock:
            self._state.repos.pop(repo_id, None)

    def repo(self, repo_id: str) -> hubstate.Repo:
        with self._state.lock:
            return self._state.repos[repo_id]

    def content(self, repo_id: str, path: str, commit: str | None = None) -> content.Content:
        """A file's bytes at the head, or at an earlier ``commit``."""
        repo = self.repo(repo_id)
        return repo.files_at(commit or repo.commit)[path].content

    def add_user_token(self, token: str) -> None:
        """A token ModelScope's ``/openapi/v1/users/me`` accepts (besides private repos')."""
        with self._state.lock:
            self._state.user_tokens.add(token)

    def set_modelscope_limit(self, limit: int) -> None:
        """Entries a ModelScope listing returns before it silently truncates (default 3000)."""
        with self._state.lock:
            self._state.modelscope_limit = limit

    # --- faults -------------------------------------------------------------------------

    def faults(self, repo_id: str, path: str | None = None) -> hubstate.Faults:
        """The mutable fault switches for a repository (``path=None``) or one file."""
        with self._state.lock:
            return self._state.faults.setdefault((repo_id, path), hubstate.Faults())

    def clear_faults(self) -> None:
        with self._state.lock:
            self._state.faults.clear()

    # --- counters -----------------------------------------------------------------------

    def reset_counters(self) -> None:
        self._state.reset_counters()

    def requests(self, url_path: str) -> int:
        """Requests (any method, either server) for a URL path, e.g. ``/api/models/o/n/...``."""
        with self._state.lock:
            return self._state.requests[url_path]

    def total_requests(self) -> int:
        """Every request either server answered since the last ``reset_counters``."""
        with self._state.lock:
            return sum(self._state.requests.values())

    def file_requests(self, repo_id: str, path: str) -> int:
        """Body-serving requests (GET resolve, CDN, ModelScope download) for one file."""
        with self._state.lock:
            return self._state.file_requests[(repo_id, path)]

    def bytes_served(self, repo_id: str | None = None, path: str | None = None) -> int:
        with self._state.lock:
            return sum(
                n
                for (repo, name), n in self._state.bytes_served.items()
                if repo_id in (None, repo) and path in (None, name)
            )

    def rate_after(self, repo_id: str, fraction: float) -> float:
        """Bytes per second the hub sent of ``repo_id`` from the moment it had sent ``fraction``
        of what it sent in all (since ``reset_counters``) to its last byte. Past the first part,
        whatever the client's socket buffers took at once is behind: the rate is the client's."""
        with self._state.lock:
            line = list(self._state.timeline.get(repo_id, []))
        if not line:
            return 0.0
        total = line[-1][1]
        start = next(point for point in line if point[1] >= fraction * total)
        seconds = line[-1][0] - start[0]
        return (total - start[1]) / seconds if seconds > 0 else float("inf")

    def ranges(self) -> list[tuple[str, str, int, int]]:
        """Every served body as (repo, path, start, stop exclusive), in order."""
        with self._state.lock:
            return list(self._state.ranges)

    def authorizations(self, netloc: str) -> list[str | None]:
        """The Authorization header of every request seen by the server at ``netloc``."""
        with self._state.lock:
            return list(self._state.authorizations.get(netloc, []))

    def client_sockets(self) -> list[tuple[str, int]]:
        """Peers of this process's open sockets connected to the hub or the CDN.

        For in-process clients: after they closed, this must be empty, whatever broke on the
        way (a connection dropped without being closed stays open until garbage collection).
        """
        ports = {self._hub.server_address[1], self._cdn.server_address[1]}
        found: list[tuple[str, int]] = []
        for name in os.listdir("/proc/self/fd"):
            try:
                if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                    continue
                copy = os.dup(int(name))
            except OSError:
                continue  # closed meanwhile
            try:
                sock = socket.socket(fileno=copy)
            except OSError:
                os.close(copy)
                continue
            with sock:  # closes the copy only
                try:
                    peer = sock.getpeername()
                except OSError:
                    continue  # not connected: a listener
            if isinstance(peer, tuple) and peer[1] in ports:
                found.append((str(peer[0]), int(peer[1])))
        return found

    @property
    def open_requests(self) -> int:
        return self._state.open_requests

    @property
    def max_open_requests(self) -> int:
        return self._state.max_open_requests

    @property
    def open_downloads(self) -> int:
        return self._state.open_downloads

    @property
    def max_open_downloads(self) -> int:
        return self._state.max_open_downloads


WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _self_signed(directory: str, names: Iterable[str]) -> tuple[str, str]:
    """A throwaway certificate for 127.0.0.1, localhost and ``names`` (host names or addresses);
    returns (cert, key) paths. It is its own CA: the file a client trusts is the certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans = list(dict.fromkeys(["localhost", "127.0.0.1", *names]))
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fixturehub")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([_san(name) for name in sans if name not in WILDCARDS]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "fixturehub.crt")
    key_path = os.path.join(directory, "fixturehub.key")
    with open(cert_path, "wb") as out:
        out.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


@contextlib.contextmanager
def run(
    *,
    tls: bool = False,
    cdn_tls: bool | None = None,
    host: str | None = None,
    cdn_host: str | None = None,
    address: tuple[str, int] = ("127.0.0.1", 0),
    cdn_address: tuple[str, int] | None = None,
) -> Iterator[Hub]:
    """Start the hub and its CDN; both stop (and stalls release) on exit.

    The hub listens on ``address`` (loopback and any free port by default), the CDN on
    ``cdn_address`` (default: the hub's host, any free port). ``host`` is the name the hub's URLs
    and redirects carry (default: the address's host, which must then not be a wildcard such as
    ``0.0.0.0``); ``cdn_host`` the CDN's (default: ``host``), so ``cdn_host="localhost"`` names
    the CDN by another host name as well as another port.

    ``tls`` serves the hub over HTTPS with a throwaway CA (``Hub.ca_bundle``) that covers those
    names; ``cdn_tls`` (default: same as ``tls``) does the same for the CDN, so ``tls=True,
    cdn_tls=False`` makes LFS redirects an https-to-http downgrade.
    """
    if host is None:
        if address[0] in WILDCARDS:
            raise ValueError(f"the hub listens on {address[0] or 'every address'}: name the host "
                             "its URLs carry (the address clients reach it at)")
        host = address[0]
    cdn_host = cdn_host or host
    cdn_address = cdn_address or (address[0], 0)
    shared = hubstate.State()
    with tempfile.TemporaryDirectory(prefix="fixturehub-") as directory:
        context: ssl.SSLContext | None = None
        ca_bundle: str | None = None
        if tls or cdn_tls:
            names = (host, cdn_host, address[0], cdn_address[0])
            ca_bundle, key_path = _self_signed(directory, names)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(ca_bundle, key_path)
            context.set_alpn_protocols(["http/1.1"])
        use_cdn_tls = tls if cdn_tls is None else cdn_tls
        hub = server.Server("hub", shared, host, context if tls else None, address)
        try:
            cdn = server.Server("cdn", shared, cdn_host, context if use_cdn_tls else None,
                                cdn_address)  # fmt: skip
        except OSError:
            hub.server_close()
            raise
        hub.peer = cdn
        threads = [
            # A short poll interval keeps shutdown (and so every test's teardown) quick.
            threading.Thread(
                target=s.serve_forever, args=(0.02,), name=f"fixturehub-{s.role}", daemon=True
            )
            for s in (hub, cdn)
        ]
        for thread in threads:
            thread.start()
        try:
            yield Hub(hub, cdn, ca_bundle)
        finally:
            shared.stop.set()
            for s in (hub, cdn):
                s.shutdown()
                s.close_connections()
                s.server_close()
            for thread in threads:
                thread.join(timeout=10)
