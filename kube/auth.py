"""The two credentials lightkube's own auth classes do not handle the way a long-running
component needs them to.

* ``TokenFileAuth``: a bearer token read from a file (the projected ServiceAccount token, or a
  kubeconfig ``tokenFile``). The file is checked before every request (one ``stat``) and re-read
  when it changed, as kubelet rotates it; a 401 forces a re-read and one retry with the new
  token. lightkube's ``BearerTokenFileAuth`` only re-reads after a 401.
* ``ExecCredentialAuth``: a kubeconfig ``exec`` plugin. Accepts
  ``client.authentication.k8s.io/v1`` as well as ``v1beta1`` (lightkube's rejects ``v1``), passes
  ``KUBERNETES_EXEC_INFO``, keeps the token until its ``expirationTimestamp`` and runs the plugin
  again after it or after a 401, one run at a time.

Neither ever puts the token into an exception or a log line.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass

import httpx2

from kube.errors import CredentialError

EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
EXEC_TIMEOUT_SECONDS = 60.0
OUTPUT_LIMIT = 1 << 20


class TokenFileAuth(httpx2.Auth):
    """Bearer token from a file, re-read when the file changes or the server answers 401."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._stamp: tuple[int, int, int, int] | None = None
        self._bearer = ""

    def _current(self, force: bool = False) -> str:
        try:
            st = os.stat(self._path)
        except OSError as exc:
            message = f"cannot read the token file {self._path}: {exc.strerror}"
            raise CredentialError(message) from None
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if force or stamp != self._stamp:
            try:
                with open(self._path, encoding="utf-8") as handle:
                    token = handle.read(OUTPUT_LIMIT).strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise CredentialError(f"cannot read the token file {self._path}: {exc}") from None
            if not token:
                raise CredentialError(f"the token file {self._path} is empty")
            self._bearer = f"Bearer {token}"
            self._stamp = stamp
        return self._bearer

    def token(self) -> str:
        """The file's token as of now (read again when the file changed); ``CredentialError``."""
        return self._current().removeprefix("Bearer ")

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        sent = self._current()
        request.headers["Authorization"] = sent
        response = yield request
        if response.status_code != 401:
            return
        fresh = self._current(force=True)
        if fresh != sent:
            request.headers["Authorization"] = fresh
            yield request


@dataclass(frozen=True, slots=True)
class ExecSpec:
    """The ``exec`` stanza of a kubeconfig user."""

    api_version: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None


Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class ExecCredentialAuth(httpx2.Auth):
    """Bearer token from an exec credential plugin (async clients only)."""

    def __init__(self, spec: ExecSpec, *, clock: Clock = _utcnow) -> None:
        if spec.api_version not in EXEC_API_VERSIONS:
            raise CredentialError(
                f"exec plugin apiVersion {spec.api_version!r} is not supported "
                f"(supported: {', '.join(EXEC_API_VERSIONS)})"
            )
        self._spec = spec
        self._clock = clock
        self._bearer = ""
        self._expires: datetime.datetime | None = None
        self._lock = asyncio.Lock()
        self.runs = 0

    def sync_auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        raise CredentialError("exec credential plugins are supported by the async client only")

    def _valid(self) -> bool:
        if not self._bearer:
            return False
        return self._expires is None or self._clock() < self._expires

    async def _token(self, stale: str | None) -> str:
        async with self._lock:
            # Another request may have refreshed it while this one waited for the lock.
            if self._valid() and self._bearer != stale:
                return self._bearer
            self._bearer, self._expires = await self._run()
            return self._bearer

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = self._bearer if self._valid() else await self._token(None)
        request.headers["Authorization"] = sent
        response = yield request
        if response.status_code != 401:
            return
        fresh = await self._token(sent)
        if fresh != sent:
            request.headers["Authorization"] = fresh
            yield request

    async def _run(self) -> tuple[str, datetime.datetime | None]:
        spec = self._spec
        env = dict(os.environ)
        env.update(spec.env or {})
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {
                "apiVersion": spec.api_version,
                "kind": "ExecCredential",
                "spec": {"interactive": False},
            }
        )
        name = os.path.basename(spec.command)
        self.runs += 1
        try:
            process = await asyncio.create_subprocess_exec(
                spec.command,
                *spec.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise CredentialError(f"exec plugin {name!r} could not start: {exc.strerror}") from None
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise CredentialError(
                f"exec plugin {name!r} gave no credential within {EXEC_TIMEOUT_SECONDS:.0f}s"
            ) from None
        if process.returncode != 0:
            lines = stderr.decode("utf-8", "replace").strip().splitlines()
            last = lines[-1][:200] if lines else ""
            raise CredentialError(f"exec plugin {name!r} exited with {process.returncode}: {last}")
        return self._parse(name, stdout)

    def _parse(self, name: str, stdout: bytes) -> tuple[str, datetime.datetime | None]:
        if len(stdout) > OUTPUT_LIMIT:
            raise CredentialError(f"exec plugin {name!r} printed more than 1 MiB")
        try:
            credential = json.loads(stdout)
        except ValueError:
            raise CredentialError(f"exec plugin {name!r} did not print JSON") from None
        if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
            raise CredentialError(f"exec plugin {name!r} did not print an ExecCredential")
        if credential.get("apiVersion") != self._spec.api_version:
            raise CredentialError(
                f"exec plugin {name!r} answered apiVersion {credential.get('apiVersion')!r}, "
                f"expected {self._spec.api_version!r}"
            )
        status = credential.get("status")
        if not isinstance(status, dict):
            raise CredentialError(f"exec plugin {name!r} printed no status")
        token = status.get("token")
        if not isinstance(token, str) or not token:
            if status.get("clientCertificateData"):
                raise CredentialError(
                    f"exec plugin {name!r} returned a client certificate; only tokens are supported"
                )
            raise CredentialError(f"exec plugin {name!r} returned no token")
        expires: datetime.datetime | None = None
        stamp = status.get("expirationTimestamp")
        if isinstance(stamp, str) and stamp:
            try:
                expires = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                raise CredentialError(
                    f"exec plugin {name!r} returned a bad expirationTimestamp"
                ) from None
            if expires.tzinfo is None:
                expires = expires.replace(tzinfo=datetime.UTC)
        return f"Bearer {token}", expires
