"""The standalone server's store.db replaced by an older copy while its clients run (a backup
restored, a volume copied back): the server continues numbering above every resourceVersion it
ever handed out (its mark beside the store, ``store.db-mark``), says so in its log and metrics,
and expires every earlier version, so each client of this project lists again and rebuilds its
state from what the store holds now: the plugin's informer and the worker's (both the one
``kube.informer`` loop, over HTTP), the Python client's ``wait_resolved`` and the kubectl
plugin's ``progress`` view."""

from __future__ import annotations

import asyncio
import io
import pathlib
import shutil
from collections.abc import Callable
from typing import Any

from rich.console import Console

import kube
from controllers.runtime import client as clients
from controllers.runtime import informer as controller_informers
from controllers.sources import kubeapi
from devkit.harness import apiserver as support
from kube import gpustack
from kubectlmodel import progress
from nodeplugin import apiclient, artifacts
from tests.support import kubeclient
from timing import backoff as backoffs
from timing import clock as clocks

NS = "went-back"
COLLECTION = f"/apis/worker.gpustack.ai/v1/namespaces/{NS}/modelartifacts"
RESOLVED = {"conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved",
                            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def _version(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def _until(what: str, probe: Callable[[], bool], server: support.RunningServer) -> None:
    try:
        async with asyncio.timeout(60):
            while not probe():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{what} did not happen:\n{server.log()[-4000:]}") from None


async def test_an_older_copy_of_the_store_is_fenced_and_every_client_lists_again(
        fresh_apiserver: support.RunningServer) -> None:
    servers = [fresh_apiserver]
    data = fresh_apiserver.data_dir
    seen: list[int] = []  # every resourceVersion handed out before the store goes back
    try:
        with fresh_apiserver.client() as http:
            for name in ("a", "b"):
                created = http.post(COLLECTION, json=kubeclient.artifact(name, NS))
                seen.append(_version(created.raise_for_status().json()))
        fresh_apiserver.stop()
        older = data / "store.db.older"
        shutil.copyfile(data / "store.db", older)  # a clean stop folded the WAL into the file
        servers.append(support.start(data, port=fresh_apiserver.port))
        with servers[-1].client() as http:
            created = http.post(COLLECTION, json=kubeclient.artifact("c", NS))
            seen.append(_version(created.raise_for_status().json()))
            labelled = http.patch(f"{COLLECTION}/a", json={"metadata": {"labels": {"x": "y"}}},
                                  headers={"content-type": "application/merge-patch+json"})
            seen.append(_version(labelled.raise_for_status().json()))
            seen.append(_version(http.get(COLLECTION).json()))
        await _clients_across_the_roll(servers, older, max(seen))
    finally:
        for server in servers:
            server.kill()


async def _clients_across_the_roll(servers: list[support.RunningServer], older: pathlib.Path,
                                   held: int) -> None:
    server = servers[-1]
    async with kube.Client.from_kubeconfig(server.kubeconfig) as client:
        plugin = artifacts.Informer(apiclient.KubeArtifactClient(client, owns_client=False),
                                    retry_initial=0.05, retry_max=0.5)
        worker = controller_informers.Informer(
            kubeapi.KubeApi(client), clients.MODEL_ARTIFACTS, clocks.SystemClock(),
            backoff=backoffs.Backoff(0.05, 0.5))
        tasks = [asyncio.create_task(plugin.run()), asyncio.create_task(worker.run())]
        models = gpustack.ModelManager(client)
        view = progress.Command(models, NS, "c", console=Console(file=io.StringIO()),
                                out=io.StringIO())
        try:
            await plugin.wait_synced()
            await worker.synced.wait()
            assert plugin.get(NS, "c") is not None and worker.get(NS, "c") is not None
            await view.take()
            waiting = asyncio.create_task(models.wait_resolved(NS, "a", timeout=120))
            tasks.append(waiting)
            await asyncio.sleep(0.2)  # it watches from the version it read

            server.stop()
            shutil.copyfile(older, server.data_dir / "store.db")
            for leftover in ("store.db-wal", "store.db-shm"):
                (server.data_dir / leftover).unlink(missing_ok=True)
            server = await asyncio.to_thread(support.start, server.data_dir, port=server.port)
            servers.append(server)
            assert "behind the revision mark" in server.log()

            # both informers list again: c (gone with the newer store) leaves their copies,
            # a is back without its label
            await _until("the plugin's relist", lambda: plugin.get(NS, "c") is None, server)
            await _until("the worker's relist", lambda: worker.get(NS, "c") is None, server)
            assert plugin.lists >= 2 and plugin.get(NS, "a") is not None
            assert sorted(worker.keys()) == [(NS, "a"), (NS, "b")]
            assert "x" not in (worker.get(NS, "a") or {})["metadata"].get("labels", {})

            # what happens now reaches them, under versions never handed out before
            with server.client() as admin, server.client(token=server.worker_token) as as_worker:
                again = admin.post(COLLECTION, json=kubeclient.artifact("c", NS))
                assert again.status_code == 201, again.text
                recreated = again.json()
                resolved = as_worker.patch(
                    f"{COLLECTION}/a/status", json={"status": RESOLVED},
                    headers={"content-type": "application/merge-patch+json"})
                assert resolved.status_code == 200, resolved.text
            assert _version(recreated) > held and _version(resolved.json()) > held
            await _until("the new c in the plugin's copy", lambda: (
                (found := plugin.get(NS, "c")) is not None
                and found.uid == recreated["metadata"]["uid"]), server)
            # the Python client read the artifact again after the 410 and saw it resolved
            assert (await asyncio.wait_for(waiting, 60)).resolved

            # the kubectl plugin's view of c starts over: another object
            await view.take()
            assert view.restarts == 1
            with server.client() as http:
                metrics = http.get("/metrics").text
            assert "gpustack_model_manager_apiserver_storage_revision_fences_total 1.0" in metrics
            mark = int((server.data_dir / "store.db-mark").read_text())
            assert mark > held
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def test_the_mark_file_is_kept_beside_the_store(fresh_apiserver: support.RunningServer) -> None:
    with fresh_apiserver.client() as http:
        created = http.post(COLLECTION, json=kubeclient.artifact("m", NS)).raise_for_status()
    fresh_apiserver.stop()
    mark = fresh_apiserver.data_dir / "store.db-mark"
    assert int(mark.read_text()) == _version(created.json())  # exact after a clean stop
    assert mark.stat().st_mode & 0o777 == 0o600
