"""The pool layer's rules beyond the schema (docs/api.md, "ModelStore" and "ModelStoreBinding").

- ``StoreSpec`` (ModelStore, create and update): the selector's keys and values are label keys
  and values, and a store stating both watermarks states them in order (``openapi.nodestore``
  owns that rule; one stated alone is checked against the cluster setting where it merges);
- ``BindingSpec`` (ModelStoreBinding, create and update): at least one store (there is no
  default pool a grant falls back to), each name a DNS-1123 subdomain (the schema's list key
  names each once);
- ``FrozenBinding`` (ModelStoreBinding, update): the grant is frozen. ``storeRefs`` cannot move,
  ``quota.bytes`` only grows and ``allowPinned`` only turns on: a grant that shrank under
  consumption would make an admitted prefetch over budget after the fact, and a re-pointed one
  would strand the accounting of everything admitted before the edit. Each is refused at the
  edit, naming the field and the rule.

A binding may name a store that does not exist yet: stores come and go, and a target set outside
every store the binding names is refused where it matters, at the prefetch's admission.
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.admission import attributes, labels
from apiserver.registry import strategy
from openapi import fields, names, nodestore, resources, wire
from openapi.kinds import modelstorebinding as bindings

STORE = resources.MODEL_STORE.kind
BINDING = resources.MODEL_STORE_BINDING.kind


def _spec_write(write: strategy.Write, kind: str) -> bool:
    return write.info.kind == kind and write.subresource == ""


class StoreSpec:
    name = "ModelStoreSpec"

    def handles(self, write: strategy.Write) -> bool:
        return _spec_write(write, STORE)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        spec = wire.mapping(write.obj, "spec")
        problems = labels.selector_problems("spec.nodeSelector", spec.get("nodeSelector"))
        high = wire.integer(spec, "watermarks", "highPercent")
        low = wire.integer(spec, "watermarks", "lowPercent")
        if high is not None and low is not None:
            problem = nodestore.watermarks_problem(high, low)
            if problem:
                problems.append(fields.invalid("spec.watermarks.lowPercent", low, problem))
        return attributes.unrefused(found, problems)


class BindingSpec:
    name = "ModelStoreBindingSpec"

    def handles(self, write: strategy.Write) -> bool:
        return _spec_write(write, BINDING)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        problems: list[fields.FieldError] = []
        refs = wire.dig(write.obj, "spec", "storeRefs")
        if isinstance(refs, list) and not refs:
            problems.append(fields.required(
                "spec.storeRefs", "name at least one ModelStore: a grant has no default pool"))
        for index, ref in enumerate(wire.items(write.obj, "spec", "storeRefs")):
            name = ref.get("name")
            if isinstance(name, str) and name and not names.is_dns_subdomain(name):
                problems.append(fields.invalid(f"spec.storeRefs[{index}].name", name,
                                               labels.SUBDOMAIN_RULE))
        return attributes.unrefused(found, problems)


class FrozenBinding:
    name = "FrozenModelStoreBinding"

    def handles(self, write: strategy.Write) -> bool:
        return (_spec_write(write, BINDING) and write.operation == "UPDATE"
                and write.old is not None)

    def validate(self, write: strategy.Write,
                 found: Sequence[fields.FieldError]) -> list[fields.FieldError]:
        assert write.old is not None
        old, new = write.old, write.obj
        problems: list[fields.FieldError] = []
        if sorted(bindings.store_names(old)) != sorted(bindings.store_names(new)):
            problems.append(fields.forbidden(
                "spec.storeRefs", "storeRefs cannot change after creation: everything admitted "
                "under this grant is accounted against these stores; create another "
                "ModelStoreBinding for other stores"))
        before, after = bindings.quota_bytes(old), bindings.quota_bytes(new)
        if before is not None and after is not None and after < before:
            problems.append(fields.invalid(
                "spec.quota.bytes", after, f"the budget can only grow (it is {before}): a "
                "smaller grant would put prefetches admitted under it over budget"))
        if bindings.allow_pinned(old) and not bindings.allow_pinned(new):
            problems.append(fields.forbidden(
                "spec.allowPinned", "allowPinned can only turn on: pins admitted under it "
                "would lose their grant; delete the namespace's pinned prefetches instead"))
        return attributes.unrefused(found, problems)
