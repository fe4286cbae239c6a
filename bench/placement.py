"""placement: time from Pod create to its first byte read, warm-preferred against unmodified
Pods, on two real nodes (``devkit/realnode/twonodes.py``: the rig's node A and ``vm2``).

Each round publishes a new model (a repository of its own: a new digest, cold on both nodes),
makes it an artifact in two namespaces (one digest) and warms node A with a ModelPrefetch. Then,
in an order that alternates between rounds, one Pod in each namespace mounting it:

- **preferred**: in a namespace the Pod webhooks see; it names only the artifact and gets the
  attributes and the preferred term for A;
- **unmodified**: in a namespace the chart excludes from the webhooks
  (``apiserver.podWebhook.excludeNamespaces``), with all three attributes set by hand, as a Pod
  was before the webhooks: kube-scheduler places it on either node, and on B it downloads.

Per Pod: create to the first byte read (the container reads one byte of the model and prints
``/proc/uptime``, as ``pod_start`` does), its node and the hub bytes served meanwhile. Reported:
the medians and their ratio (unmodified / preferred, higher is better for the preference), from
the interleaved rounds of one run.

Needs what the end-to-end tests need plus ``node-ns-up``; without it the benchmark says what is
missing and reports nothing. ``BENCH_PLACEMENT_ROUNDS`` (6) and ``BENCH_PLACEMENT_MIB`` (256)
change the count and the model's size.
"""

from __future__ import annotations

import os
import statistics
import sys

from bench import pod_start, result
from devkit import fixturehub
from devkit.realnode import deploy, objects, rig, twonodes

ROUNDS = int(os.environ.get("BENCH_PLACEMENT_ROUNDS", "6"))
MODEL_MIB = int(os.environ.get("BENCH_PLACEMENT_MIB", "256"))
SEEN = "bench-placed"
UNSEEN = "bench-unplaced"


def one_round(index: int, cluster: rig.Rig, hub: fixturehub.Hub, preferred: pod_start.Starter,
              unmodified: pod_start.Starter) -> tuple[pod_start.Start, pod_start.Start]:
    repository = f"bench/placement-{index}"
    hub.add_repo(repository, {"config.json": pod_start.CONFIG,
                              pod_start.WEIGHTS: MODEL_MIB << 20})
    name = f"model-{index}"
    objects.artifact(cluster, SEEN, name, repository)
    attributes = objects.artifact(cluster, UNSEEN, name, repository)
    twonodes.prefetch(cluster, SEEN, f"warm-{index}", name, cluster.node_name)
    if index % 2:
        cold = unmodified.start("unmodified", attributes)
        warm = preferred.start("preferred", {"artifact": name})
    else:
        warm = preferred.start("preferred", {"artifact": name})
        cold = unmodified.start("unmodified", attributes)
    return warm, cold


def measure() -> tuple[list[tuple[pod_start.Start, pod_start.Start]], list[str], list[str]]:
    images = deploy.build_images()
    cluster = rig.Rig()
    try:
        twonodes.up(cluster, images, {})
        with deploy.hub_on_node() as hub:
            values = twonodes.values(hub, cluster)
            values["apiserver"]["podWebhook"] = {"excludeNamespaces": [UNSEEN]}
            deploy.install(cluster, values, "values-bench-placement.yaml")
            twonodes.wait_both_ready(cluster)
            for namespace in (SEEN, UNSEEN):
                cluster.kubectl("create", "namespace", namespace)
            preferred = pod_start.Starter(cluster, hub, SEEN)
            unmodified = pod_start.Starter(cluster, hub, UNSEEN)
            # each node's first Pod pays for its first sandbox
            preferred.start("bare", None)
            unmodified.start("bare", None)
            preferred.nodes.clear()
            unmodified.nodes.clear()
            pairs = [one_round(i, cluster, hub, preferred, unmodified) for i in range(ROUNDS)]
            return pairs, preferred.nodes, unmodified.nodes
    finally:
        cluster.down()


def main() -> None:
    lacking = rig.missing() + rig.missing_more_nodes()
    if os.environ.get("MODEL_MANAGER_E2E") == "0":
        lacking.append("MODEL_MANAGER_E2E not 0")
    if rig.WORK.exists():
        rig.Rig().down()  # an aborted run's processes, mounts and netns
    lacking += [f"{what} free" for what in rig.busy()]
    if lacking:
        print("placement: not run; two real nodes need: " + ", ".join(lacking), file=sys.stderr)
        return
    pairs, preferred_nodes, unmodified_nodes = measure()
    preferred = statistics.median(w.first_byte for w, _ in pairs)
    unmodified = statistics.median(c.first_byte for _, c in pairs)
    params = {
        "model_bytes": MODEL_MIB << 20, "rounds": ROUNDS,
        "preferred_first_byte_s": [round(w.first_byte, 3) for w, _ in pairs],
        "unmodified_first_byte_s": [round(c.first_byte, 3) for _, c in pairs],
        "preferred_nodes": preferred_nodes, "unmodified_nodes": unmodified_nodes,
        "preferred_hub_bytes": sum(w.hub_bytes for w, _ in pairs),
        "unmodified_hub_bytes": sum(c.hub_bytes for _, c in pairs),
        "load_average": os.getloadavg(),
    }  # fmt: skip
    result.report("placement-first-byte", preferred, "s", unmodified, higher_is_better=False,
                  params=params, rounds=[(w.first_byte, c.first_byte) for w, c in pairs])
    print(f"placement: first byte {preferred:.3f} s warm-preferred against {unmodified:.3f} s "
          f"unmodified (x{unmodified / preferred:.2f}); preferred on {preferred_nodes}, "
          f"unmodified on {unmodified_nodes}; hub bytes preferred {params['preferred_hub_bytes']}"
          f", unmodified {params['unmodified_hub_bytes']}")


if __name__ == "__main__":
    main()
