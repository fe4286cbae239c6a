"""The real cluster: the binaries and reference scripts of ``$MODEL_MANAGER_SHARED_KUBE``, run
with this harness's directories, then torn down completely whatever happened.

The scripts are the known-good recipe for this machine kind (cgroup v1 with ``failCgroupV1:
false``, ``restrict_oom_score_adj`` when root lacks CAP_SYS_RESOURCE, the ``agg`` network
namespace, the pause and busybox images); running them keeps one copy of those quirks. The
harness owns everything around them: what must exist first, where state lives, the images, and
the teardown, which the scripts leave to the caller."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence

from devkit import helm
from openapi import volume

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("MODEL_MANAGER_SHARED_KUBE", REPO.parent / "shared" / "kube"))
KUBE_BIN = pathlib.Path(os.environ.get("KUBE_BIN", REPO / ".local" / "kube-bin"))
WORK = pathlib.Path(os.environ.get("MODEL_MANAGER_E2E_DIR", "/tmp/model-manager-e2e"))
SOCK = "/run/containerd/containerd.sock"
KUBELET_DIR = pathlib.Path("/var/lib/kubelet")
NODE_IP = "10.250.0.1"  # cluster-up's host-side veth: reachable from Pods and the agg netns
PORTS = (6443, 2379, 2380, 10250, 10257, 10259)
COMMANDS = ("containerd", "runc", "ctr", "ip", "xz", "openssl", "etcd", "kubectl", "curl",
            "mmdebstrap")  # fmt: skip


def missing() -> list[str]:
    """What this machine lacks for the real node, each named; empty when it can run."""
    lacking: list[str] = []
    if not (SHARED / "cluster-up").exists() or not (SHARED / "bin" / "kubelet.xz").exists():
        lacking.append(f"{SHARED} (the Kubernetes binaries and scripts)")
    if os.geteuid() != 0:
        lacking.append("root (kubelet, containerd and mounts)")
    lacking += [f"{name} on PATH" for name in COMMANDS if shutil.which(name) is None]
    if not pathlib.Path("/usr/lib/cni/bridge").exists():
        lacking.append("/usr/lib/cni/bridge (containernetworking-plugins)")
    try:
        helm.binary()
    except RuntimeError:
        lacking.append("helm (make install)")
    return lacking


def busy() -> list[str]:
    """Ports and sockets another cluster on this machine already holds."""
    taken = []
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                taken.append(f"port {port}")
    if pathlib.Path(SOCK).exists() and not (WORK / "node" / "containerd.pid").exists():
        with socket.socket(socket.AF_UNIX) as probe:
            if probe.connect_ex(SOCK) == 0:
                taken.append(SOCK)
    return taken


def missing_more_nodes() -> list[str]:
    """What this machine lacks for a second real node (``node-ns-up``), each named."""
    lacking = [f"{SHARED / name} (a node in its own network and mount namespace)"
               for name in ("node-ns-up", "node-ns-down") if not (SHARED / name).exists()]
    lacking += [f"{name} on PATH" for name in ("nsenter", "unshare") if shutil.which(name) is None]
    return lacking


CACHE_ROOT = pathlib.Path("/var/lib/gpustack/model-manager-e2e")
"""A cache root every node has its own copy of: ``node-ns-up`` binds a node's own directory over
``/var/lib/gpustack`` in its mount namespace (the first node's is the host's)."""


class RigError(AssertionError):
    pass


def _netns_inode(name: str) -> tuple[int, int] | None:
    """The named network namespace (``ip netns``'s) as (device, inode), None when none."""
    try:
        found = os.stat(f"/var/run/netns/{name}")
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _kill_in_netns(inode: tuple[int, int]) -> None:
    """Kill what still runs in a further node's network namespace once ``node-ns-down`` ran:
    its containerd's shims live outside the node's cgroup root, so the script leaves them, and
    they would hold the namespace and its veth (the next ``node-ns-up`` then finds the veth and
    no ``eth0`` in its new namespace)."""
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found = os.stat(entry / "ns" / "net")
        except OSError:
            continue
        held = found.st_dev, found.st_ino
        if held == inode:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


class Rig:
    """Start with ``up()``; ``down()`` always runs (it also clears what an aborted run left)."""

    def __init__(self, work: pathlib.Path = WORK) -> None:
        self.work = work
        self.rig = work / "rig"
        self.node = work / "node"
        self.kubeconfig = self.rig / "kubeconfig"
        self.node_name = socket.gethostname().lower()
        self.env = dict(os.environ, RIG=str(self.rig), NODE=str(self.node),
                        KUBE_BIN=str(KUBE_BIN), DEBIAN_FRONTEND="noninteractive")  # fmt: skip
        self.timings: dict[str, float] = {}
        self.extra: dict[int, str] = {}
        """The nodes ``add_node`` started: N -> node name (``vmN``)."""

    # --- lifecycle -----------------------------------------------------------------------

    def up(self) -> None:
        self.down()  # whatever an aborted run left
        self.work.mkdir(parents=True)
        self._timed("unpack", [str(SHARED / "unpack")])
        self._timed("cluster-up", [str(SHARED / "cluster-up")])
        self._timed("node-up", [str(SHARED / "node-up")])

    def add_node(self, number: int = 2) -> str:
        """A further real node (``node-ns-up``, after ``up``): its own network and mount
        namespaces, containerd, kubelet and ``/var/lib/gpustack``; its name."""
        name = f"vm{number}"
        self._timed(f"node-ns-up {name}", [str(SHARED / "node-ns-up")],
                    env=self._extra_env(number))
        self.extra[number] = name
        return name

    def _extra_env(self, number: int) -> dict[str, str]:
        return dict(self.env, N=str(number), NODE=str(self.work / f"node{number}"),
                    KUBELET_BIN=str(KUBE_BIN / "kubelet"))

    def _timed(self, name: str, argv: Sequence[str],
               env: dict[str, str] | None = None) -> None:
        started = time.monotonic()
        done = subprocess.run(argv, env=env or self.env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        self.timings[name] = time.monotonic() - started
        if done.returncode != 0:
            raise RigError(f"{name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n"
                           + self.logs())  # fmt: skip

    def down(self) -> None:
        """Stop everything by pid file (kubelet, the Pods, containerd, then the control plane),
        unmount what is left under the kubelet and the work directory, drop the netns. The
        further nodes go first (``node-ns-down``: their kubelets, containerds, Pods, netns)."""
        for state in sorted(self.work.glob("node[0-9]*")) if self.work.exists() else []:
            number = int(state.name.removeprefix("node"))
            netns = _netns_inode(f"node{number}")
            subprocess.run([str(SHARED / "node-ns-down")], env=dict(self._extra_env(number),
                           CLEAN="1"), capture_output=True, timeout=180, check=False)
            if netns is not None:
                _kill_in_netns(netns)
        if (self.node / "containerd.pid").exists() or (self.node / "kubelet.pid").exists():
            subprocess.run([str(SHARED / "node-down")], env=dict(self.env, CLEAN="1"),
                           capture_output=True, timeout=180, check=False)  # fmt: skip
        for name in ("sched", "kcm", "kas", "etcd"):
            _stop(self.rig / f"{name}.pid")
        for mount in reversed(mounts_under(KUBELET_DIR, self.work, CACHE_ROOT)):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        # agg (cluster-up's), and the Pods' cni-* that a kubelet stopped before their sandboxes
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in listed.splitlines():
            name = line.split(" ", 1)[0]
            if name == "agg" or name.startswith("cni-"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", "veth-host"], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", "cni0"], capture_output=True, check=False)
        for leftover in (KUBELET_DIR / "plugins" / volume.DRIVER,
                         KUBELET_DIR / "plugins_registry", KUBELET_DIR / "pods",
                         KUBELET_DIR / "csi-sanity", CACHE_ROOT, self.work):
            shutil.rmtree(leftover, ignore_errors=True)
        for stale in ("/etc/cni/net.d/10-rig-bridge.conflist",):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)

    # --- using it --------------------------------------------------------------------------

    def shared_directory(self, path: pathlib.Path) -> pathlib.Path:
        """``path`` as its own shared mount. The plugin's cache is mounted HostToContainer,
        which runc allows only from a shared or slave mount; systemd makes ``/`` shared, this
        machine's ``/`` is private (kubelet makes only its own root directory shared)."""
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        subprocess.run(["mount", "--make-rshared", str(path)], check=True)
        return path

    def kubectl(self, *args: str, user: str = "admin", stdin: str | None = None,
                check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        argv = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--context", user, *args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise RigError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n"
                           f"{done.stdout}\n{done.stderr}")  # fmt: skip
        return done

    def apply(self, manifest: str, *, user: str = "admin") -> None:
        self.kubectl("apply", "-f", "-", user=user, stdin=manifest)

    def import_image(self, archive: pathlib.Path) -> None:
        done = subprocess.run(["ctr", "--address", SOCK, "-n", "k8s.io", "images", "import",
                               str(archive)], capture_output=True, text=True, timeout=300,
                              check=False)  # fmt: skip
        if done.returncode != 0:
            raise RigError(f"ctr images import {archive}: {done.stdout}{done.stderr}")

    def tag_image(self, image: str, tag: str) -> None:
        """``tag`` for ``image`` in the first node's containerd."""
        subprocess.run(["ctr", "--address", SOCK, "-n", "k8s.io", "images", "tag", "--force",
                        image, tag], check=True, capture_output=True)  # fmt: skip

    def import_image_on(self, number: int, archive: pathlib.Path) -> None:
        """``archive`` into node ``vmN``'s own containerd (inside its mount namespace)."""
        pid = (self.work / f"node{number}" / "kubelet.pid").read_text().strip()
        done = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "ctr", "--address",
                               SOCK, "-n", "k8s.io", "images", "import", str(archive)],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RigError(f"ctr images import {archive} on vm{number}: "
                           f"{done.stdout}{done.stderr}")

    def images(self) -> list[str]:
        done = subprocess.run(["ctr", "--address", SOCK, "-n", "k8s.io", "images", "ls", "-q"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.split()

    def logs(self, lines: int = 40) -> str:
        out = []
        for directory in (self.rig, self.node):
            for log in sorted(directory.glob("*.log")) if directory.exists() else []:
                text = log.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {log} (last {lines} lines)\n" + "\n".join(text))
        return "\n".join(out)

    def diagnose(self, namespace: str | None = None) -> str:
        """Pods, events and container logs, for a failure message."""
        parts = []
        scope = ["-n", namespace] if namespace else ["-A"]
        for args in (["get", "pods", "-o", "wide", *scope],
                     ["get", "events", "--sort-by=.lastTimestamp", *scope],
                     ["get", "apiservice", "v1.worker.gpustack.ai", "-o", "yaml"]):  # fmt: skip
            done = self.kubectl(*args, check=False)
            parts.append(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}")
        names = "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name}{'\\n'}{end}"
        pods = self.kubectl("get", "pods", *scope, "-o", names, check=False).stdout.split("\n")
        for line in pods:
            if not line.strip():
                continue
            ns, name = line.split()
            done = self.kubectl("logs", "-n", ns, name, "--all-containers", "--tail=60",
                                check=False)  # fmt: skip
            parts.append(f"$ kubectl logs -n {ns} {name}\n{done.stdout}{done.stderr}")
        return "\n".join(parts)

    def wait(self, what: str, probe: Callable[[], object], *, timeout: float,
             namespace: str | None = None, interval: float = 1.0) -> object:
        """``probe()``'s first truthy answer, or a failure naming ``what`` with the cluster's
        state (exceptions from the probe count as not yet)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = probe()
            except (RigError, subprocess.SubprocessError, ValueError, KeyError) as exc:
                last = exc
            else:
                if last:
                    return last
            time.sleep(interval)
        raise RigError(f"{what}: not within {timeout:.0f}s (last: {last!r})\n"
                       + self.diagnose(namespace))  # fmt: skip


def _stop(pidfile: pathlib.Path) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        for _ in range(60):
            os.kill(pid, 0)
            time.sleep(0.25)
        os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def mounts_under(*roots: pathlib.Path) -> list[str]:
    """Mount points at or below ``roots``, in /proc/self/mountinfo order."""
    found = []
    prefixes = [str(root).rstrip("/") for root in roots]
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return found


@contextlib.contextmanager
def running() -> Iterator[Rig]:
    rig = Rig()
    try:
        rig.up()
        yield rig
    finally:
        rig.down()
