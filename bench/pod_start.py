"""pod-start: how long a Pod with a model volume takes to start on the real node, cold and warm.

The real one-node cluster of the end-to-end tests (``devkit/realnode``: kube-apiserver,
kubelet, containerd, the chart's release with the images ``make image`` builds) and the fixture
hub. Each run publishes a new 1 GiB model (a repository of its own, so a new digest and a cold
cache), then:

- **cold**: one Pod mounting it on a node that holds none of it (the download, the streaming
  verification and the publish happen inside its volume setup);
- **warm** against **no volume**, in interleaved rounds (no volume, warm, no volume, warm...):
  a Pod mounting the now published model, and the same busybox Pod without any volume.

Per Pod: create to Running (the create call, then the watch event that shows the phase), the
time to its first byte read (the container reads one byte of the model, or of its own binary
without a volume, and prints ``/proc/uptime``, the host's boot clock, which the create time is
taken on too), and the bytes the hub served meanwhile. Reported: the medians of the runs; the
target is warm <= 1.2x the no-volume Pod (a ratio >= 0.83 below, "better" meaning faster).

Needs what the end-to-end tests need (root, ``$MODEL_MANAGER_SHARED_KUBE``, containerd...);
without it the benchmark says what is missing and reports nothing. ``BENCH_POD_START_RUNS`` (3) and
``BENCH_POD_START_ROUNDS`` (5 warm/no-volume pairs per run) change the counts,
``BENCH_POD_START_MIB`` (1024) the model's size.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench import result
from devkit import fixturehub
from devkit.realnode import deploy, objects, release_values, rig

RUNS = int(os.environ.get("BENCH_POD_START_RUNS", "3"))
ROUNDS = int(os.environ.get("BENCH_POD_START_ROUNDS", "5"))
MODEL_MIB = int(os.environ.get("BENCH_POD_START_MIB", "1024"))
NAMESPACE = "bench-pod-start"
WEIGHTS = "model.safetensors"
CONFIG = b'{"model_type": "bench", "hidden_size": 8}\n'
READY_TIMEOUT = 600.0


@dataclass
class Start:
    running: float
    """Seconds from the create call to the watch event showing phase Running."""
    first_byte: float
    """Seconds from the create call to the container's first byte read."""
    hub_bytes: int


