"""``make demo``: the whole flow on this machine, without a cluster.

The fixture hub serves a small synthetic model; the standalone API server (with its controllers
when this build has them) and the node plugin run as real processes; an artifact is created with
kubectl; a CSI publish (the way kubelet does it) is retried until it mounts, with a progress bar;
then ``kubectl get mart,nms -o wide``. Ctrl-C at any point stops everything and cleans up.
Mounts need root. Settings come from the environment:

  DEMO_DIR               where everything lives (default .local/demo; emptied at the start)
  DEMO_NONINTERACTIVE=1  do not wait for Ctrl-C at the end (tests, CI)
  DEMO_RESOLVE_TIMEOUT   seconds to wait for Resolved=True (default 30)
  DEMO_MODEL_BYTES       size of the synthetic weights file (default 48 MiB)
  DEMO_BYTES_PER_SECOND  the plugin's download rate limit, to watch the bar move (default 8 MiB)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from types import FrameType
from typing import Any

import grpc
import httpx

from demo import csiclient, progressbar
from devkit import fixturehub
from devkit.harness import apiserver as server_support
from openapi import resources, volume, wire
from openapi.kinds import modelartifact, progress

REPO = pathlib.Path(__file__).resolve().parents[1]
NAMESPACE = "demo"
ARTIFACT = "tiny-model"
REPOSITORY = "demo/tiny-model"
NODE = "demo-node"
KUBECTL = os.environ.get("KUBECTL", "kubectl")


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def step(number: int, text: str) -> None:
    say(f"\n==> step {number}: {text}")


def help_of(module: str) -> str:
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout


def has_flag(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


class Demo:
    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.base = pathlib.Path(os.environ.get("DEMO_DIR", REPO / ".local" / "demo")).resolve()
        self.interactive = os.environ.get("DEMO_NONINTERACTIVE") != "1"
        self.resolve_timeout = float(os.environ.get("DEMO_RESOLVE_TIMEOUT", "30"))
        self.model_bytes = int(os.environ.get("DEMO_MODEL_BYTES", str(48 << 20)))
        self.rate = int(os.environ.get("DEMO_BYTES_PER_SECOND", str(8 << 20)))
        self.root = os.geteuid() == 0
        self.missing: list[str] = []
        self.pod_uid = str(uuid.uuid4())

    # --- steps --------------------------------------------------------------------------------

    def run(self) -> None:
        self.prepare()
        step(1, "the fixture hub serves a small synthetic model")
        hub = self.stack.enter_context(fixturehub.run())
        files: dict[str, bytes | int] = {
            "config.json": b'{"model_type": "demo"}\n',
            "model.safetensors": self.model_bytes,
        }
        hub.add_repo(REPOSITORY, files)
        weights = progressbar.size(self.model_bytes)
        say(f"    {hub.endpoint}/{REPOSITORY}: config.json and a {weights} weights file")

        step(2, "the API server, standalone (SQLite, a local CA, static tokens)")
        server = self.start_server(hub.endpoint)
        say(f"    {server.url}; to look around from another shell:")
        say(f"    export KUBECONFIG={server.kubeconfig}")

        step(3, "the node plugin: CSI socket, cache under " + str(self.base / "cache"))
        kubelet = self.start_plugin(server, hub.endpoint)
        say(f"    driver {kubelet.driver()} on {self.base / 'csi.sock'}")

        step(4, "an artifact, created with kubectl")
        say(self.kubectl(server, "apply", "-f", "-", stdin=self.manifest()).strip())

        step(5, "resolution: the controllers turn the repository into a content digest")
        artifact = self.wait_resolved(server)

        step(6, "a CSI publish into a local target directory, as kubelet does it")
        self.publish(server, kubelet, artifact, hub)

        step(7, "what the API shows")
        say(self.kubectl(server, "get", "mart,nms", "-A", "-o", "wide"))
        self.summary()
        if self.interactive:
            say("press Ctrl-C to stop everything and clean up")
            signal.pause()

    def prepare(self) -> None:
        if self.base.exists():
            self.unmount_all()
            shutil.rmtree(self.base)
        self.base.mkdir(parents=True)
        self.stack.callback(self.cleanup_files)
        if not self.root:
            say("note: not root, so nothing can be mounted; every step but the mount still runs "
                "(sudo make demo shows the mount)")  # fmt: skip

    def start_server(self, hub_endpoint: str) -> server_support.RunningServer:
        help_text = help_of("apiserver")
        args: list[str] = []
        if has_flag(help_text, "--huggingface-endpoint"):
            args += ["--huggingface-endpoint", hub_endpoint]
        if has_flag(help_text, "--node"):
            args += ["--node", NODE]
        if has_flag(help_text, "--plugin-node"):
            args += ["--plugin-node", NODE]  # plugin.kubeconfig's Pod runs on the demo's node
        if has_flag(help_text, "--controllers"):
            # the test harness turns them off unless asked (API-only tests); the demo asks
            args += ["--controllers=embedded"]
        else:
            self.missing.append("controllers (issue 9): nothing resolves artifacts yet")
        running = server_support.start(self.base / "server", extra_args=args)
        self.stack.callback(running.kill)
        self.stack.callback(running.stop)
        return running

    def start_plugin(
        self, server: server_support.RunningServer, hub_endpoint: str
    ) -> csiclient.Kubelet:
        kubeconfig = server.data_dir / "plugin.kubeconfig"
        if not kubeconfig.exists():
            kubeconfig = server.kubeconfig
            self.missing.append("a node-plugin identity (issue 8): the plugin uses the admin "
                                "kubeconfig")  # fmt: skip
        socket = self.base / "csi.sock"
        kubelet_dir = self.base / "kubelet"
        (kubelet_dir / "pods").mkdir(parents=True)
        command = [sys.executable, "-m", "nodeplugin", "--node-name", NODE,
                   "--endpoint", f"unix://{socket}", "--root", str(self.base / "cache"),
                   "--kubelet-dir", str(kubelet_dir), "--kubeconfig", str(kubeconfig),
                   "--huggingface-endpoint", hub_endpoint,
                   "--download-bytes-per-second", str(self.rate),
                   "--secure-port", str(server_support.free_port()),
                   "--bind-address", "127.0.0.1"]  # fmt: skip
        log = (self.base / "plugin.log").open("ab")
        self.stack.callback(log.close)
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        self.stack.callback(self.stop_process, process)
        deadline = time.monotonic() + 30
        while not socket.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the node plugin did not start; see {self.base / 'plugin.log'}")
            time.sleep(0.05)
        kubelet = csiclient.Kubelet(socket, kubelet_dir)
        self.stack.callback(kubelet.close)
        return kubelet

    def manifest(self) -> str:
        return json.dumps(modelartifact.ModelArtifact(
            apiVersion=resources.GROUP_VERSION,
            kind=modelartifact.KIND,
            metadata={"name": ARTIFACT, "namespace": NAMESPACE},
            spec=modelartifact.ModelArtifactSpec(
                source=modelartifact.Source(huggingFace={"repository": REPOSITORY})),
        ))  # fmt: skip

    def wait_resolved(self, server: server_support.RunningServer) -> dict[str, Any]:
        deadline = time.monotonic() + self.resolve_timeout
        while True:
            artifact = self.get_artifact(server)
            condition = modelartifact.resolved_condition(artifact)
            if modelartifact.is_resolved(artifact):
                size = progressbar.size(modelartifact.size_bytes(artifact) or 0)
                say(f"    Resolved: {modelartifact.manifest_digest(artifact)} "
                    f"({modelartifact.file_count(artifact)} files, {size})")
                return artifact
            if time.monotonic() > deadline:
                if condition:
                    say(f"    Resolved={condition.get('status')} ({condition.get('reason')}): "
                        f"{condition.get('message', '')}")  # fmt: skip
                else:
                    say(f"    not resolved after {self.resolve_timeout:.0f}s: nothing in this "
                        "build writes an artifact's status yet (the controllers, issue 9).")
                    say("    Mount authorization trusts only a resolved status, so the mount "
                        "below is refused; once the controllers land this step resolves it.")
                return artifact
            time.sleep(0.2)

    def publish(
        self,
        server: server_support.RunningServer,
        kubelet: csiclient.Kubelet,
        artifact: dict[str, Any],
        hub: fixturehub.Hub,
    ) -> None:
        digest = modelartifact.manifest_digest(artifact)
        attributes = volume.attributes(ARTIFACT, wire.text(artifact, "metadata", "uid"),
                                       digest or "sha256:" + "0" * 64)
        target = kubelet.target(self.pod_uid)
        say(f"    target {target}")
        self.stack.callback(kubelet.unpublish, self.pod_uid)
        if not digest:
            answer = kubelet.publish(namespace=NAMESPACE, pod_uid=self.pod_uid,
                                     attributes=attributes)  # fmt: skip
            say(f"    NodePublishVolume: {answer.code.name}: {answer.message}")
            self.missing.append("the download and the mount (they need a resolved artifact)")
            return
        total = modelartifact.size_bytes(artifact) or self.model_bytes
        bar = progressbar.Bar(sys.stdout)
        while True:
            answer = kubelet.publish(namespace=NAMESPACE, pod_uid=self.pod_uid,
                                     attributes=attributes)  # fmt: skip
            if answer.code not in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE):
                break
            bar.update(self.downloaded(server), total, "downloading")
            time.sleep(0.25)
        bar.update(total if answer.ok else self.downloaded(server), total,
                   "mounted" if answer.ok else answer.code.name)  # fmt: skip
        bar.finish()
        if not answer.ok:
            say(f"    NodePublishVolume: {answer.code.name}: {answer.message}")
            if answer.code == grpc.StatusCode.INTERNAL and not self.root:
                self.missing.append("the mount itself: run as root (sudo make demo)")
            return
        say("    mounted read-only; the files match the hub byte for byte:")
        for path in sorted(p for p in target.rglob("*") if p.is_file()):
            relative = path.relative_to(target).as_posix()
            if relative.startswith("."):
                continue
            expected = hashlib.sha256(b"".join(hub.content(REPOSITORY, relative).chunks()))
            actual = hashlib.sha256(path.read_bytes())
            match = "ok" if expected.digest() == actual.digest() else "MISMATCH"
            say(f"      {relative:24} {progressbar.size(path.stat().st_size):>10}  {match}")

    def downloaded(self, server: server_support.RunningServer) -> int:
        """Live bytes from the progress subresource; before the controllers fan out to the
        plugin, the bytes of the partial download on disk."""
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            with server.client() as client:
                body = client.get(f"/apis/{resources.GROUP_VERSION}/namespaces/{NAMESPACE}/"
                                  f"modelartifacts/{ARTIFACT}/progress").json()  # fmt: skip
            if progress.downloading_bytes(body) > 0:
                return progress.downloading_bytes(body)
        partial = self.base / "cache" / "partial"
        if not partial.exists():
            return 0
        return sum(p.stat().st_size for p in partial.rglob("*") if p.is_file()
                   and not p.name.startswith("."))  # fmt: skip

    def summary(self) -> None:
        say("\ndemo complete.")
        if self.missing:
            say("not in this build yet:")
            for item in self.missing:
                say(f"  - {item}")

    # --- helpers ------------------------------------------------------------------------------

    def kubectl(
        self, server: server_support.RunningServer, *args: str, stdin: str | None = None
    ) -> str:
        done = subprocess.run([KUBECTL, f"--kubeconfig={server.kubeconfig}", *args], input=stdin,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def get_artifact(self, server: server_support.RunningServer) -> dict[str, Any]:
        text = self.kubectl(server, "get", "mart", ARTIFACT, "-n", NAMESPACE, "-o", "json")
        loaded: dict[str, Any] = json.loads(text)
        return loaded

    @staticmethod
    def stop_process(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def unmount_all(self) -> None:
        """Lazily unmount anything a previous run left mounted under the demo directory."""
        if not self.root:
            return
        base = str(self.base)
        with open("/proc/self/mountinfo") as handle:
            points = [line.split()[4] for line in handle]
        for point in sorted((p for p in points if p == base or p.startswith(base + "/")),
                            key=len, reverse=True):  # fmt: skip
            subprocess.run(["umount", "-l", point], check=False)

    def cleanup_files(self) -> None:
        self.unmount_all()
        for name in ("cache", "kubelet", "csi.sock"):
            path = self.base / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists():
                path.unlink()
        say(f"cleaned up (logs kept under {self.base})")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main() -> int:
    with _signals(), contextlib.ExitStack() as stack:
        try:
            Demo(stack).run()
        except KeyboardInterrupt:
            say("\ninterrupted: stopping and cleaning up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
