"""``kubectl model`` against the real standalone server over TLS, with a download in progress.

The server's embedded controllers resolve the artifact against the fixture hub; the two nodes'
reports are written as each node's plugin writes them (the plugin identity is bound to one node
at a time, so the server is started once as node-b's, whose attempt failed, then again as
node-a's, which is downloading). The plugin runs as the installed ``kubectl-model`` in a
pseudo-terminal (bars, asserted on the text the terminal shows), piped (a line per update), with
``-o json``, ``nodes`` and ``why``, through kubectl itself, and as a tenant who may read its
namespace's artifacts and their progress but not the node stores.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import pathlib
import pty
import re
import secrets
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devkit import fixturehub
from devkit.harness import apiserver as support
from kube import gpustack
from tests.support import policies
from tests.support.kubectl import Stream

PLUGIN = pathlib.Path(sys.executable).parent / "kubectl-model"
REPO = "org/tiny-plugin"
COMMIT = "d" * 40
MIB = 1024 * 1024
SIZE = 4 * MIB  # model.safetensors and config.json's "{}"
GROUP = "/apis/worker.gpustack.ai/v1"
POLICY = policies.tenant_reader("team-a")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]")


@pytest.fixture(scope="module")
def hub() -> Iterator[fixturehub.Hub]:
    with fixturehub.run() as running:
        running.add_repo(REPO, {"config.json": b"{}", "model.safetensors": 4 * MIB - 2},
                         commit=COMMIT)
        yield running


def _args(hub: fixturehub.Hub, plugin_node: str) -> list[str]:
    return ["--node", "node-a", "--node", "node-b", "--plugin-node", plugin_node,
            "--controllers=embedded", "--huggingface-endpoint", hub.endpoint]


def _plugin_token(server: support.RunningServer) -> str:
    return support.read_tokens(server.data_dir / "tokens.csv")[support.PLUGIN_USER]


def write_node(server: support.RunningServer, node: str, models: list[dict[str, Any]]) -> None:
    """The node's report, written as that node's plugin (the only writer the server admits)."""
    status = {"capacity": {"totalBytes": 100 * MIB, "storedBytes": 5 * MIB, "usedPercent": 5},
              "models": models,
              "conditions": [{"type": "Ready", "status": "True", "reason": "Serving",
                              "message": "serving mounts"}]}
    with server.client(token=_plugin_token(server)) as http:
        answer = http.patch(f"{GROUP}/nodemodelstores/{node}/status",
                            json={"status": status},
                            headers={"Content-Type": "application/merge-patch+json"})
    assert answer.status_code == 200, answer.text


def downloading(digest: str, have: int) -> dict[str, Any]:
    return {"digest": digest, "state": "Downloading", "sizeBytes": SIZE,
            "downloadedBytes": have, "source": "Hub"}


def ready(digest: str) -> dict[str, Any]:
    return {"digest": digest, "state": "Ready", "sizeBytes": SIZE, "downloadedBytes": SIZE,
            "source": "Hub"}


@pytest.fixture(scope="module")
def server(hub: fixturehub.Hub, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[support.RunningServer]:
    data = tmp_path_factory.mktemp("kubectl-model")
    data.chmod(0o700)
    (data / "tokens.csv").write_text(f'{secrets.token_hex(16)},alice,alice-uid,"tenants"\n')
    (data / "tokens.csv").chmod(0o600)
    (data / "policy.yaml").write_text(POLICY)
    first = support.start(data, extra_args=_args(hub, "node-b"))
    try:
        for node in ("node-a", "node-b"):
            first.wait_for(f"{GROUP}/nodemodelstores/{node}")
        with gpustack.SyncModelManager(str(first.kubeconfig)) as models:
            for namespace, name in (("team-a", "tiny"), ("team-b", "other")):
                models.create_artifact(namespace, name, gpustack.HubSource("huggingFace", REPO))
            digest = models.wait_resolved("team-a", "tiny", timeout=60).manifest_digest
            models.wait_resolved("team-b", "other", timeout=60)
        retry = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=10))
        write_node(first, "node-b", [{
            "digest": digest, "state": "Failed", "sizeBytes": SIZE, "downloadedBytes": MIB,
            "source": "Hub", "reason": "SourceUnavailable",
            "message": "the hub answered 503 for model.safetensors",
            "retryTime": retry.strftime("%Y-%m-%dT%H:%M:%SZ")}])
    finally:
        first.stop()
        first.kill()
    with support.running(data, extra_args=_args(hub, "node-a")) as running:
        write_node(running, "node-a", [downloading(digest, MIB)])
        running.wait_for(f"{GROUP}/namespaces/team-a/modelartifacts/tiny/progress")
        yield running


@pytest.fixture
def digest(server: support.RunningServer) -> str:
    """The artifact's digest, with node-a back at 1 MiB of it before each test."""
    found = server.wait_for(f"{GROUP}/namespaces/team-a/modelartifacts/tiny")
    value: str = found["status"]["resolved"]["manifestDigest"]  # type: ignore[index]
    write_node(server, "node-a", [downloading(value, MIB)])
    return value