def boot_clock() -> float:
    """The clock ``/proc/uptime`` reads, in a container as on the host (no time namespace)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _script(path: str) -> str:
    return f"head -c 1 {path} > /dev/null && cat /proc/uptime && exec sleep 3600"


class Starter:
    """Creates one Pod at a time, measures it, deletes it and waits until it is gone."""

    def __init__(self, cluster: rig.Rig, hub: fixturehub.Hub) -> None:
        from kubernetes import client, config

        api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(cluster.kubeconfig), context="admin", persist_config=False
        )
        self.core: Any = client.CoreV1Api(api_client)
        self.cluster = cluster
        self.hub = hub
        self.count = 0

    def start(self, kind: str, attributes: dict[str, str] | None) -> Start:
        import yaml
        from kubernetes import watch

        self.count += 1
        name = f"{kind}-{self.count}"
        path = f"/models/{WEIGHTS}" if attributes is not None else "/bin/busybox"
        body = yaml.safe_load(objects.pod(name, NAMESPACE, _script(path), attributes=attributes,
                                          label="pod-start"))  # fmt: skip
        served = self.hub.bytes_served()
        created = boot_clock()
        self.core.create_namespaced_pod(NAMESPACE, body)
        stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
        running = None
        for event in stream.stream(self.core.list_namespaced_pod, NAMESPACE,
                                   field_selector=f"metadata.name={name}",
                                   timeout_seconds=int(READY_TIMEOUT)):  # fmt: skip
            phase = event["object"].status.phase
            if phase == "Running":
                running = boot_clock() - created
                stream.stop()
            elif phase in ("Failed", "Succeeded"):
                stream.stop()
        if running is None:
            raise rig.RigError(f"Pod {name} did not run\n" + self.cluster.diagnose(NAMESPACE))
        first_byte = self._first_byte(name) - created
        hub_bytes = self.hub.bytes_served() - served
        self._delete(name)
        return Start(running, first_byte, hub_bytes)

    def _first_byte(self, name: str) -> float:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            log = self.core.read_namespaced_pod_log(name, NAMESPACE)
            if log.strip():
                return float(log.split()[0])
            time.sleep(0.05)
        raise rig.RigError(f"Pod {name} printed no time\n" + self.cluster.diagnose(NAMESPACE))

    def _delete(self, name: str) -> None:
        from kubernetes.client.rest import ApiException

        self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_pod(name, NAMESPACE)
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            time.sleep(0.1)
        raise rig.RigError(f"Pod {name} not deleted\n" + self.cluster.diagnose(NAMESPACE))


@dataclass
class Run:
    cold: Start
    warm: list[Start]
    bare: list[Start]


def one_run(index: int, cluster: rig.Rig, hub: fixturehub.Hub, starter: Starter) -> Run:
    repository = f"bench/pod-start-{index}"
    hub.add_repo(repository, {"config.json": CONFIG, WEIGHTS: MODEL_MIB << 20})
    attributes = objects.artifact(cluster, NAMESPACE, f"model-{index}", repository)
    cold = starter.start("cold", attributes)
    warm: list[Start] = []
    bare: list[Start] = []
    for _ in range(ROUNDS):
        bare.append(starter.start("bare", None))
        warm.append(starter.start("warm", attributes))
    return Run(cold, warm, bare)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def measure() -> list[Run]:
    images = deploy.build_images()
    with rig.running() as cluster:
        for archive in images.values():
            cluster.import_image(archive)
        with deploy.hub_on_node() as hub:
            deploy.install(cluster, release_values.values(hub, cluster), "values-bench.yaml")
            objects.wait_store_ready(cluster, timeout=300)
            cluster.kubectl("create", "namespace", NAMESPACE)
            starter = Starter(cluster, hub)
            starter.start("bare", None)  # the first Pod of a node pays for its first sandbox
            return [one_run(i, cluster, hub, starter) for i in range(RUNS)]


def main() -> None:
    lacking = rig.missing()
    if os.environ.get("MODEL_MANAGER_E2E") == "0":
        lacking.append("MODEL_MANAGER_E2E not 0")
    if rig.WORK.exists():
        rig.Rig().down()  # an aborted run's processes, mounts and netns
    lacking += [f"{what} free" for what in rig.busy()]
    if lacking:
        print("pod-start: not run; the real node needs: " + ", ".join(lacking), file=sys.stderr)
        return
    runs = measure()
    size = MODEL_MIB << 20
    cold_running = _median([r.cold.running for r in runs])
    cold_first = _median([r.cold.first_byte for r in runs])
    warm_running = [_median([s.running for s in r.warm]) for r in runs]
    bare_running = [_median([s.running for s in r.bare]) for r in runs]
    warm_first = [_median([s.first_byte for s in r.warm]) for r in runs]
    bare_first = [_median([s.first_byte for s in r.bare]) for r in runs]
    pairs = [(w.running, b.running) for r in runs for w, b in zip(r.warm, r.bare, strict=True)]
    params = {
        "model_bytes": size, "runs": RUNS, "rounds_per_run": ROUNDS,
        "cold_running_s": [round(r.cold.running, 3) for r in runs],
        "cold_first_byte_s": [round(r.cold.first_byte, 3) for r in runs],
        "cold_hub_bytes": [r.cold.hub_bytes for r in runs],
        "warm_running_s": [round(v, 3) for v in warm_running],
        "no_volume_running_s": [round(v, 3) for v in bare_running],
        "warm_first_byte_s": [round(v, 3) for v in warm_first],
        "no_volume_first_byte_s": [round(v, 3) for v in bare_first],
        "warm_hub_bytes": sum(s.hub_bytes for r in runs for s in r.warm),
        "load_average": os.getloadavg(),
    }  # fmt: skip
    result.report("pod-start-warm", _median(warm_running), "s", _median(bare_running),
                  higher_is_better=False, params=params, rounds=pairs)  # fmt: skip
    result.report("pod-start-warm-first-byte", _median(warm_first), "s", _median(bare_first),
                  higher_is_better=False,
                  rounds=[(w.first_byte, b.first_byte) for r in runs
                          for w, b in zip(r.warm, r.bare, strict=True)])  # fmt: skip
    result.report("pod-start-cold", cold_running, "s", _median(bare_running),
                  higher_is_better=False,
                  params={"first_byte_s": round(cold_first, 3),
                          "hub_bytes_per_model": _median([r.cold.hub_bytes for r in runs]) / size,
                          "throughput_MiB_s": round(MODEL_MIB / cold_running, 1)})  # fmt: skip
    print(f"pod-start: cold {cold_running:.2f} s to Running, {cold_first:.2f} s to the first "
          f"byte, hub bytes {[r.cold.hub_bytes for r in runs]} for {size} per model; warm "
          f"{_median(warm_running):.3f} s against {_median(bare_running):.3f} s with no volume "
          f"(target warm <= 1.2x); warm hub bytes {params['warm_hub_bytes']}")


if __name__ == "__main__":
    main()
