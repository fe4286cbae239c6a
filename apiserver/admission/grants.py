"""A ModelPrefetch's grant (docs/api.md, "ModelPrefetch admission"): ``PrefetchGrant``.

- a new prefetch names its ``bindingRef`` (a grant has no default: an administrator creates a
  ModelStoreBinding in the namespace);
- with the server's pool-layer facts (``facts.governance``; without them only the shape is
  judged), on a create and on a change of the spec:

  - the binding exists;
  - pinning needs the binding's ``allowPinned``;
  - the target set lies inside the stores the binding names: every node running the plugin that
    ``placement.nodeSelector`` selects is merged from one of them (``NodeModelStore.spec.store``);
    the refusal counts the nodes outside and names the stores, never a node;
  - the projection fits the budget: per distinct digest among the binding's prefetches (this one
    included), the resolved size times the widest node count asked of it. An artifact not
    resolved yet contributes nothing; the binding's usage reports what the projection could not
    see (``controllers/bindings``).
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.admission import attributes, facts
from apiserver.registry import strategy
from openapi import fields, resources, wire
from openapi.kinds import modelartifact, modelprefetch, modelstorebinding

KIND = resources.MODEL_PREFETCH.kind
MAX_NAMED = 8


def targets(governance: facts.Governance, prefetch: wire.Readable,
            stores: set[str]) -> tuple[int, int]:
    """(nodes inside the stores, nodes outside) the prefetch's placement selects."""
    selector = modelprefetch.node_selector(prefetch)
    inside = outside = 0
    for node, store in governance.plugin_nodes():
        if selector is None:
            inside += store in stores
        elif modelprefetch.selects(selector, governance.labels(node)):
            if store in stores:
                inside += 1
            else:
                outside += 1
    return inside, outside


def projection(governance: facts.Governance, namespace: str, binding: str, stores: set[str],
               candidate: wire.Obj) -> int:
    """Bytes the binding's prefetches would hold: per digest, size x the widest node count."""
    widest: dict[str, tuple[int, int]] = {}
    others = [p for p in governance.prefetches(namespace)
              if modelprefetch.binding_name(p) == binding
              and wire.key_of(p) != wire.key_of(candidate)
              and not wire.dig(p, "metadata", "deletionTimestamp")]
    for prefetch in [*others, candidate]:
        found = governance.artifact(namespace, modelprefetch.artifact_name(prefetch))
        digest = modelartifact.manifest_digest(found or {})
        size = modelartifact.size_bytes(found or {})
        if not digest or size is None:
            continue  # unresolved: no size to project
        count, _ = targets(governance, prefetch, stores)
        held = widest.get(digest, (size, 0))
        widest[digest] = (size, max(held[1], count))
    return sum(size * count for size, count in widest.values())


class PrefetchGrant:
    name = "PrefetchGrant"

    def __init__(self, cluster: facts.ClusterFacts) -> None:
        self.cluster = cluster

    def handles(self, write: strategy.Write) -> bool:
        return write.info.kind == KIND and write.subresource == ""

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        obj = write.obj
        name = modelprefetch.binding_name(obj)
        if write.operation == "CREATE" and not name:
            return attributes.unrefused(found, [fields.required(
                "spec.bindingRef", "a prefetch is admitted under a ModelStoreBinding of its "
                "namespace (its budget, its stores, its right to pin); an administrator "
                "creates one")])
        governance = self.cluster.governance
        if governance is None or not name or not governance.ready():
            return []
        if write.old is not None and modelprefetch.spec(write.old) == modelprefetch.spec(obj):
            return []
        namespace = wire.text(obj, "metadata", "namespace")
        binding = governance.binding(namespace, name)
        if binding is None:
            return attributes.unrefused(found, [fields.invalid(
                "spec.bindingRef.name", name, f"no ModelStoreBinding of that name in namespace "
                f"{namespace}: an administrator grants one")])
        problems: list[fields.FieldError] = []
        if modelprefetch.pinned(obj) and not modelstorebinding.allow_pinned(binding):
            problems.append(fields.forbidden(
                "spec.retention.pinned", f"ModelStoreBinding {name} does not allow pinning "
                "(allowPinned is false): warm without pinning, or ask an administrator to "
                "turn allowPinned on"))
        stores = set(modelstorebinding.store_names(binding))
        _, outside = targets(governance, obj, stores)
        if outside:
            named = ", ".join(sorted(stores)[:MAX_NAMED])
            problems.append(fields.forbidden(
                "spec.placement.nodeSelector", f"selects {outside} node(s) outside every "
                f"ModelStore the binding {name} names ({named}): narrow the selector to "
                "those stores' nodes"))
        quota = modelstorebinding.quota_bytes(binding)
        if quota is not None and not problems:
            projected = projection(governance, namespace, name, stores, obj)
            if projected > quota:
                problems.append(fields.forbidden(
                    "spec.bindingRef", f"the projection of ModelStoreBinding {name}'s "
                    f"prefetches, this one included, is {projected} bytes (each resolved "
                    f"digest's size times the widest node count asked of it), past its budget "
                    f"of {quota} bytes"))
        return attributes.unrefused(found, problems)