def tenant_kubeconfig(server: support.RunningServer, directory: pathlib.Path) -> pathlib.Path:
    document: dict[str, Any] = yaml.safe_load(server.kubeconfig.read_text())
    token = support.read_tokens(server.data_dir / "tokens.csv")["alice"]
    document["users"][0]["user"] = {"token": token}
    path = directory / "alice.kubeconfig"
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def plugin(*args: str, kubeconfig: pathlib.Path, timeout: float = 60,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLUGIN), *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=env)  # fmt: skip


# --- piped ---------------------------------------------------------------------------------


def test_piped_one_look_prints_a_line_per_node_and_the_total(
        server: support.RunningServer, digest: str) -> None:
    done = plugin("progress", "tiny", "-n", "team-a", kubeconfig=server.kubeconfig)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tiny  Resolved dddddddddddd, " + digest[:19])
    assert lines[1].startswith("tiny  node-a  Downloading  1.0MiB/4.0MiB  25%  -  eta -")
    assert lines[2].startswith("tiny  node-b  Failed  1.0MiB/4.0MiB  25%  SourceUnavailable;"
                               " the hub answered 503 for model.safetensors; retry in ")
    assert lines[3] == ("tiny  total  0 ready, 1 downloading, 1 failed  1.0MiB/4.0MiB  25%"
                        "  -  eta -  SourceUnavailable x1")
    assert "\x1b" not in done.stdout


def test_piped_watch_prints_each_update_until_ready(server: support.RunningServer,
                                                    digest: str) -> None:
    stream = Stream([str(PLUGIN), "progress", "tiny", "-n", "team-a", "--watch",
                     "--interval", "0.2", "--kubeconfig", str(server.kubeconfig)])
    try:
        stream.wait_for("node-a  Downloading  1.0MiB", timeout=30)
        # a rate times two changes of the node's count
        write_node(server, "node-a", [downloading(digest, 2 * MIB)])
        stream.wait_for("node-a  Downloading  2.0MiB", timeout=30)
        time.sleep(0.5)
        write_node(server, "node-a", [downloading(digest, 3 * MIB)])
        moving = stream.wait_for("node-a  Downloading  3.0MiB", timeout=30)
        write_node(server, "node-a", [ready(digest)])
        stream.wait_for("tiny  total  1 ready, 0 downloading, 1 failed", timeout=30)
        code = stream.process.wait(timeout=30)
    finally:
        err = stream.close()
    assert code == 0, err
    seen = stream.seen
    assert re.search(r"75%  \d+(\.\d)?[KM]iB/s  eta \d+s", moving), moving
    assert "tiny  node-a  Ready  4.0MiB/4.0MiB  100%" in seen
    assert seen[-1].startswith("tiny  total  1 ready, 0 downloading, 1 failed")
    assert stream.lines.empty()
    # a line is printed again only when what it says changed
    assert sum("node-b  Failed" in line for line in seen) == 1


