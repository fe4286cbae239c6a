"""The controller set for each mode comes from one table (``assembly.REGISTERED``): the two halves
of ``--controllers=external`` are exactly the embedded set, every registration lives in its own
folder's ``wiring.py`` and every such folder is registered, a controller that writes our objects
whole is refused where there is no in-process client, and a real build gives each mode its
controllers over one informer per resource."""

from __future__ import annotations

import importlib
import pathlib

import pytest

from apiserver.auth import user as users
from apiserver.registry import build as registries
from apiserver.wiring import inprocess
from controllers import assembly, config, registration
from controllers.runtime import client as clients
from controllers.sources import kubeapi
from devkit import clock as manual
from openapi import resources

PACKAGE = pathlib.Path(assembly.__file__).parent
WORKER = "system:serviceaccount:gpustack-system:model-manager-worker"


def names(mode: assembly.Mode) -> set[str]:
    return {r.name for r in assembly.selected(mode)}


def test_the_two_halves_of_external_are_the_embedded_set() -> None:
    process, server = names(assembly.Mode.PROCESS), names(assembly.Mode.SERVER_PART)
    assert process | server == names(assembly.Mode.EMBEDDED)
    assert not process & server
    assert names(assembly.Mode.EMBEDDED) == {r.name for r in assembly.REGISTERED}
    assert names(assembly.Mode.VIEW_ONLY) == set()
    # what each half is today (docs/controllers.md, Modes)
    assert process == {"resolver", "prefetches", "nodestores.pools", "bindings", "warmgate"}
    assert server == {"nodestores", "prefetches.pins"}
    assert all(registration.Need.WRITER in r.needs for r in assembly.selected(
        assembly.Mode.SERVER_PART))


def test_every_registration_is_its_folders_and_every_folder_is_registered() -> None:
    registered = {r.name: r for r in assembly.REGISTERED}
    assert len(registered) == len(assembly.REGISTERED), "a name registered twice"
    for name, found in registered.items():
        folder = name.split(".", 1)[0]
        assert (PACKAGE / folder / "wiring.py").is_file(), name
        assert found.build.__module__ == f"controllers.{folder}.wiring", name
    for wiring in sorted(PACKAGE.glob("*/wiring.py")):
        module = importlib.import_module(f"controllers.{wiring.parent.name}.wiring")
        declared = [v for v in vars(module).values() if isinstance(v, registration.Registration)]
        assert declared, f"{wiring.parent.name}/wiring.py declares no registration"
        for each in declared:
            assert registered.get(each.name) is each, f"{each.name} is not in REGISTERED"


def _inputs(registry: registries.Registry, tmp_path: pathlib.Path, *,
            writer: bool) -> assembly.Inputs:
    api = inprocess.RegistryClient(registry, user=users.UserInfo(WORKER), worker_username=WORKER)
    return assembly.Inputs(config=config.Settings(nodes=(("node-1", ""),)),
                           clock=manual.ManualClock(), api=api, state_dir=tmp_path,
                           writer=api if writer else None)


def test_a_writer_is_refused_where_there_is_no_in_process_client(
        registry: registries.Registry, tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="controller nodestores needs the in-process client"):
        assembly.build(assembly.Mode.EMBEDDED, _inputs(registry, tmp_path, writer=False))
    found = assembly.build(assembly.Mode.PROCESS, _inputs(registry, tmp_path, writer=False))
    assert set(found.names()) == names(assembly.Mode.PROCESS)


@pytest.mark.parametrize("mode", list(assembly.Mode))
async def test_a_build_runs_its_modes_controllers(
        mode: assembly.Mode, registry: registries.Registry, tmp_path: pathlib.Path) -> None:
    found = assembly.build(mode, _inputs(registry, tmp_path, writer=True))
    assert set(found.names()) == names(mode)
    # the prefetches' two controllers read one informer of the prefetches
    prefetch_informers = [k for k in found.deps.informers if k[1] == clients.MODEL_PREFETCHES]
    assert len(prefetch_informers) == (1 if {"prefetches", "prefetches.pins"} & names(mode)
                                       else 0)
    found.start_view()
    found.start_controllers()
    await found.view.index.wait_synced()
    await found.stop()


def test_the_client_over_kube_apiserver_has_a_model_for_every_kind_we_serve() -> None:
    """``python -m controllers`` lists every served kind (it could not list ModelPrefetches)."""
    for info in resources.SERVED:
        assert clients.ours(info) in kubeapi.MODELS, info.kind
