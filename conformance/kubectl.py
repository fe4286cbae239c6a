"""The real kubectl against the same kubeconfig (explain, printer columns, api-resources)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tempfile


class Kubectl:
    def __init__(
        self, binary: str, kubeconfig: pathlib.Path, context: str | None, timeout: float
    ) -> None:
        self.path = shutil.which(binary)
        self.kubeconfig = kubeconfig
        self.context = context
        self.timeout = timeout
        self._cache = tempfile.TemporaryDirectory(prefix="conformance-kubectl-")

    @property
    def available(self) -> bool:
        return self.path is not None

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        if self.path is None:
            raise RuntimeError("kubectl is not installed")
        command = [self.path, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self._cache.name}"]
        if self.context:
            command.append(f"--context={self.context}")
        return subprocess.run([*command, *args], capture_output=True, text=True,
                              timeout=self.timeout * 2, check=False)  # fmt: skip

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        if done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()[:500]}")
        return done.stdout

    def close(self) -> None:
        self._cache.cleanup()