def test_json_prints_the_progress_object(server: support.RunningServer, digest: str) -> None:
    done = plugin("progress", "tiny", "-n", "team-a", "-o", "json",
                  kubeconfig=server.kubeconfig)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["kind"] == "ModelArtifactProgress"
    assert (body["manifestDigest"], body["sizeBytes"]) == (digest, SIZE)
    assert (body["ready"], body["downloading"], body["failed"]) == (0, 1, 1)
    assert body["downloadingBytes"] == MIB
    assert body["failureReasons"] == [{"reason": "SourceUnavailable", "count": 1}]


def test_json_watch_prints_each_change_until_ready(server: support.RunningServer,
                                                  digest: str) -> None:
    stream = Stream([str(PLUGIN), "progress", "tiny", "-n", "team-a", "-o", "json", "-w",
                     "--interval", "0.2", "--kubeconfig", str(server.kubeconfig)])
    try:
        stream.wait_for('"downloading": 1,', timeout=30)
        write_node(server, "node-a", [ready(digest)])
        stream.wait_for('"ready": 1,', timeout=30)
        code = stream.process.wait(timeout=30)
        stream._reader.join(timeout=5)
        while not stream.lines.empty():
            stream.seen.append(stream.lines.get())
    finally:
        err = stream.close()
    assert code == 0, err
    text = "\n".join(stream.seen)
    documents = [json.loads(part) for part in re.split(r"(?<=\n})\n(?={)", text)]
    assert [(d["ready"], d["downloading"]) for d in documents] == [(0, 1), (1, 0)]


# --- a terminal ----------------------------------------------------------------------------


class Terminal:
    """The plugin on a pseudo-terminal of 160 columns; ``screen`` is what it wrote, without
    the escape sequences."""

    def __init__(self, args: list[str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="160", LINES="40")
        env.pop("NO_COLOR", None)
        self.process = subprocess.Popen([str(PLUGIN), *args], stdin=slave, stdout=slave,
                                        stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.master = master
        self.raw = b""

    def read_until(self, *texts: str, pattern: str = "", timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen
            if all(text in screen for text in texts) and re.search(pattern, screen):
                return screen
            if not self._read(0.2) and self.process.poll() is not None:
                break
        raise AssertionError(f"{texts} not on the terminal:\n{self.screen}")

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.raw += chunk
        return bool(chunk)

    def finish(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1):
            pass
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait()
        os.close(self.master)
        return code

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace")).replace("\r", "")


def test_a_terminal_gets_a_bar_per_node_redrawn_until_ready(
        server: support.RunningServer, digest: str) -> None:
    terminal = Terminal(["progress", "tiny", "-n", "team-a", "-w", "--interval", "0.2",
                         "--kubeconfig", str(server.kubeconfig)])
    try:
        screen = terminal.read_until("node-a", "total", "retry in")
        assert "team-a/tiny  Hugging Face org/tiny-plugin@main  Resolved dddddddddddd" in screen
        for heading in ("NODE", "STATE", "PROGRESS", "BYTES", "RATE", "ETA", "DETAIL"):
            assert heading in screen
        node_a = _row(screen, "node-a")
        assert "Downloading" in node_a and "1.0MiB/4.0MiB 25%" in node_a and "━" in node_a
        node_b = _row(screen, "node-b")
        assert "Failed" in node_b and "SourceUnavailable" in node_b
        total = _row(screen, "total")
        assert "0 ready" in total and "1 downloading, 1 failed; SourceUnavailable x1" in total
        assert "1.0MiB/4.0MiB 25%" in total
        write_node(server, "node-a", [downloading(digest, 2 * MIB)])
        terminal.read_until("2.0MiB/4.0MiB 50%")
        time.sleep(0.5)
        write_node(server, "node-a", [downloading(digest, 3 * MIB)])
        screen = terminal.read_until(
            pattern=r"node-a +Downloading .* 3\.0MiB/4\.0MiB 75% +\d+(\.\d)?[KM]iB/s +\d+s")
        assert "━" in _row(screen, "node-a", last=True)
        write_node(server, "node-a", [ready(digest)])
        terminal.read_until("4.0MiB/4.0MiB 100%", "1 ready", "0 downloading, 1 failed")
    finally:
        code = terminal.finish()
    assert code == 0, terminal.screen


def _row(screen: str, first: str, *, last: bool = False) -> str:
    rows = [line for line in screen.splitlines() if line.strip().startswith(first)]
    assert rows, f"no {first} row:\n{screen}"
    return rows[-1] if last else rows[0]


def test_a_terminal_without_watch_draws_once(server: support.RunningServer,
                                             digest: str) -> None:
    terminal = Terminal(["progress", "tiny", "-n", "team-a",
                         "--kubeconfig", str(server.kubeconfig)])
    code = terminal.finish()
    assert code == 0, terminal.screen
    assert "━" in _row(terminal.screen, "node-a")
    assert terminal.screen.count("node-a") == 1


# --- nodes, why ----------------------------------------------------------------------------


def test_nodes_lists_the_stores_with_use_and_content(server: support.RunningServer,
                                                     digest: str) -> None:
    done = plugin("nodes", kubeconfig=server.kubeconfig)
    assert done.returncode == 0, done.stderr
    node_a = _row(done.stdout, "node-a")
    assert "True" in node_a and "5.0MiB/100.0MiB (5% of the filesystem)" in node_a
    assert (f"{digest[:19]} Downloading 1.0MiB/4.0MiB unreferenced team-a/tiny,team-b/other"
            in node_a)  # no Pod mounts it: collectable
    assert f"{digest[:19]} Failed 1.0MiB/4.0MiB SourceUnavailable" in _row(done.stdout, "node-b")
    assert done.stdout.splitlines()[0].split()[:4] == ["NODE", "READY", "POOL", "USED/CAPACITY"]


def test_nodes_shows_the_pool_and_its_switches(server: support.RunningServer) -> None:
    with server.client() as admin:
        made = admin.post(f"{GROUP}/modelstores", json={
            "apiVersion": "worker.gpustack.ai/v1", "kind": "ModelStore",
            "metadata": {"name": "pool-a"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-a"},
                     "operations": {"pauseCollection": True,
                                    "evictDigests": ["sha256:" + "e" * 64]}}})
        assert made.status_code == 201, made.text
        try:
            deadline = time.monotonic() + 30
            while admin.get(f"{GROUP}/nodemodelstores/node-a").json()["spec"].get(
                    "store") != "pool-a" and time.monotonic() < deadline:
                time.sleep(0.05)
            done = plugin("nodes", kubeconfig=server.kubeconfig)
        finally:
            assert admin.delete(f"{GROUP}/modelstores/pool-a").status_code == 200
    assert done.returncode == 0, done.stderr
    assert "pool-a (collection paused, evicting 1)" in _row(done.stdout, "node-a")
    assert _row(done.stdout, "node-b").split()[2] == "-"


def test_why_gives_the_chain_and_the_next_retry(server: support.RunningServer,
                                                digest: str) -> None:
    done = plugin("why", "tiny", "-n", "team-a", kubeconfig=server.kubeconfig)
    assert done.returncode == 1, done.stderr  # not ready: a script's check fails
    lines = done.stdout.splitlines()
    assert lines[0] == ("team-a/tiny is not ready: downloading on 1 node (25%), failed on 1 "
                        "node.")
    assert lines[1].startswith("  Resolved=True Resolved (for ")
    assert lines[2].startswith("  Degraded=False Healthy")
    assert "  progress: 0 ready, 1 downloading, 1 failed, 1.0MiB of 4.0MiB" in lines
    assert "    1 failed with SourceUnavailable" in lines
    assert "  node node-a: Downloading 1.0MiB/4.0MiB" in lines
    node_b = next(line for line in lines if line.startswith("  node node-b"))
    assert re.match(r"  node node-b: Failed 1\.0MiB/4\.0MiB, SourceUnavailable: the hub answered "
                    r"503 for model\.safetensors; retry in \d+m(\d+s)? "
                    r"\(at \d{4}-\d\d-\d\dT", node_b)


def test_why_an_unresolved_artifact(server: support.RunningServer) -> None:
    with gpustack.SyncModelManager(str(server.kubeconfig)) as models:
        models.create_artifact("team-a", "absent", gpustack.HubSource("huggingFace",
                                                                       "org/not-on-the-hub"))
        try:
            deadline = time.monotonic() + 30
            while not models.get_artifact("team-a", "absent").reason and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            done = plugin("why", "absent", "-n", "team-a", kubeconfig=server.kubeconfig)
        finally:
            models.delete_artifact("team-a", "absent")
    assert done.returncode == 1, done.stderr
    verdict, resolved = done.stdout.splitlines()[:2]
    assert verdict.startswith("team-a/absent is not ready: it is not resolved (")
    assert resolved.startswith("  Resolved=False ")
    if "AccessDenied" in resolved:  # the worker's verdict, not the first write (Resolving)
        assert "huggingface.co" not in done.stdout  # the configured hub's host is named
        assert "  this cannot be fixed by waiting; the worker's retry in " in done.stdout


def test_a_missing_artifact_is_kubectls_not_found(server: support.RunningServer) -> None:
    done = plugin("progress", "nope", "-n", "team-a", kubeconfig=server.kubeconfig)
    assert done.returncode == 1
    assert done.stderr.startswith("Error from server (NotFound): ")
    assert done.stdout == ""


# --- the caller's kubeconfig and RBAC ------------------------------------------------------


def test_a_tenant_sees_only_what_the_progress_subresource_shows(
        server: support.RunningServer, digest: str, tmp_path: pathlib.Path) -> None:
    alice = tenant_kubeconfig(server, tmp_path)
    done = plugin("progress", "tiny", "-n", "team-a", kubeconfig=alice)
    assert done.returncode == 0, done.stderr
    assert "node-a" not in done.stdout and "node-b" not in done.stdout
    assert ("tiny  total  0 ready, 1 downloading, 1 failed  1.0MiB/4.0MiB  25%  -  eta -  "
            "SourceUnavailable x1; per node: not permitted to list nodemodelstores"
            ) in done.stdout.splitlines()
    why = plugin("why", "tiny", "-n", "team-a", kubeconfig=alice)
    assert why.returncode == 1, why.stderr  # not ready
    assert "node node-" not in why.stdout
    assert ("  nodes: not shown (you may not list nodemodelstores nor get "
            "modelartifacts/copies)") in why.stdout
    other = plugin("progress", "other", "-n", "team-b", kubeconfig=alice)
    assert other.returncode == 1
    assert other.stderr.startswith('Error from server (Forbidden): ')
    assert 'User "alice" cannot get resource "modelartifacts"' in other.stderr
    stores = plugin("nodes", kubeconfig=alice)
    assert stores.returncode == 1
    assert 'cannot list resource "nodemodelstores"' in stores.stderr


def test_kubectl_runs_it_as_a_plugin_with_the_kubeconfig_from_the_environment(
        server: support.RunningServer, digest: str, tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, PATH=f"{PLUGIN.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               KUBECONFIG=f"{tmp_path / 'absent'}{os.pathsep}{server.kubeconfig}",
               HOME=str(tmp_path))
    done = subprocess.run(["kubectl", "model", "progress", "tiny", "--namespace=team-a"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "tiny  node-a  Downloading  1.0MiB/4.0MiB" in done.stdout
    listed = subprocess.run(["kubectl", "plugin", "list"], capture_output=True, text=True,
                            timeout=60, env=env, check=False)
    assert str(PLUGIN) in listed.stdout
